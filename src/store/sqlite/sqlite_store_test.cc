#include "store/sqlite/sqlite_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "model/json.h"
#include "store/documents.h"
#include "store/migrations/sqlite_migrations.h"
#include "store/sqlite/sqlite_test_support.h"

namespace allot::store {
namespace {

using test::execOnFile;
using ::testing::HasSubstr;
using ::testing::Optional;

// A fresh directory per test, removed afterwards.
class SqliteStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SqliteStore> openStore() {
    auto store = SqliteStore::open(path_);
    EXPECT_TRUE(store.ok()) << store.status().toString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Opens a database an older release left at path_, written by `sql`: the store migrates it to
  // the newest schema.
  std::unique_ptr<SqliteStore> openOldDatabase(const std::string& sql) {
    const auto error = test::execOnFile(path_, sql);
    EXPECT_EQ(error, std::nullopt);
    if (error) return nullptr;
    auto store = openStore();
    if (store) {
      EXPECT_EQ(store->schemaVersion(), sqliteMigrations().back().version);
    }
    return store;
  }

  Contents load(SqliteStore& store) {
    auto c = store.loadAll();
    EXPECT_TRUE(c.ok()) << c.status().toString();
    return c.ok() ? std::move(c).value() : Contents{};
  }

  test::ScratchDir dir_{"allot-store-test"};
  const std::string path_ = dir_.file("allot.db");
};

// Holds the writer thread inside a done callback until released, so batches submitted meanwhile
// are all queued when the writer next looks: a deterministic way to get one group.
class WriterGate {
 public:
  void close(Store& store) {
    store.submit(WriteBatch{}, [this](Status) {
      {
        std::lock_guard lock(mu_);
        holding_ = true;
      }
      cv_.notify_all();
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return released_; });
    });
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return holding_; });
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool holding_ = false;   // GUARDED_BY(mu_)
  bool released_ = false;  // GUARDED_BY(mu_)
};

model::Job makeJob(int64_t id) {
  model::Job j;
  j.id = id;
  j.name = "train-" + std::to_string(id);
  j.team = "vision";
  j.project = "resnet";
  j.user = "alice";
  j.command = {"python3", "train.py", "--epochs=3"};
  j.env = {{"SEED", "7"}, {"WANDB_MODE", "offline"}};
  j.resources.gpus = 2;
  j.resources.gpuModels = {"H100"};
  j.submittedAt = 1'700'000'000'000 + id;
  return j;
}

model::Team makeTeam(const std::string& name, TimeMs createdAt) {
  model::Team t;
  t.name = name;
  t.createdAt = createdAt;
  return t;
}

model::Host makeHost() {
  model::Host h;
  h.name = "gpu-07";
  h.state = model::HostState::kOnline;
  h.simulated = true;
  h.gpuProvider = "simulated";
  h.cpus = 64;
  h.memoryMib = 512 * 1024;
  model::Gpu g;
  g.index = 0;
  g.uuid = "GPU-abc";
  g.minor = 0;
  g.model = "H100";
  g.memoryMib = 81559;
  g.numaNode = 0;
  g.driverVersion = "550.54";
  g.cudaVersion = "12.4";
  h.gpus = {g, g};
  h.gpus[1].index = 1;
  h.gpus[1].uuid = "GPU-def";
  h.agentVersion = "0.1.0";
  h.cgroup = "v2";
  h.joinedAt = 1'700'000'000'000;
  h.lastSeenAt = 1'700'000'050'000;
  return h;
}

// A done callback and the Status it receives. The promise is shared with the callback so the
// writer thread never touches a promise the test has already destroyed.
class Completion {
 public:
  std::function<void(Status)> callback() {
    return [p = promise_](Status s) { p->set_value(std::move(s)); };
  }
  Status get() { return future_.get(); }

 private:
  std::shared_ptr<std::promise<Status>> promise_ = std::make_shared<std::promise<Status>>();
  std::future<Status> future_ = promise_->get_future();
};

