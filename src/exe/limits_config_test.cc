#include "exe/limits_config.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

struct Limits {
  control::JobLimits jobs;
  control::LogStoreOptions logs;
  std::vector<std::string> webhooks;
  api::ConnectionLimits connections;
  int64_t writeReserveBytes = 256 << 20;  // api::ServerConfig's default
};

Result<Limits> read(std::string_view text) {
  Limits out;
  auto tbl = toml::parse(text);
  Status st = readLimitsConfig(tbl, out.jobs, out.logs, out.webhooks, out.connections,
                               out.writeReserveBytes);
  if (!st.ok()) return st;
  return out;
}

// Every number [limits] sets, in the order of its keys.
struct Numbers {
  int jobsPerUser, jobsPerTeam;
  int64_t jobBytesPerUser, jobBytesPerTeam, cpuFloorMillis, memoryFloorMib, logBytes,
      logReserveBytes;
};

void expectNumbers(const Limits& l, const Numbers& want) {
  EXPECT_EQ(l.jobs.maxActiveJobsPerUser, want.jobsPerUser);
  EXPECT_EQ(l.jobs.maxActiveJobsPerTeam, want.jobsPerTeam);
  EXPECT_EQ(l.jobs.maxActiveJobBytesPerUser, want.jobBytesPerUser);
  EXPECT_EQ(l.jobs.maxActiveJobBytesPerTeam, want.jobBytesPerTeam);
  EXPECT_EQ(l.jobs.cpuFloorMillis, want.cpuFloorMillis);
  EXPECT_EQ(l.jobs.memoryFloorMib, want.memoryFloorMib);
  EXPECT_EQ(l.logs.maxBytes, want.logBytes);
  EXPECT_EQ(l.logs.reserveBytes, want.logReserveBytes);
}

TEST(LimitsConfig, DefaultsAreWhatAFleetWouldUse) {
  auto l = read("");
  ASSERT_TRUE(l.ok()) << l.status().message();
  expectNumbers(*l, {1000, 5000, 32 << 20, 128 << 20, 100, 256, 64 << 20, 512 << 20});
  EXPECT_TRUE(l->webhooks.empty());
  EXPECT_EQ(l->connections.total, 0u) << "0: from the descriptors allotd may open";
  EXPECT_EQ(l->connections.perClient, 1024u);
  EXPECT_EQ(l->writeReserveBytes, 256 << 20);
}

TEST(LimitsConfig, EveryLimitIsConfigurable) {
  auto l = read(R"(
[limits]
max_active_jobs_per_user = 50
max_active_jobs_per_team = 0
max_active_job_mib_per_user = 8
max_active_job_mib_per_team = 64
job_cpu_floor_millis = 250
job_memory_floor_mib = 512
max_log_bytes = 1048576
log_disk_reserve_mib = 2048
write_disk_reserve_mib = 1024
max_connections = 5000
max_connections_per_client = 64
[idle]
webhook_allow = ["http://hooks.internal:8080/allot/", "http://chat.example.com/"]
)");
  ASSERT_TRUE(l.ok()) << l.status().message();
  expectNumbers(*l, {50, 0, 8 << 20, 64 << 20, 250, 512, 1 << 20, int64_t{2048} << 20});
  EXPECT_EQ(l->webhooks.size(), 2u);
  EXPECT_EQ(l->connections.total, 5000u);
  EXPECT_EQ(l->connections.perClient, 64u);
  EXPECT_EQ(l->writeReserveBytes, int64_t{1024} << 20);
}

TEST(LimitsConfig, BadValuesNameTheKey) {
  auto negative = read("[limits]\nmax_active_jobs_per_user = -1\n");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("limits.max_active_jobs_per_user"), std::string::npos);
  auto text = read("[limits]\nmax_log_bytes = \"lots\"\n");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("limits.max_log_bytes"), std::string::npos);
  EXPECT_FALSE(read("[limits]\nmax_log_bytes = 10\n").ok());
}

TEST(LimitsConfig, WebhookPrefixesMustEndTheirHost) {
  // Without the '/', "http://hooks.example.com" would also allow hooks.example.com.evil.net.
  EXPECT_FALSE(read("[idle]\nwebhook_allow = [\"http://hooks.example.com\"]\n").ok());
  EXPECT_FALSE(read("[idle]\nwebhook_allow = [\"https://hooks.example.com/\"]\n").ok());
  EXPECT_FALSE(read("[idle]\nwebhook_allow = \"http://hooks.example.com/\"\n").ok());
  EXPECT_TRUE(read("[idle]\nwebhook_allow = [\"http://hooks.example.com/\"]\n").ok());
}

}  // namespace
}  // namespace allot
