#pragma once
// ClusterTest: a Cluster on a FakeClock with teams vision (alice) and nlp (bob) and a platform
// admin, for the Cluster's unit tests. DurableClusterTest: a Cluster whose every change is
// committed to a real SqliteStore, and which can be restarted from it; its tests make the admin,
// people and hosts they need with the kept helpers below. Test-only.

#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/secrets.h"
#include "control/cluster.h"
#include "control/testsupport/changes.h"
#include "control/testsupport/inventory.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::control {

// The model's names the Cluster's tests use throughout, and the units their clocks move in.
using model::ActualJob;
using model::ActualState;
using model::AdminState;
using model::JobState;
inline constexpr TimeMs kS = 1000;
inline constexpr TimeMs kMin = 60 * kS;
inline constexpr TimeMs kHour = 60 * kMin;

class RecordingLink : public AgentLink {
 public:
  void send(std::string message) override { messages.push_back(std::move(message)); }
  std::vector<std::string> messages;
};

// What both fixtures share: the clock, the log store, the Cluster, one link for every agent and
// the platform admin, and the look-ups their tests make.
class ClusterFixtureBase : public ::testing::Test {
 protected:
  const model::Host& host(const std::string& name) { return cluster_->world().hosts.at(name); }
  model::Job job(int64_t id) { return *cluster_->getJob(admin_, id); }
  // What an agent reports of `id`: running since now.
  ActualJob running(int64_t id) {
    return {id, ActualState::kRunning, 1, {}, {}, clock_.nowMs(), 0, ""};
  }
  // The agent of `host` reporting that `run` ended: exited with `exitCode`, or killed by `signal`.
  void reportEnded(const std::string& host, ActualJob run, std::optional<int> exitCode,
                   std::optional<int> signal = {}) {
    run.state = ActualState::kExited;
    run.exitCode = exitCode;
    run.signal = signal;
    cluster_->agentStatus(host, {run});
  }
  // A job asking to run `command` on `gpus` GPUs, in the caller's team.
  static JobRequest request(std::vector<std::string> command, int gpus, bool preemptible = false) {
    JobRequest r;
    r.command = std::move(command);
    r.resources.gpus = gpus;
    r.preemptible = preemptible;
    return r;
  }

  FakeClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<Cluster> cluster_;
  RecordingLink link_;
  Principal admin_;
};

class ClusterTest : public ClusterFixtureBase {
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
    rebuild(opts);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // For fixtures that need other options (e.g. hook profiles) from the start.
  virtual void adjustOptions(ClusterOptions&) {}

  // A fresh Cluster with `opts` (options are fixed at construction): its admin, the teams vision
  // and nlp, alice of vision and bob of nlp.
  void rebuild(const ClusterOptions& opts) {
    cluster_ = std::make_unique<Cluster>(clock_, *logs_, opts);
    auto admin = cluster_->access().bootstrapAdmin();
    ASSERT_TRUE(admin.has_value());
    admin_ = *cluster_->access().authenticate(admin->value);
    ASSERT_TRUE(cluster_->access().createTeam(admin_, "vision").ok());
    ASSERT_TRUE(cluster_->access().createTeam(admin_, "nlp").ok());
    alice_ = addUser("alice", "vision", model::Role::kMember);
    bob_ = addUser("bob", "nlp", model::Role::kMember);
  }

  // A person of `team` with `role`, made by the admin; as they authenticate.
  Principal addUser(const std::string& name, const std::string& team, model::Role role) {
    auto u = cluster_->access().createUser(admin_, name, team, role);
    EXPECT_TRUE(u.ok()) << u.status().toString();
    return u.ok() ? *cluster_->access().authenticate(u->value.token) : Principal{};
  }

  // `name` joined with `gpus` GPUs on a token of its own, its agent not connected yet; its
  // credential.
  std::string joinOnly(const std::string& name, int gpus) {
    auto jt = cluster_->hosts().createJoinToken(admin_, 3'600'000);
    EXPECT_TRUE(jt.ok());
    auto joined = cluster_->hosts().joinHost(jt->value.secret, name, inventory(gpus));
    EXPECT_TRUE(joined.ok()) << joined.status().toString();
    return joined.ok() ? joined->value.credential : "";
  }
  // The same, with its agent connected.
  std::string joinHost(const std::string& name, int gpus) {
    std::string credential = joinOnly(name, gpus);
    cluster_->agentConnected(name, &link_, inventory(gpus), {});
    return credential;
  }