TEST_F(SqliteStoreTest, RoundTripsEveryOpType) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);

  model::Job job = makeJob(42);
  job.state = model::JobState::kFailed;
  job.reason = "exit code 3";
  job.ranks = {{.host = "gpu-07", .gpuIndices = {0, 1}, .gpuUuids = {"GPU-abc", "GPU-def"}}};
  job.exitCode = 3;
  job.cancelRequested = true;
  job.scheduledAt = 1;
  job.startedAt = 2;
  job.finishedAt = 3;
  job.resources.gpuModels = {"H100", "A100"};
  job.resources.gpuMilli = 500;
  job.resources.gpuMemoryMib = 20480;
  job.priority = 100;
  job.preemptible = true;
  job.maxRuntimeMs = 3'600'000;
  job.resources.minDriver = "535.104";
  job.resources.minCuda = "12.2";
  job.preemptions = 1;
  job.evicting = true;
  job.evictingSince = 4;
  job.evictedFor = "reclaimed by team ml for job 9";
  model::Host host = makeHost();
  host.state = model::HostState::kUnreachable;
  host.unreachableSince = 1'700'000'060'000;
  host.dedicatedTo = "vision";
  host.credentialReset = true;
  host.gpus[0].dedicatedTo = "vision";
  host.gpus[1].shared = true;
  model::Team team = makeTeam("vision", 10);
  team.quota.guaranteed = {{"H100", 4}, {"", 2}};
  team.quota.borrowLimit = 2;
  team.quota.lendLimit = 1;
  team.quota.weight = 1.5;
  team.lendDedicated = true;
  team.usageGpuSeconds = 3600.25;
  team.usageAt = 18;

  WriteBatch batch;
  batch.add(PutTeam{team})
      .add(PutUser{{.name = "alice", .teams = {{"vision", model::Role::kMember}}, .createdAt = 11}})
      .add(PutUser{{.name = "root", .platformAdmin = true, .createdAt = 12}})
      .add(PutToken{{"tok-1", "alice", "hash-1", 13, 99}})
      .add(PutToken{{"tok-2", "host:gpu-07", "hash-2", 14, 0}})
      .add(DeleteToken{"tok-2"})
      .add(PutProject{{"resnet", "vision", 15, {{"H100", 3}, {"", 1}}, std::nullopt}})
      .add(PutJoinToken{{"join-1", "jhash", "root", 16, 17, 5, 2, 18}})
      .add(PutHost{host})
      .add(PutJob{job})
      .add(PutMeta{"next_job_id", "43"});
  ASSERT_TRUE(store->commit(std::move(batch)).ok());

  Contents c = load(*store);
  ASSERT_EQ(c.teams.size(), 1u);
  EXPECT_EQ(c.teams[0].name, "vision");
  EXPECT_EQ(c.teams[0].createdAt, 10);
  EXPECT_EQ(toStoreDoc(c.teams[0]), toStoreDoc(team));
  EXPECT_EQ(c.teams[0].quota.guaranteed, team.quota.guaranteed);
  EXPECT_EQ(c.teams[0].usageGpuSeconds, 3600.25);

  ASSERT_EQ(c.users.size(), 2u);
  EXPECT_EQ(c.users[0].name, "alice");
  EXPECT_EQ(c.users[0].teams,
            (std::map<std::string, model::Role>{{"vision", model::Role::kMember}}));
  EXPECT_FALSE(c.users[0].platformAdmin);
  EXPECT_EQ(c.users[0].createdAt, 11);
  EXPECT_EQ(c.users[1].name, "root");
  EXPECT_TRUE(c.users[1].teams.empty());
  EXPECT_TRUE(c.users[1].platformAdmin);

  ASSERT_EQ(c.tokens.size(), 1u);  // tok-2 was deleted later in the same batch
  EXPECT_EQ(c.tokens[0].id, "tok-1");
  EXPECT_EQ(c.tokens[0].owner, "alice");
  EXPECT_EQ(c.tokens[0].hash, "hash-1");
  EXPECT_EQ(c.tokens[0].createdAt, 13);
  EXPECT_EQ(c.tokens[0].expiresAt, 99);

  ASSERT_EQ(c.projects.size(), 1u);
  EXPECT_EQ(c.projects[0].name, "resnet");
  EXPECT_EQ(c.projects[0].team, "vision");
  EXPECT_EQ(c.projects[0].createdAt, 15);
  EXPECT_EQ(c.projects[0].guaranteed, (std::map<std::string, int>{{"H100", 3}, {"", 1}}));

  ASSERT_EQ(c.joinTokens.size(), 1u);
  EXPECT_EQ(c.joinTokens[0].id, "join-1");
  EXPECT_EQ(c.joinTokens[0].hash, "jhash");
  EXPECT_EQ(c.joinTokens[0].createdBy, "root");
  EXPECT_EQ(c.joinTokens[0].createdAt, 16);
  EXPECT_EQ(c.joinTokens[0].expiresAt, 17);
  EXPECT_EQ(c.joinTokens[0].uses, 5);
  EXPECT_EQ(c.joinTokens[0].used, 2);
  EXPECT_EQ(c.joinTokens[0].revokedAt, 18);

  ASSERT_EQ(c.hosts.size(), 1u);
  EXPECT_EQ(toStoreDoc(c.hosts[0]), toStoreDoc(host));
  EXPECT_EQ(c.hosts[0].state, model::HostState::kUnreachable);
  EXPECT_TRUE(c.hosts[0].credentialReset);  // a reset survives a restart
  EXPECT_EQ(c.hosts[0].unreachableSince, host.unreachableSince);
  ASSERT_EQ(c.hosts[0].gpus.size(), 2u);
  EXPECT_EQ(c.hosts[0].gpus[1].uuid, "GPU-def");
  EXPECT_EQ(c.hosts[0].dedicatedTo, "vision");
  EXPECT_EQ(c.hosts[0].gpus[0].dedicatedTo, "vision");
  EXPECT_TRUE(c.hosts[0].gpus[1].shared);

  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(toStoreDoc(c.jobs[0]), toStoreDoc(job));
  EXPECT_EQ(c.jobs[0].exitCode, std::optional<int>(3));
  EXPECT_EQ(c.jobs[0].resources.gpuModels, job.resources.gpuModels);
  EXPECT_EQ(c.jobs[0].evictedFor, job.evictedFor);
  EXPECT_EQ(c.jobs[0].signal, std::nullopt);

  ASSERT_EQ(c.meta.size(), 1u);
  EXPECT_EQ(c.meta[0], (std::pair<std::string, std::string>{"next_job_id", "43"}));
}

