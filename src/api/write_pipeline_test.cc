// The order of allotd's writes: a request's write holds its place from its reservation, so a
// write made later waits behind it and reaches the store after it.

#include "api/write_pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "store/fault_injecting_store.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::api {
namespace {

namespace asio = boost::asio;

store::WriteBatch team(const std::string& name) {
  model::Team t;
  t.name = name;
  return store::WriteBatch{}.add(store::PutTeam{t});
}

// A loaded SQLite store in a directory of its own, removed with it.
struct ScratchStore {
  explicit ScratchStore(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir);
    store = std::move(store::SqliteStore::open((dir / "allot.db").string())).value();
    EXPECT_TRUE(store->loadAll().ok());
  }
  ~ScratchStore() { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
  std::unique_ptr<store::SqliteStore> store;
};

TEST(WritePipeline, ALaterWriteWaitsBehindAReservedOne) {
  ScratchStore scratch("allot-write-pipeline");
  store::FaultInjectingStore st(std::move(scratch.store));
  std::vector<std::string> submitted;  // team names, in the order they reached the store
  st.failIf([&](const store::WriteBatch& b) {
    submitted.push_back(std::get<store::PutTeam>(b.ops.front()).team.name);
    return false;
  });
  asio::io_context io;
  int durable = 0;
  WritePipeline writes(io, st, [&](const Status& s, uint32_t) {
    EXPECT_TRUE(s.ok());
    ++durable;
  });

  // A request changed memory first: its place is taken, its batch still being built.
  WritePipeline::Slot request = writes.reserve();
  bool laterDone = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await writes.commit(team("later"));  // a pass placing the job, say
        laterDone = true;
      },
      asio::detached);
  io.run_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(submitted.empty());  // the later write waits
  EXPECT_FALSE(laterDone);

  WritePipeline::add(request, team("request"));
  writes.seal(request);
  bool requestDone = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await writes.wait(request);
        requestDone = true;
      },
      asio::detached);
  while (!(laterDone && requestDone) && io.run_one_for(std::chrono::seconds(10)) > 0) {
  }
  EXPECT_TRUE(laterDone);
  EXPECT_TRUE(requestDone);
  EXPECT_EQ(submitted, (std::vector<std::string>{"request", "later"}));
  EXPECT_EQ(durable, 2);
}

// A reply that shows memory waits for every write reserved before it; several replies may wait on
// the same write, and one that comes when nothing is in flight does not wait at all.
TEST(WritePipeline, SettledWaitsForEveryWriteReservedBeforeIt) {
  ScratchStore scratch("allot-write-settled");
  asio::io_context io;
  int durable = 0;
  WritePipeline writes(io, *scratch.store, [&](const Status&, uint32_t) { ++durable; });

  bool idleDone = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        co_await writes.settled();
        idleDone = true;
      },
      asio::detached);
  io.poll();
  EXPECT_TRUE(idleDone);
  io.restart();  // it ran out of work

  WritePipeline::Slot held = writes.reserve();  // memory changed, the batch not sealed yet
  int readersDone = 0;
  int durableSeen = -1;
  for (int i = 0; i < 3; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          co_await writes.settled();
          durableSeen = durable;
          ++readersDone;
        },
        asio::detached);
  }
  io.run_for(std::chrono::milliseconds(50));
  EXPECT_EQ(readersDone, 0);  // the write they may show is not on disk yet

  WritePipeline::add(held, team("held"));
  writes.seal(held);
  while (readersDone < 3 && io.run_one_for(std::chrono::seconds(10)) > 0) {
  }
  EXPECT_EQ(readersDone, 3);
  EXPECT_EQ(durableSeen, 1);
}

}  // namespace
}  // namespace allot::api
