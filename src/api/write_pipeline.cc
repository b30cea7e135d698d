#include "api/write_pipeline.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/event_hub.h"

namespace allot::api {

namespace asio = boost::asio;

struct WritePipeline::Write {
  // Several may wait on one write (its request, and replies waiting for settled()): the timer is
  // armed once, and each waits on it; cancel() wakes them all.
  explicit Write(asio::io_context& io) : wake(io, asio::steady_timer::time_point::max()) {}
  store::WriteBatch batch;
  bool sealed = false;
  bool done = false;
  asio::steady_timer wake;  // cancelled once done
};

WritePipeline::WritePipeline(asio::io_context& io, store::Store& store,
                             std::function<void(const Status&, uint32_t)> durable)
    : io_(io), store_(store), durable_(std::move(durable)) {}

asio::awaitable<void> WritePipeline::commit(store::WriteBatch batch) {
  Slot slot = reserve();
  slot->batch = std::move(batch);
  seal(slot);
  co_await wait(slot);
}

WritePipeline::Slot WritePipeline::reserve() {
  auto slot = std::make_shared<Write>(io_);
  queued_.push_back(slot);
  last_ = slot;
  return slot;
}

void WritePipeline::add(const Slot& slot, store::WriteBatch&& batch) {
  auto& ops = slot->batch.ops;
  // With room for one more op: the audit entry that follows a handler's ops would otherwise
  // reallocate, and move each op again (a job's is a KiB).
  if (ops.capacity() < ops.size() + batch.ops.size())
    ops.reserve(ops.size() + batch.ops.size() + 1);
  for (auto& op : batch.ops) ops.push_back(std::move(op));
}

void WritePipeline::seal(const Slot& slot) {
  slot->sealed = true;
  pump();
}

void WritePipeline::pump() {
  while (!queued_.empty() && queued_.front()->sealed) {
    Slot slot = std::move(queued_.front());
    queued_.pop_front();
    const uint32_t topics = topicsOf(slot->batch);  // before the batch moves to the store
    auto work = asio::make_work_guard(io_);
    store::WriteBatch batch = std::move(slot->batch);
    store_.submit(std::move(batch), [this, slot, topics, work](Status st) mutable {
      // The slot moves on to the I/O thread: its timer is never destroyed on the writer's.
      asio::post(io_, [this, slot = std::move(slot), topics, st = std::move(st)] {
        durable_(st, topics);
        slot->done = true;
        slot->wake.cancel();
        if (last_ == slot) last_.reset();
      });
      work.reset();
    });
  }
}

asio::awaitable<void> WritePipeline::settled() {
  if (last_) co_await wait(last_);
}

asio::awaitable<void> WritePipeline::wait(Slot slot) {
  while (!slot->done) {
    co_await slot->wake.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace allot::api
