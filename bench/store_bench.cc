// Store throughput: durable single-job PutJob batches per second through SqliteStore.
//
//   cmake --build build --target store_bench && build/bin/store_bench
//   ALLOT_BENCH_DIR=/some/disk build/bin/store_bench   # default /tmp; must be a real disk, not
//                                                      # tmpfs, for fsync to cost what it costs
//
// BM_CommitJob/threads:N  N submitters, each calling commit() (submit + wait) in a loop, as
//                         request handlers do. items_per_second is durable jobs/s for all of them;
//                         batches_per_txn shows how much group commit merged.
// BM_SubmitPipelined      one thread submits `range(0)` batches without waiting, then waits for
//                         the last completion: the writer's ceiling.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include "store/sqlite/sqlite_store.h"

namespace {

using allot::store::PutJob;
using allot::store::SqliteStore;
using allot::store::WriteBatch;
namespace fs = std::filesystem;

fs::path benchRoot() {
  const char* dir = std::getenv("ALLOT_BENCH_DIR");
  return dir != nullptr ? fs::path(dir) : fs::path("/tmp");
}

// A store in a fresh directory, removed with it.
class ScratchStore {
 public:
  ScratchStore() {
    std::string tmpl = (benchRoot() / "allot-store-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir_ = tmpl;
    auto store = SqliteStore::open((dir_ / "allot.db").string());
    if (!store.ok()) {
      std::fprintf(stderr, "%s\n", store.status().toString().c_str());
      std::abort();
    }
    store_ = std::move(store).value();
  }
  ~ScratchStore() {
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  SqliteStore& store() { return *store_; }

 private:
  fs::path dir_;
  std::unique_ptr<SqliteStore> store_;
};

allot::model::Job makeJob(int64_t id) {
  allot::model::Job j;
  j.id = id;
  j.name = "train-" + std::to_string(id);
  j.team = "vision";
  j.project = "resnet";
  j.user = "alice";
  j.command = {"python3", "train.py", "--epochs=90", "--batch-size=256"};
  j.env = {{"SEED", "7"}, {"WANDB_MODE", "offline"}};
  j.resources.gpus = 8;
  j.resources.gpuModels = {"H100"};
  j.submittedAt = 1'700'000'000'000 + id;
  return j;
}

// Shared by the threads of one run; thread 0 sets it up before the loop and tears it down after.
// The benchmark library puts a barrier at both ends of the timed loop.
std::unique_ptr<ScratchStore> gStore;
std::atomic<int64_t> gNextId{1};

void BM_CommitJob(benchmark::State& state) {
  if (state.thread_index() == 0) {
    gStore = std::make_unique<ScratchStore>();
    gNextId = 1;
  }
  for (auto _ : state) {
    allot::Status s = gStore->store().commit(WriteBatch{}.add(PutJob{makeJob(gNextId++)}));
    if (!s.ok()) state.SkipWithError(s.toString().c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const double txns = static_cast<double>(gStore->store().transactionsCommitted());
    state.counters["batches_per_txn"] = txns > 0 ? static_cast<double>(gNextId - 1) / txns : 0;
    gStore.reset();
  }
}
BENCHMARK(BM_CommitJob)->Threads(1)->Threads(8)->Threads(64)->UseRealTime();

void BM_SubmitPipelined(benchmark::State& state) {
  const int64_t batches = state.range(0);
  ScratchStore scratch;
  int64_t nextId = 1;
  for (auto _ : state) {
    // Shared with the callback: the writer may still be inside set_value when wait() returns.
    auto last = std::make_shared<std::promise<void>>();
    std::future<void> lastDone = last->get_future();
    std::atomic<int64_t> failed{0};
    for (int64_t i = 0; i < batches; ++i) {
      const bool isLast = i + 1 == batches;
      scratch.store().submit(WriteBatch{}.add(PutJob{makeJob(nextId++)}),
                             [&failed, last, isLast](allot::Status s) {
                               if (!s.ok()) ++failed;
                               if (isLast) last->set_value();
                             });
    }
    lastDone.wait();  // completions run in order, so the last one means all
    if (failed > 0) state.SkipWithError("a batch failed");
  }
  state.SetItemsProcessed(state.iterations() * batches);
  state.counters["batches_per_txn"] =
      static_cast<double>(nextId - 1) /
      static_cast<double>(std::max<uint64_t>(1, scratch.store().transactionsCommitted()));
}
BENCHMARK(BM_SubmitPipelined)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