TEST_F(SqliteStoreTest, UpsertReplacesTheWholeRow) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  model::Job job = makeJob(7);
  ASSERT_TRUE(store
                  ->commit(WriteBatch{}
                               .add(PutJob{job})
                               .add(PutUser{{.name = "bob",
                                             .teams = {{"vision", model::Role::kMember}},
                                             .createdAt = 1}})
                               .add(PutMeta{"k", "v1"}))
                  .ok());

  job.state = model::JobState::kRunning;
  job.ranks = {{.host = "gpu-01", .gpuIndices = {3}}};
  job.env.clear();
  ASSERT_TRUE(store
                  ->commit(WriteBatch{}
                               .add(PutJob{job})
                               .add(PutUser{{.name = "bob", .platformAdmin = true, .createdAt = 2}})
                               .add(PutMeta{"k", "v2"}))
                  .ok());

  Contents c = load(*store);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].state, model::JobState::kRunning);
  EXPECT_EQ(firstRank(c.jobs[0]).host, "gpu-01");
  EXPECT_EQ(firstRank(c.jobs[0]).gpuIndices, std::vector<int>{3});
  EXPECT_TRUE(c.jobs[0].env.empty());
  ASSERT_EQ(c.users.size(), 1u);
  EXPECT_TRUE(c.users[0].teams.empty());
  EXPECT_TRUE(c.users[0].platformAdmin);
  EXPECT_EQ(c.users[0].createdAt, 2);
  ASSERT_EQ(c.meta.size(), 1u);
  EXPECT_EQ(c.meta[0].second, "v2");
}

TEST_F(SqliteStoreTest, DeleteTokenRemovesOnlyThatToken) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->commit(WriteBatch{}
                               .add(PutToken{{"tok-1", "alice", "h1", 1, 0}})
                               .add(PutToken{{"tok-2", "alice", "h2", 1, 0}}))
                  .ok());
  ASSERT_TRUE(store->commit(WriteBatch{}.add(DeleteToken{"tok-1"})).ok());
  // Deleting a token that is not there is not an error: the end state is what was asked for.
  ASSERT_TRUE(store->commit(WriteBatch{}.add(DeleteToken{"tok-404"})).ok());

  Contents c = load(*store);
  ASSERT_EQ(c.tokens.size(), 1u);
  EXPECT_EQ(c.tokens[0].id, "tok-2");
}

TEST_F(SqliteStoreTest, JobsLoadOrderedById) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  for (int64_t id : {5, 100, 2, 31}) batch.add(PutJob{makeJob(id)});
  ASSERT_TRUE(store->commit(std::move(batch)).ok());
  Contents c = load(*store);
  std::vector<int64_t> ids;
  for (const auto& j : c.jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 5, 31, 100}));
}

TEST_F(SqliteStoreTest, CommittedDataSurvivesCloseAndReopen) {
  {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(
        store->commit(WriteBatch{}.add(PutTeam{makeTeam("vision", 1)}).add(PutJob{makeJob(1)}))
            .ok());
  }
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  Contents c = load(*store);
  ASSERT_EQ(c.teams.size(), 1u);
  EXPECT_EQ(c.teams[0].name, "vision");
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].name, "train-1");
}

TEST_F(SqliteStoreTest, DestructorDrainsSubmittedBatches) {
  constexpr int kBatches = 200;
  std::atomic<int> ok{0};
  {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    for (int i = 1; i <= kBatches; ++i) {
      store->submit(WriteBatch{}.add(PutJob{makeJob(i)}), [&ok](Status s) {
        if (s.ok()) ++ok;
      });
    }
  }
  EXPECT_EQ(ok.load(), kBatches);
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(load(*store).jobs.size(), static_cast<size_t>(kBatches));
}

constexpr uintmax_t kFrameBytes = 4096 + 24;

// The WAL is zero-filled to its working size when the store opens, so that commits overwrite it
// in place; recovery after a crash still finds every committed frame, and the zeros after them
// read as no frame at all.
TEST_F(SqliteStoreTest, TheWalIsZeroFilledAtOpenAndRecoveryIgnoresTheZeros) {
  test::ScratchDir crash("allot-store-crash");
  const std::string image = crash.file("allot.db");
  {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_GE(std::filesystem::file_size(path_ + "-wal"), 32 + 1250 * kFrameBytes);
    for (int i = 1; i <= 20; ++i) {
      ASSERT_TRUE(store->commit(WriteBatch{}.add(PutJob{makeJob(i)})).ok());
    }
    // What a power cut would leave, every commit having been synced: the database and its WAL as
    // they are now, with no checkpoint since (20 jobs are far from 1,000 frames).
    std::filesystem::copy_file(path_, image);
    std::filesystem::copy_file(path_ + "-wal", image + "-wal");
  }
  // Once as left, zeros and all; once with the WAL cut after its last frame, as a WAL that was
  // never zero-filled would be, which opening zero-fills without touching the frames.
  for (bool cut : {false, true}) {
    SCOPED_TRACE(cut ? "WAL cut after its last frame" : "WAL as left");
    test::ScratchDir copy("allot-store-recovered");
    const std::string db = copy.file("allot.db");
    std::filesystem::copy_file(image, db);
    std::filesystem::copy_file(image + "-wal", db + "-wal");
    if (cut) {
      std::string bytes(std::filesystem::file_size(db + "-wal"), '\0');
      FILE* f = std::fopen((db + "-wal").c_str(), "rb");
      ASSERT_NE(f, nullptr);
      ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
      std::fclose(f);
      const size_t lastByte = bytes.find_last_not_of('\0');
      ASSERT_NE(lastByte, std::string::npos);
      const uintmax_t frames = (lastByte + 1 - 32 + kFrameBytes - 1) / kFrameBytes;
      ASSERT_GT(frames, 0u);
      std::filesystem::resize_file(db + "-wal", 32 + frames * kFrameBytes);
    }
    auto recovered = SqliteStore::open(db);
    ASSERT_TRUE(recovered.ok()) << recovered.status().toString();
    EXPECT_GE(std::filesystem::file_size(db + "-wal"), 32 + 1250 * kFrameBytes);
    auto c = (*recovered)->loadAll();
    ASSERT_TRUE(c.ok()) << c.status().toString();
    ASSERT_EQ(c->jobs.size(), 20u);
    EXPECT_EQ(c->jobs.back().name, "train-20");
  }
}

