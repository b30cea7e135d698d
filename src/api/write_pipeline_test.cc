// The order of allotd's writes: a request's write holds its place from its reservation, so a
// write made later waits behind it and reaches the store after it.

#include "api/write_pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
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

TEST(WritePipeline, ALaterWriteWaitsBehindAReservedOne) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("allot-write-pipeline-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto sqlite = std::move(store::SqliteStore::open((dir / "allot.db").string())).value();
  ASSERT_TRUE(sqlite->loadAll().ok());
  store::FaultInjectingStore st(std::move(sqlite));
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
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allot::api