  // `r` submitted by `p`; its id (0 when refused, which fails the test).
  int64_t submitRequest(const Principal& p, const JobRequest& r) {
    auto c = cluster_->submitJob(p, r);
    EXPECT_TRUE(c.ok()) << c.status().toString();
    return c.ok() ? c->value.id : 0;
  }
  // A `sleep 3600` job of `p`'s team; its id.
  int64_t submitSleep(const Principal& p, int gpus, bool preemptible = false,
                      TimeMs maxRuntimeMs = 0) {
    JobRequest r = request({"sleep", "3600"}, gpus, preemptible);
    r.maxRuntimeMs = maxRuntimeMs;
    return submitRequest(p, r);
  }
  int64_t submit(const Principal& p, int gpus) {
    return submitRequest(p, request({"sleep", "1"}, gpus));
  }
  // One scheduling pass whose placements and evictions are durable at once; the jobs placed.
  std::vector<int64_t> place() {
    auto pass = cluster_->schedulePass();
    cluster_->passDurable(pass.value);
    return pass.value.placed;
  }
  // A job of alice's on gpu-01, a one-GPU host joined for it, placed and reported running; its
  // report.
  ActualJob runningJob() {
    joinHost("gpu-01", 1);
    const int64_t id = submit(alice_, 1);
    place();
    ActualJob run{id, ActualState::kRunning, 1, {}, {}, 1, 0, ""};
    cluster_->agentStatus("gpu-01", {run});
    return run;
  }

  Principal alice_, bob_;
};

// ClusterTest with carol, a team-admin of vision: for the tests of what team-admins may do that
// members may not.
class TeamAdminClusterTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    carol_ = addUser("carol", "vision", model::Role::kTeamAdmin);
  }
  Principal carol_;
};

// A Cluster over a real SqliteStore in a fresh directory. `start()` is allotd starting (again)
// from what the store holds; `keep` commits a change as allotd would before acknowledging it.
// Subclasses call start() in their SetUp once they have what it needs.
class DurableClusterTest : public ClusterFixtureBase {
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

  // The first start's admin, kept: admin_ and the token it authenticates with, adminToken_;
  // then the teams named, made by the admin and kept.
  void bootstrap(std::initializer_list<const char*> teams = {}) {
    auto admin = cluster_->access().bootstrapAdmin();
    ASSERT_TRUE(admin.has_value());
    ASSERT_TRUE(store_->commit(admin->batch).ok());
    adminToken_ = admin->value;
    admin_ = *cluster_->access().authenticate(adminToken_);
    for (const char* team : teams) keep(cluster_->access().createTeam(admin_, team));
  }
  // A person of `team` with `role`, made by the admin and kept; as they authenticate.
  Principal keepUser(const std::string& name, const std::string& team, model::Role role) {
    auto u = keep(cluster_->access().createUser(admin_, name, team, role));
    return *cluster_->access().authenticate(u.value.token);
  }
  // `name` joined with `gpus` GPUs on a token of its own and, unless `connect` is false, its
  // agent connected; every step kept.
  void keepJoinedHost(const std::string& name, int gpus, bool connect = true) {
    auto jt = keep(cluster_->hosts().createJoinToken(admin_, 3'600'000));
    keep(cluster_->hosts().joinHost(jt.value.secret, name, inventory(gpus)));
    if (connect) keep(cluster_->agentConnected(name, &link_, inventory(gpus), {}));
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

  std::unique_ptr<store::SqliteStore> store_;
  std::string adminToken_;
};

// allotd with its admin, team vision and gpu-01 (one GPU) joined and connected, all kept: where
// the restart tests of host operations start.
class OneHostDurableTest : public DurableClusterTest {
 protected:
  void SetUp() override {
    DurableClusterTest::SetUp();
    start();
    bootstrap({"vision"});
    keepJoinedHost("gpu-01", 1);
  }
};

}  // namespace allot::control