// The writer checkpoints the WAL itself, after a group's callbacks (not inside its COMMIT, where
// SQLite's automatic checkpoint ran): the WAL still stops growing at about 1,000 frames, and what
// it held reaches the database file.
TEST_F(SqliteStoreTest, TheWriterCheckpointsTheWalSoItStaysBounded) {
  constexpr int kJobs = 600;
  constexpr size_t kCommandBytes = 8000;  // two pages and more a job: about 3,000 frames in all
  {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    for (int i = 1; i <= kJobs; ++i) {
      model::Job job = makeJob(i);
      job.command = {std::string(kCommandBytes, static_cast<char>('a' + i % 26))};
      ASSERT_TRUE(store->commit(WriteBatch{}.add(PutJob{std::move(job)})).ok());
    }
    const auto wal = std::filesystem::file_size(path_ + "-wal");
    const auto db = std::filesystem::file_size(path_);
    // Zero-filled to 1,250 frames when the store opened (sqlite::presizeWal).
    EXPECT_LE(wal, 32 + 1250 * kFrameBytes) << "the WAL grew past the checkpoint's threshold";
    EXPECT_GT(db, kJobs * kCommandBytes / 2) << "nothing was copied into the database file";
  }
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  const Contents c = load(*store);
  ASSERT_EQ(c.jobs.size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(c.jobs.back().command[0],
            std::string(kCommandBytes, static_cast<char>('a' + kJobs % 26)));
}

TEST_F(SqliteStoreTest, ConcurrentSubmittersAllCommitAndAreGrouped) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 500;
  const uint64_t before = store->transactionsCommitted();

  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int64_t id = int64_t{t} * kPerThread + i + 1;
        Status s = store->commit(WriteBatch{}.add(PutJob{makeJob(id)}));
        if (s.ok())
          ++ok;
        else
          ++failed;
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  EXPECT_EQ(failed.load(), 0);
  Contents c = load(*store);
  ASSERT_EQ(c.jobs.size(), static_cast<size_t>(kThreads * kPerThread));
  for (size_t i = 0; i < c.jobs.size(); ++i) EXPECT_EQ(c.jobs[i].id, static_cast<int64_t>(i + 1));
  const uint64_t transactions = store->transactionsCommitted() - before;
  EXPECT_GT(transactions, 0u);
  EXPECT_LT(transactions, static_cast<uint64_t>(kThreads * kPerThread));
}

TEST_F(SqliteStoreTest, QueuedBatchesCommitInOneTransactionAndCompleteInOrder) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  WriterGate gate;
  gate.close(*store);
  const uint64_t before = store->transactionsCommitted();

  constexpr int kBatches = 10;
  std::mutex mu;
  std::vector<int> order;  // GUARDED_BY(mu)
  std::vector<Completion> done(kBatches);
  for (int i = 0; i < kBatches; ++i) {
    store->submit(WriteBatch{}.add(PutJob{makeJob(i + 1)}),
                  [&mu, &order, i, cb = done[i].callback()](Status s) {
                    {
                      std::lock_guard lock(mu);
                      order.push_back(i);
                    }
                    cb(std::move(s));
                  });
  }
  gate.release();
  for (auto& d : done) EXPECT_TRUE(d.get().ok());

  EXPECT_EQ(store->transactionsCommitted() - before, 1u);
  std::vector<int> expected(kBatches);
  for (int i = 0; i < kBatches; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
  EXPECT_EQ(load(*store).jobs.size(), static_cast<size_t>(kBatches));
}

// A bad batch fails whole; those submitted before it commit, and those after it are not applied:
// they may build on it, and the store holds a prefix of what was submitted (a review found the
// later ones committed, a placement on disk without its job's submission).
TEST_F(SqliteStoreTest, BadBatchInAGroupFailsWithThoseAfterItAndThoseBeforeCommit) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  WriterGate gate;
  gate.close(*store);

  model::Event event;
  event.id = 7;
  event.jobId = 1;
  Completion first, middle, last;
  store->submit(WriteBatch{}.add(PutJob{makeJob(1)}).add(AppendEvent{event}), first.callback());
  // The good ops before the bad one must not survive: a batch is all or nothing. An event is
  // appended, never replaced: a second with the same id fails its batch.
  store->submit(
      WriteBatch{}.add(PutMeta{"partial", "yes"}).add(PutJob{makeJob(2)}).add(AppendEvent{event}),
      middle.callback());
  store->submit(WriteBatch{}.add(PutJob{makeJob(3)}), last.callback());
  gate.release();

  EXPECT_TRUE(first.get().ok());
  Status badStatus = middle.get();
  EXPECT_FALSE(badStatus.ok());
  EXPECT_THAT(badStatus.message(), HasSubstr("event 7"));
  Status lastStatus = last.get();
  EXPECT_FALSE(lastStatus.ok());
  EXPECT_THAT(lastStatus.message(), HasSubstr("submitted before it failed"));

  Contents c = load(*store);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].id, 1);
  EXPECT_TRUE(c.meta.empty());
}

