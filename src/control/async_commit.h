#pragma once
// Bridges the store's group commit to Asio coroutines: `co_await asyncCommit(store, batch, ex)`
// resumes on executor `ex` once the batch is durable.

#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <utility>

#include "store/store.h"

namespace allot::control {

template <typename Executor, typename Token>
auto asyncCommit(store::Store& store, store::WriteBatch batch, Executor ex, Token&& token) {
  return boost::asio::async_initiate<Token, void(Status)>(
      [&store, ex](auto handler, store::WriteBatch b) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        auto work = boost::asio::make_work_guard(ex);
        store.submit(std::move(b), [shared, ex, work](Status s) mutable {
          boost::asio::post(ex, [shared, s]() mutable { (*shared)(std::move(s)); });
          work.reset();
        });
      },
      token, std::move(batch));
}

}  // namespace allot::control
