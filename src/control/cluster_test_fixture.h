#pragma once
// ClusterTest: a Cluster on a FakeClock with teams vision (alice) and nlp (bob) and a platform
// admin, for the Cluster's unit tests. DurableClusterTest: a Cluster whose every change is
// committed to a real SqliteStore, and which can be restarted from it. Test-only.

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <variant>

#include "common/secrets.h"
#include "control/cluster.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::control {

class RecordingLink : public AgentLink {
 public:
  void send(std::string message) override { messages.push_back(std::move(message)); }
  std::vector<std::string> messages;
};

inline model::Inventory inventory(int gpus) {
  model::Inventory inv;
  inv.hostname = "h";
  inv.cpus = 16;
  inv.memoryMib = 65536;
  inv.gpuProvider = "simulated";
  inv.simulated = true;
  for (int i = 0; i < gpus; ++i)
    inv.gpus.push_back({i, "GPU-" + std::to_string(i), i, "A100", 81920, 0, "", "", "", false});
  return inv;
}

// The first write of kind Op in a change's batch, or nullptr.
template <typename Op, typename T>
const Op* findOp(const Change<T>& c) {
  for (const auto& op : c.batch.ops) {
    if (auto* o = std::get_if<Op>(&op)) return o;
  }
  return nullptr;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    initSecrets();
    dir_ = std::filesystem::temp_directory_path() / ("allot-cluster-" + std::to_string(::getpid()));
    logs_ = std::make_unique<LogStore>(dir_.string());
    ASSERT_TRUE(logs_->init().ok());
    ClusterOptions opts;
    opts.lostAfterMs = 60'000;
    // Hosts are in service as soon as they join; commissioning has tests of its own.
    opts.lifecycle.commission = false;
    opts.lifecycle.healthIntervalMs = 0;
    adjustOptions(opts);
    cluster_ = std::make_unique<Cluster>(clock_, *logs_, opts);
    auto admin = cluster_->access().bootstrapAdmin();
    ASSERT_TRUE(admin.has_value());
    admin_ = *cluster_->access().authenticate(admin->value);
    ASSERT_TRUE(cluster_->access().createTeam(admin_, "vision").ok());
    ASSERT_TRUE(cluster_->access().createTeam(admin_, "nlp").ok());
    auto alice = cluster_->access().createUser(admin_, "alice", "vision", model::Role::kMember);
    ASSERT_TRUE(alice.ok());
    alice_ = *cluster_->access().authenticate(alice->value.token);
    auto bob = cluster_->access().createUser(admin_, "bob", "nlp", model::Role::kMember);
    bob_ = *cluster_->access().authenticate(bob->value.token);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // For fixtures that need other options (e.g. hook profiles) from the start.
  virtual void adjustOptions(ClusterOptions&) {}

  std::string joinHost(const std::string& name, int gpus) {
    auto jt = cluster_->hosts().createJoinToken(admin_, 3'600'000);
    EXPECT_TRUE(jt.ok());
    auto joined = cluster_->hosts().joinHost(jt->value.secret, name, inventory(gpus));
    EXPECT_TRUE(joined.ok()) << joined.status().toString();
    cluster_->agentConnected(name, &link_, inventory(gpus), {});
    return joined->value.credential;
  }

  // A `sleep 3600` job of `p`'s team; its id.
  int64_t submitSleep(const Principal& p, int gpus, bool preemptible = false,
                      TimeMs maxRuntimeMs = 0) {
    JobRequest r;
    r.command = {"sleep", "3600"};
    r.gpus = gpus;
    r.preemptible = preemptible;
    r.maxRuntimeMs = maxRuntimeMs;
    auto c = cluster_->submitJob(p, r);
    EXPECT_TRUE(c.ok()) << c.status().toString();
    return c->value.id;
  }
  // One scheduling pass whose placements are durable at once; the jobs placed.
  std::vector<int64_t> place() {
    auto pass = cluster_->schedulePass();
    cluster_->placementsDurable(pass.value);
    return pass.value;
  }

  int64_t submit(const Principal& p, int gpus) {
    JobRequest r;
    r.command = {"sleep", "1"};
    r.gpus = gpus;
    auto c = cluster_->submitJob(p, r);
    EXPECT_TRUE(c.ok()) << c.status().toString();
    return c->value.id;
  }

  FakeClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<Cluster> cluster_;
  RecordingLink link_;
  Principal admin_, alice_, bob_;
};

// A Cluster over a real SqliteStore in a fresh directory. `start()` is allotd starting (again)
// from what the store holds; `keep` commits a change as allotd would before acknowledging it.
// Subclasses call start() in their SetUp once they have what it needs.
class DurableClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    initSecrets();
    dir_ = std::filesystem::temp_directory_path() /
           ("allot-durable-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    logs_ = std::make_unique<LogStore>((dir_ / "logs").string());
    ASSERT_TRUE(logs_->init().ok());
    auto s = store::SqliteStore::open((dir_ / "allot.db").string());
    ASSERT_TRUE(s.ok()) << s.status().toString();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    cluster_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Hosts are in service as soon as they join, and no periodic health check runs, unless
  // `options` says otherwise.
  static ClusterOptions testOptions() {
    ClusterOptions o;
    o.lifecycle.commission = false;
    o.lifecycle.healthIntervalMs = 0;
    return o;
  }
  void start(ClusterOptions options = testOptions()) {
    auto contents = store_->loadAll();
    ASSERT_TRUE(contents.ok()) << contents.status().toString();
    cluster_ = std::make_unique<Cluster>(clock_, *logs_, options);
    cluster_->load(*contents);
  }

  template <typename T>
  Change<T>& keep(Change<T>& c) {
    EXPECT_TRUE(store_->commit(c.batch).ok());
    return c;
  }
  template <typename T>
  Change<T> keep(Change<T>&& c) {
    EXPECT_TRUE(store_->commit(c.batch).ok());
    return std::move(c);
  }
  template <typename T>
  Change<T> keep(Result<Change<T>> r) {
    EXPECT_TRUE(r.ok()) << r.status().toString();
    EXPECT_TRUE(store_->commit(r->batch).ok());
    return std::move(r).value();
  }

  FakeClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<Cluster> cluster_;
  RecordingLink link_;
};

}  // namespace allot::control