// The API admits only UTF-8 (docs/access.md, threat model); should a byte that is not slip
// through some other path, the write still succeeds, with the byte replaced: an acknowledged
// write must not fail, and allotd treats a failed one as fatal.
TEST_F(SqliteStoreTest, AStringThatIsNotUtf8IsStoredWithTheByteReplaced) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  model::Job odd = makeJob(2);
  odd.name = "cut \xc3";
  Completion done;
  store->submit(WriteBatch{}.add(PutJob{odd}), done.callback());
  ASSERT_TRUE(done.get().ok());
  Contents c = load(*store);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].name, "cut \xEF\xBF\xBD");  // U+FFFD
}

TEST_F(SqliteStoreTest, CommitFromADoneCallbackIsRefusedNotDeadlocked) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  Completion inner;
  store->submit(WriteBatch{}, [&store, cb = inner.callback()](Status) {
    cb(store->commit(WriteBatch{}.add(PutMeta{"k", "v"})));
  });
  Status s = inner.get();
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("writer thread"));
}

TEST_F(SqliteStoreTest, FreshDatabaseIsMigratedAndReopeningKeepsTheVersion) {
  const int latest = sqliteMigrations().back().version;
  {
    auto store = openStore();
    ASSERT_NE(store, nullptr);
    EXPECT_GE(store->schemaVersion(), 1);
    EXPECT_EQ(store->schemaVersion(), latest);
    ASSERT_TRUE(store->commit(WriteBatch{}.add(PutTeam{makeTeam("vision", 1)})).ok());
  }
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schemaVersion(), latest);
  EXPECT_EQ(load(*store).teams.size(), 1u);
}

TEST_F(SqliteStoreTest, ProjectsOfTheSameNameInTwoTeamsAreTwoRows) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store
          ->commit(WriteBatch{}
                       .add(PutProject{{"resnet", "vision", 1, {{"A100", 1}}, std::nullopt}})
                       .add(PutProject{{"resnet", "nlp", 2, {}, std::nullopt}})
                       .add(PutProject{{"resnet", "vision", 1, {{"A100", 2}}, std::nullopt}}))
          .ok());
  Contents c = load(*store);
  ASSERT_EQ(c.projects.size(), 2u);
  EXPECT_EQ(c.projects[0].team, "nlp");
  EXPECT_TRUE(c.projects[0].guaranteed.empty());
  EXPECT_EQ(c.projects[1].team, "vision");
  EXPECT_EQ(c.projects[1].guaranteed.at("A100"), 2);
}

// A database written by the first release (schema 1, documents without the scheduling fields)
// opens, migrates, and loads with every new field at its default.
TEST_F(SqliteStoreTest, SchemaOneDatabaseLoadsWithDefaults) {
  auto store = openOldDatabase(std::string(sqliteMigrations()[0].sql) + R"sql(
      PRAGMA user_version = 1;
      INSERT INTO teams VALUES ('vision', 10);
      INSERT INTO projects VALUES ('resnet', 'vision', 11);
      INSERT INTO users VALUES ('alice', 'vision', 'member', 12);
      INSERT INTO join_tokens VALUES ('join-old', 'jhash', 'root', 13, 14);
      INSERT INTO hosts VALUES ('gpu-07', 'online', 1, 2, 0,
        '{"name":"gpu-07","gpus":[{"index":0,"uuid":"GPU-a","model":"H100"}],"joined_ms":1}');
      INSERT INTO jobs VALUES (5, 'train', 'vision', 'resnet', 'alice', 'queued', '', 100, 0,
        '{"id":5,"name":"train","team":"vision","gpus":2,"gpu_model":"H100","state":"queued"}');
    )sql");
  ASSERT_NE(store, nullptr);
  Contents c = load(*store);
  ASSERT_EQ(c.teams.size(), 1u);
  EXPECT_EQ(c.teams[0].name, "vision");
  // A join token from before limited uses keeps one use (schema 10).
  ASSERT_EQ(c.joinTokens.size(), 1u);
  EXPECT_EQ(c.joinTokens[0].uses, 1);
  EXPECT_EQ(c.joinTokens[0].used, 0);
  EXPECT_EQ(c.joinTokens[0].revokedAt, 0);
  EXPECT_EQ(c.joinTokens[0].usesLeft(), 1);
  EXPECT_EQ(c.teams[0].createdAt, 10);
  EXPECT_TRUE(c.teams[0].quota.guaranteed.empty());
  EXPECT_EQ(c.teams[0].quota.borrowLimit, -1);
  EXPECT_EQ(c.teams[0].quota.lendLimit, -1);
  EXPECT_EQ(c.teams[0].quota.weight, 1.0);
  EXPECT_FALSE(c.teams[0].lendDedicated);
  EXPECT_EQ(c.teams[0].usageGpuSeconds, 0);
  ASSERT_EQ(c.projects.size(), 1u);
  EXPECT_EQ(c.projects[0].team, "vision");
  EXPECT_EQ(c.projects[0].createdAt, 11);
  EXPECT_TRUE(c.projects[0].guaranteed.empty());
  ASSERT_EQ(c.hosts.size(), 1u);
  EXPECT_EQ(c.hosts[0].dedicatedTo, "");
  ASSERT_EQ(c.hosts[0].gpus.size(), 1u);
  EXPECT_EQ(c.hosts[0].gpus[0].dedicatedTo, "");
  EXPECT_FALSE(c.hosts[0].gpus[0].shared);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].resources.gpuModels, std::vector<std::string>{"H100"});
  EXPECT_EQ(c.jobs[0].resources.gpuMilli, 1000);
  EXPECT_EQ(c.jobs[0].priority, 0);
  EXPECT_EQ(c.jobs[0].maxRuntimeMs, 0);
  EXPECT_EQ(c.jobs[0].preemptions, 0);

  // And it takes the new fields from now on.
  model::Team t = c.teams[0];
  t.quota.guaranteed = {{"H100", 1}};
  ASSERT_TRUE(store->commit(WriteBatch{}.add(PutTeam{t})).ok());
  EXPECT_EQ(load(*store).teams[0].quota.guaranteed.at("H100"), 1);
}

