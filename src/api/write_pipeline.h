#pragma once
// allotd's durable writes, in the order their changes reached memory. A request's write holds
// its place from the moment its handler changed memory (reserve) until the handler has returned
// and its audit entry joined it (seal), so that the change and the entry that records it are one
// commit, and no later write (a scheduling pass that placed the job just submitted) reaches the
// store ahead of it. Writes ahead of an unsealed one go to the store as they come (its group
// commit merges them); writes behind it wait. On allotd's I/O thread only.
//
// A request keeps its write held only while its handler finishes without waiting on I/O (what
// follows a change is building the reply), so the hold is microseconds; a handler must not wait
// for another commit while it holds one (it would wait for itself).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>
#include <memory>

#include "common/status.h"
#include "store/store.h"

namespace allot::api {

class WritePipeline {
 public:
  struct Write;
  using Slot = std::shared_ptr<Write>;
  // `durable` runs on the I/O thread for each batch once it is on disk (or failed).
  WritePipeline(boost::asio::io_context& io, store::Store& store,
                std::function<void(const Status&, uint32_t topics)> durable);

  // Queues a batch that is complete now and waits until it is durable.
  boost::asio::awaitable<void> commit(store::WriteBatch batch);

  // A place in the queue for a batch still being built.
  Slot reserve();
  static void add(const Slot& slot, store::WriteBatch&& batch);
  // The batch is complete: it goes to the store once every write ahead of it has.
  void seal(const Slot& slot);
  // Until the sealed slot's batch is durable.
  boost::asio::awaitable<void> wait(Slot slot);
  // Until every write reserved so far is durable: a reply that shows memory waits here, so that
  // nothing a client was shown is lost to a crash (writes complete in order, so the last one
  // reserved is the one to wait for).
  boost::asio::awaitable<void> settled();

 private:
  void pump();

  boost::asio::io_context& io_;
  store::Store& store_;
  std::function<void(const Status&, uint32_t)> durable_;
  std::deque<Slot> queued_;  // not yet handed to the store, in order
  Slot last_;                // the write reserved last, until it is durable
};

}  // namespace allot::api