TEST_F(SqliteStoreTest, DatabaseFromANewerVersionIsRefused) {
  { ASSERT_NE(openStore(), nullptr); }
  ASSERT_EQ(execOnFile(path_, "PRAGMA user_version = 999"), std::nullopt);

  auto store = SqliteStore::open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("999"));
  EXPECT_THAT(store.status().message(), HasSubstr("newer"));
}

TEST_F(SqliteStoreTest, OpeningInAMissingDirectoryFailsNamingThePath) {
  const std::string path = (dir_.path() / "no" / "such" / "dir" / "allot.db").string();
  auto store = SqliteStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kUnavailable);
  EXPECT_THAT(store.status().message(), HasSubstr("failed to open store " + path + ": "));
  EXPECT_THAT(store.status().message(), HasSubstr("unable to open database file"));
}

}  // namespace
}  // namespace allot::store

namespace allot::store {
namespace {

model::LedgerEntry openEntry(int64_t seq, int64_t job, std::vector<int> gpus, int milli,
                             TimeMs start) {
  model::LedgerEntry e;
  e.seq = seq;
  e.jobId = job;
  e.team = "vision";
  e.project = "resnet";
  e.user = "alice";
  e.host = "gpu-07";
  e.gpuModel = "NVIDIA H100 80GB HBM3";
  e.gpuIndices = std::move(gpus);
  e.gpuMilli = milli;
  e.startAt = start;
  return e;
}

TEST_F(SqliteStoreTest, LedgerEntriesRoundTripInSeqOrder) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  model::LedgerEntry close;
  close.seq = 3;
  close.kind = model::LedgerKind::kClose;
  close.ref = 1;
  close.jobId = 7;
  close.endAt = 5'000;
  close.reason = "lost";
  model::LedgerEntry fix = close;
  fix.seq = 4;
  fix.kind = model::LedgerKind::kCorrect;
  fix.endAt = 4'000;
  fix.reason = "host last seen";
  ASSERT_TRUE(store
                  ->commit(WriteBatch{}
                               .add(AppendLedger{openEntry(2, 8, {}, 250, 1'500)})
                               .add(AppendLedger{openEntry(1, 7, {0, 3}, 1000, 1'000)}))
                  .ok());
  ASSERT_TRUE(store->commit(WriteBatch{}.add(AppendLedger{fix}).add(AppendLedger{close})).ok());
  store.reset();
  store = openStore();
  Contents c = load(*store);
  ASSERT_EQ(c.ledger.size(), 4u);
  const auto& o = c.ledger[0];
  EXPECT_EQ(o.seq, 1);
  EXPECT_EQ(o.kind, model::LedgerKind::kOpen);
  EXPECT_EQ(o.jobId, 7);
  EXPECT_EQ(o.team, "vision");
  EXPECT_EQ(o.project, "resnet");
  EXPECT_EQ(o.user, "alice");
  EXPECT_EQ(o.host, "gpu-07");
  EXPECT_EQ(o.gpuModel, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(o.gpuIndices, (std::vector<int>{0, 3}));
  EXPECT_EQ(o.gpuMilli, 1000);
  EXPECT_EQ(o.startAt, 1'000);
  EXPECT_EQ(c.ledger[1].gpuIndices, std::vector<int>{});
  EXPECT_EQ(c.ledger[1].gpuMilli, 250);
  EXPECT_EQ(c.ledger[2].kind, model::LedgerKind::kClose);
  EXPECT_EQ(c.ledger[2].ref, 1);
  EXPECT_EQ(c.ledger[2].endAt, 5'000);
  EXPECT_EQ(c.ledger[2].reason, "lost");
  EXPECT_EQ(c.ledger[3].kind, model::LedgerKind::kCorrect);
  EXPECT_EQ(c.ledger[3].endAt, 4'000);
}

TEST_F(SqliteStoreTest, LedgerIsAppendOnly) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->commit(WriteBatch{}.add(AppendLedger{openEntry(1, 7, {0}, 1000, 1)})).ok());
  // The same seq again is refused, not an overwrite.
  Status again = store->commit(WriteBatch{}.add(AppendLedger{openEntry(1, 9, {1}, 1000, 2)}));
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.message(), HasSubstr("ledger entry 1 of job 9"));
  // And SQL that tries to rewrite history fails too.
  EXPECT_THAT(execOnFile(path_, "UPDATE ledger SET start_ms = 0"),
              Optional(HasSubstr("append-only")));
  EXPECT_NE(execOnFile(path_, "DELETE FROM ledger"), std::nullopt);
  Contents c = load(*store);
  ASSERT_EQ(c.ledger.size(), 1u);
  EXPECT_EQ(c.ledger[0].jobId, 7);
}

TEST_F(SqliteStoreTest, LeasesRoundTripAndAPutReplacesTheLease) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  model::Lease l;
  l.id = 7;
  l.team = "nlp";
  l.requestedBy = "carol";
  l.reason = "eval sprint";
  l.count = 2;
  l.gpuModel = "H100";
  l.minGpus = 8;
  l.startAt = 10'000;
  l.endAt = 20'000;
  l.createdAt = 5'000;
  ASSERT_TRUE(store->commit(WriteBatch{}.add(PutLease{l})).ok());
  // Approved and started later: the same row, replaced whole.
  l.state = model::LeaseState::kActive;
  l.hosts = {"gpu-03", "gpu-04"};
  l.decidedBy = "admin";
  l.decidedAt = 6'000;
  l.startedAt = 10'001;
  l.skipped = {"gpu-04: failed"};
  l.noticed = {42};
  ASSERT_TRUE(store->commit(WriteBatch{}.add(PutLease{l})).ok());

  store.reset();
  store = openStore();
  Contents c = load(*store);
  ASSERT_EQ(c.leases.size(), 1u);
  EXPECT_EQ(toStoreDoc(c.leases[0]), toStoreDoc(l));
  EXPECT_EQ(c.leases[0].state, model::LeaseState::kActive);
  EXPECT_EQ(c.leases[0].hosts, l.hosts);
  EXPECT_EQ(c.leases[0].noticed, std::vector<int64_t>{42});
}

// Schema 11 brings the default jupyter profile; profiles are replaced whole and deleted by name.
TEST_F(SqliteStoreTest, ProfilesStartWithJupyterRoundTripAndDelete) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  Contents fresh = load(*store);
  ASSERT_EQ(fresh.profiles.size(), 1u);
  const model::Profile& jupyter = fresh.profiles[0];
  EXPECT_EQ(jupyter.name, "jupyter");
  EXPECT_EQ(jupyter.team, "");
  EXPECT_EQ(jupyter.command, std::vector<std::string>{"jupyter-server"});
  EXPECT_EQ(jupyter.defaults.gpus, 0);
  EXPECT_EQ(jupyter.storage, (std::vector<std::string>{"scratch", "local"}));

  model::Profile p;
  p.name = "ml-nb";
  p.team = "ml";
  p.command = {"/opt/venv/bin/jupyter-server", "--no-browser"};
  p.env = {{"VENV", "/opt/venv"}};
  p.defaults = {.gpus = 1, .gpuMilli = 500, .cpuMillis = 2000, .memoryMib = 16384};
  p.maxima = {.gpus = 4, .gpuMilli = 1000, .cpuMillis = 8000, .memoryMib = 65536};
  p.storage = {"local"};
  p.idleThresholdPct = 7.5;
  p.idleAfterMs = 3'600'000;
  p.maxLifetimeMs = 12 * 3'600'000;
  p.createdBy = "carol";
  p.createdAt = 5'000;
  ASSERT_TRUE(store->commit(WriteBatch{}.add(PutProfile{p})).ok());
  p.description = "notebooks";
  ASSERT_TRUE(store->commit(WriteBatch{}.add(PutProfile{p})).ok());
  ASSERT_TRUE(store->commit(WriteBatch{}.add(DeleteProfile{"jupyter"})).ok());

  store.reset();
  store = openStore();
  Contents c = load(*store);
  ASSERT_EQ(c.profiles.size(), 1u);  // a deleted jupyter stays deleted
  EXPECT_EQ(toStoreDoc(c.profiles[0]), toStoreDoc(p));
  EXPECT_EQ(c.profiles[0].defaults, p.defaults);
  EXPECT_EQ(store->schemaVersion(), sqliteMigrations().back().version);
}

TEST_F(SqliteStoreTest, HostTransitionsRoundTripAndAreAppendOnly) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  model::HostTransition t;
  t.id = 1;
  t.host = "gpu-07";
  t.at = 1'000;
  t.by = "root";
  t.from = model::AdminState::kAvailable;
  t.to = model::AdminState::kDraining;
  t.reason = "kernel update";
  model::HostTransition done = t;
  done.id = 2;
  done.at = 2'000;
  done.by = "allotd";
  done.from = model::AdminState::kDraining;
  done.to = model::AdminState::kMaintenance;
  done.output = "hook ran\n";
  model::Host h = makeHost();
  h.adminState = model::AdminState::kDraining;
  h.adminReason = "kernel update";
  h.drainDeadline = 61'000;
  ASSERT_TRUE(store
                  ->commit(WriteBatch{}
                               .add(PutHost{h})
                               .add(AppendHostTransition{done})
                               .add(AppendHostTransition{t}))
                  .ok());
  Status again = store->commit(WriteBatch{}.add(AppendHostTransition{t}));
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.message(), HasSubstr("host transition 1 of host gpu-07"));
  EXPECT_THAT(execOnFile(path_, "UPDATE host_transitions SET by_name = 'x'"),
              Optional(HasSubstr("append-only")));
  EXPECT_NE(execOnFile(path_, "DELETE FROM host_transitions"), std::nullopt);

  store.reset();
  store = openStore();
  Contents c = load(*store);
  ASSERT_EQ(c.hostTransitions.size(), 2u);
  EXPECT_EQ(c.hostTransitions[0].id, 1);
  EXPECT_EQ(c.hostTransitions[0].by, "root");
  EXPECT_EQ(c.hostTransitions[0].to, model::AdminState::kDraining);
  EXPECT_EQ(c.hostTransitions[0].reason, "kernel update");
  EXPECT_EQ(c.hostTransitions[1].from, model::AdminState::kDraining);
  EXPECT_EQ(c.hostTransitions[1].output, "hook ran\n");
  ASSERT_EQ(c.hosts.size(), 1u);
  EXPECT_EQ(c.hosts[0].adminState, model::AdminState::kDraining);
  EXPECT_EQ(c.hosts[0].adminReason, "kernel update");
  EXPECT_EQ(c.hosts[0].drainDeadline, 61'000);
}

// A database of schema 2 (before the ledger) migrates: its jobs stay, the ledger starts empty and
// takes entries.
TEST_F(SqliteStoreTest, SchemaTwoDatabaseGainsAnEmptyLedger) {
  auto store = openOldDatabase(std::string(sqliteMigrations()[0].sql) +
                               std::string(sqliteMigrations()[1].sql) + R"sql(
      PRAGMA user_version = 2;
      INSERT INTO jobs VALUES (5, 'train', 'vision', 'resnet', 'alice', 'queued', '', 100, 0,
        '{"id":5,"name":"train","team":"vision","gpus":2,"state":"queued"}');
    )sql");
  ASSERT_NE(store, nullptr);
  Contents c = load(*store);
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_TRUE(c.ledger.empty());
  ASSERT_TRUE(store->commit(WriteBatch{}.add(AppendLedger{openEntry(1, 5, {0}, 1000, 9)})).ok());
  EXPECT_EQ(load(*store).ledger.size(), 1u);
}

TEST_F(SqliteStoreTest, EventsRoundTripInOrderAndAreNeverReplaced) {
  auto store = openStore();
  ASSERT_NE(store, nullptr);
  model::Event e;
  e.id = 1;
  e.at = 1'000;
  e.kind = model::EventKind::kAllocationIdle;
  e.team = "vision";
  e.user = "alice";
  e.jobId = 7;
  e.hosts = {"gpu-01", "gpu-02"};
  e.message = "idle";
  e.details = R"({"threshold_percent":5})";
  model::Event later = e;
  later.id = 2;
  later.kind = model::EventKind::kAllocationReclaimed;
  later.project = "resnet";
  later.hosts = {};
  ASSERT_TRUE(store->commit(WriteBatch{}.add(AppendEvent{later}).add(AppendEvent{e})).ok());
  Contents c = load(*store);
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0].id, 1);
  EXPECT_EQ(c.events[0].hosts, (std::vector<std::string>{"gpu-01", "gpu-02"}));
  EXPECT_EQ(c.events[0].details, e.details);
  EXPECT_EQ(c.events[1].kind, model::EventKind::kAllocationReclaimed);
  EXPECT_EQ(c.events[1].project, "resnet");
  EXPECT_TRUE(c.events[1].hosts.empty());
  EXPECT_FALSE(store->commit(WriteBatch{}.add(AppendEvent{e})).ok());
}

}  // namespace
}  // namespace allot::store

namespace allot::store {
namespace {

TEST(SqliteUpgradesTest, UpgradesRoundTripAndAreReplacedWhole) {
  test::ScratchDir dir("allot-store-upgrades");
  const std::string path = dir.file("allot.db");
  model::Upgrade u;
  u.id = 3;
  u.pool = "ml";
  u.profile = "driver-550";
  u.maxUnavailable = 2;
  u.drainDeadlineMs = 1'800'000;
  u.by = "root";
  u.createdAt = 1'000;
  u.hosts = {{"gpu-01", model::UpgradeHostState::kDone, "", 1'000, 2'000},
             {"gpu-02", model::UpgradeHostState::kRunning, "", 2'000, 0},
             {"gpu-03", model::UpgradeHostState::kSkipped, "host is failed at the start", 0, 0}};
  {
    auto store = SqliteStore::open(path);
    ASSERT_TRUE(store.ok()) << store.status().toString();
    ASSERT_TRUE((*store)->commit(WriteBatch{}.add(PutUpgrade{u})).ok());
    u.state = model::UpgradeState::kStopped;
    u.stoppedAt = "gpu-02";
    u.reason = "host gpu-02: exit code 3";
    u.hosts[1].state = model::UpgradeHostState::kFailed;
    ASSERT_TRUE((*store)->commit(WriteBatch{}.add(PutUpgrade{u})).ok());
  }
  auto store = SqliteStore::open(path);
  ASSERT_TRUE(store.ok());
  auto c = (*store)->loadAll();
  ASSERT_TRUE(c.ok()) << c.status().toString();
  ASSERT_EQ(c->upgrades.size(), 1u);
  const model::Upgrade& got = c->upgrades[0];
  EXPECT_EQ(got.id, 3);
  EXPECT_EQ(got.pool, "ml");
  EXPECT_EQ(got.maxUnavailable, 2);
  EXPECT_EQ(got.drainDeadlineMs, 1'800'000);
  EXPECT_EQ(got.state, model::UpgradeState::kStopped);
  EXPECT_EQ(got.stoppedAt, "gpu-02");
  EXPECT_EQ(got.reason, "host gpu-02: exit code 3");
  ASSERT_EQ(got.hosts.size(), 3u);
  EXPECT_EQ(got.hosts[1].state, model::UpgradeHostState::kFailed);
  EXPECT_EQ(got.hosts[2].reason, "host is failed at the start");
  EXPECT_EQ(got.hosts[0].endedAt, 2'000);
  EXPECT_GE((*store)->schemaVersion(), 7);
}

}  // namespace
}  // namespace allot::store
