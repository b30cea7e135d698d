#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <random>
#include <set>

#include "sched/placement/policy.h"

namespace allot::sched::placement {
namespace {

ClusterState cluster(const std::vector<NodeSpec>& nodes) {
  auto s = ClusterState::create(nodes);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

Task shared(int milli) { return Task{1000, 1024, 1, milli, kAnyModel}; }
Task whole(int n) { return Task{1000, 1024, n, 1000, kAnyModel}; }

std::vector<std::unique_ptr<PlacementPolicy>> allPolicies(const std::vector<Task>& workload) {
  std::vector<std::unique_ptr<PlacementPolicy>> out;
  for (const char* name : {"random", "firstfit", "bestfit", "fgd"}) {
    out.push_back(std::move(makePolicy(name, 7, workload)).value());
  }
  return out;
}

TEST(Placement, SharedTaskNeverGoesOnAWholeHeldGpu) {
  for (auto& policy : allPolicies({shared(500), whole(1)})) {
    ClusterState s = cluster({{"a", 64000, 100000, 2, "V100"}});
    Choice c = policy->choose(s, whole(1));
    ASSERT_TRUE(c.ok());
    s.apply(whole(1), c);
    int held = std::countr_zero(c.gpus);
    // Two halves fit only on the other GPU; a third fits nowhere.
    for (int i = 0; i < 2; ++i) {
      Choice h = policy->choose(s, shared(500));
      ASSERT_TRUE(h.ok());
      EXPECT_EQ(h.gpus & (1u << held), 0u);
      s.apply(shared(500), h);
    }
    EXPECT_FALSE(policy->choose(s, shared(100)).ok());
  }
}

TEST(Placement, WholeTaskTakesOnlyEntirelyFreeGpus) {
  for (auto& policy : allPolicies({shared(300), whole(2)})) {
    ClusterState s = cluster({{"a", 64000, 100000, 2, "V100"}});
    s.apply(shared(300), {0, 1u});
    EXPECT_FALSE(policy->choose(s, whole(2)).ok());
    Choice c = policy->choose(s, whole(1));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.gpus, 2u);
  }
}

TEST(Placement, ModelConstraint) {
  ClusterState s = cluster({{"a", 64000, 100000, 8, "P100"}, {"b", 64000, 100000, 8, "V100"}});
  Task t = whole(1);
  t.allowedModels = s.modelMask({"V100", "A100"});
  for (auto& policy : allPolicies({t})) {
    Choice c = policy->choose(s, t);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(s.name(c.node), "b");
  }
  t.allowedModels = s.modelMask({"A100"});  // no node has it
  for (auto& policy : allPolicies({t})) EXPECT_FALSE(policy->choose(s, t).ok());
}

TEST(Placement, CpuAndMemoryMustFit) {
  ClusterState s = cluster({{"a", 4000, 100000, 8, "V100"},
                            {"b", 64000, 1000, 8, "V100"},
                            {"c", 64000, 100000, 8, "V100"}});
  Task t{8000, 8000, 1, 1000, kAnyModel};
  for (auto& policy : allPolicies({t})) {
    Choice c = policy->choose(s, t);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(s.name(c.node), "c");
  }
  Task cpuOnly{70000, 1, 0, 0, kAnyModel};
  for (auto& policy : allPolicies({t})) EXPECT_FALSE(policy->choose(s, cpuOnly).ok());
  // The free CPU over every node follows what is taken and given back.
  EXPECT_EQ(s.cpuFreeTotal(), 132000);
  s.apply(t, Choice{2, 0x1});
  EXPECT_EQ(s.cpuFreeTotal(), 124000);
  s.release(t, Choice{2, 0x1});
  EXPECT_EQ(s.cpuFreeTotal(), 132000);
}

TEST(Fgd, KeepsWholeGpusFreeForAMultiGpuWorkload) {
  // Node a already has a partly used GPU; b is untouched. For a workload of mostly 4-GPU tasks,
  // a new shared task belongs on a's used GPU, so b keeps all four GPUs whole. FirstFit/BestFit
  // comparisons aside, FGD must see it.
  ClusterState s = cluster({{"b", 64000, 100000, 4, "V100"}, {"a", 64000, 100000, 4, "V100"}});
  s.apply(shared(200), {1, 1u});
  std::vector<Task> workload(9, whole(4));
  workload.push_back(shared(200));
  FgdPolicy fgd(WorkloadDistribution::fromTasks(workload));
  Choice c = fgd.choose(s, shared(300));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(s.name(c.node), "a");
  EXPECT_EQ(c.gpus, 1u);  // the GPU already in use, not a fresh one
  // And the fragmentation it reports agrees with the delta it acted on.
  const auto w = WorkloadDistribution::fromTasks(workload);
  double before = w.fragmentation(s, 1);
  double predicted = w.delta(s, 1, shared(300), c.gpus);
  s.apply(shared(300), c);
  EXPECT_NEAR(w.fragmentation(s, 1) - before, predicted, 1e-6);
}

TEST(Fgd, DeltaMatchesRecomputedFragmentation) {
  std::mt19937_64 rng(3);
  std::vector<Task> workload;
  for (int i = 0; i < 200; ++i) {
    int kind = rng() % 4;
    workload.push_back(kind == 0
                           ? shared(100 + rng() % 900)
                           : (kind == 3 ? Task{1000, 1, 0, 0, kAnyModel} : whole(1 + rng() % 8)));
  }
  auto w = WorkloadDistribution::fromTasks(workload);
  ClusterState s = cluster({{"a", 1 << 30, 1 << 30, 8, "G1"}});
  for (int i = 0; i < 50; ++i) {
    Task t = workload[rng() % workload.size()];
    if (!s.fits(0, t)) continue;
    Choice c{0, s.firstGpus(0, t)};
    double before = w.fragmentation(s, 0);
    double predicted = w.delta(s, 0, t, c.gpus);
    s.apply(t, c);
    EXPECT_NEAR(w.fragmentation(s, 0) - before, predicted, 1e-6);
  }
}

// Every policy over random clusters and task streams: after each decision, an independent ledger
// of what was placed on each GPU shows no GPU over-committed and whole GPUs exclusive; the same
// seed gives the same decisions.
TEST(BestFit, ScoresCpuAndGpuButNotMemory) {
  // Identical but for free memory: memory is not scored, so the tie goes to the lower index.
  ClusterState s =
      cluster({{"roomy", 64000, 1'000'000, 4, "V100"}, {"tight", 64000, 2048, 4, "V100"}});
  BestFitPolicy policy;
  EXPECT_EQ(policy.choose(s, whole(1)).node, 0);
  // Less CPU left after placement wins.
  ClusterState t =
      cluster({{"big", 96000, 100000, 4, "V100"}, {"small", 32000, 100000, 4, "V100"}});
  EXPECT_EQ(policy.choose(t, whole(1)).node, 1);
}

TEST(Random, SharedTaskGoesOnARandomFittingGpu) {
  std::set<uint32_t> seen;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    ClusterState s = cluster({{"a", 64000, 100000, 4, "V100"}});
    s.apply(shared(800), {0, 1u});  // GPU 0 has 200 free: too little for 500
    RandomPolicy policy(seed);
    Choice c = policy.choose(s, shared(500));
    ASSERT_TRUE(c.ok());
    EXPECT_NE(c.gpus, 1u);
    seen.insert(c.gpus);
  }
  EXPECT_EQ(seen.size(), 3u);  // GPUs 1, 2 and 3 all drawn
}

// Half the workload is 1-GPU tasks, half CPU-only, and one task in a thousand needs 40 CPUs and
// a GPU. Placing a 1-GPU task on `lean` (40.5 CPUs) also shuts that rare type out, so
// fragmentation grows by 7 milli-GPU more there than on `fat`: both get the same integer score
// (62). `cpuOnlyCores` sizes the CPU-only tasks, so that CPU binds or does not.
std::vector<Task> tieWorkload(ModelSet rareModels, int64_t cpuOnlyCores) {
  std::vector<Task> workload;
  for (int i = 0; i < 500; ++i) workload.push_back(whole(1));
  for (int i = 0; i < 499; ++i)
    workload.push_back(Task{cpuOnlyCores * 1000, 1024, 0, 0, kAnyModel});
  workload.push_back(Task{40000, 1024, 1, 1000, rareModels});
  return workload;
}
const std::vector<NodeSpec> kFatLean = {{"fat", 64000, 100000, 8, "V100"},
                                        {"lean", 40500, 100000, 8, "V100"}};
const std::vector<NodeSpec> kLeanFat = {kFatLean[1], kFatLean[0]};

// The two nodes tie for a 1-GPU task, and the tie goes to the one listed first, either way.
void expectTheTieGoesToTheLowestIndex(const std::vector<Task>& workload) {
  ClusterState s = cluster(kFatLean);
  WorkloadDistribution w = WorkloadDistribution::fromTasks(workload);
  EXPECT_NEAR(w.delta(s, 0, whole(1), 1u), -499, 1e-9);
  EXPECT_NEAR(w.delta(s, 1, whole(1), 1u), -492, 1e-9);
  FgdPolicy policy(w);
  EXPECT_EQ(policy.choose(s, whole(1)).node, 0);
  EXPECT_EQ(policy.choose(cluster(kLeanFat), whole(1)).node, 0);
}

TEST(Fgd, NearlyEqualFragmentationTiesAndAGpuTaskTakesTheLowestIndex) {
  // The rare task names V100, the only model, so ties there stay with the lowest index (random
  // when the nodes are listed in a random order): not the BestFit order, which would pick `lean`,
  // less CPU left, nor the balance below, which would too, in either listing.
  expectTheTieGoesToTheLowestIndex(tieWorkload(cluster(kFatLean).modelMask({"V100"}), 1));
}

TEST(Fgd, OnAModelNoTaskNamesAWholeGpuTieGoesToTheNodeWithCpuAndGpuLeftInBalance) {
  // Nobody names V100. After a 1-GPU task, `fat` keeps 98% of its CPU and 88% of its GPUs,
  // `lean` 98% and 88% too but closer (|0.975 - 0.875| < |0.984 - 0.875|): `lean`, in either
  // listing.
  {
    FgdPolicy policy(WorkloadDistribution::fromTasks(tieWorkload(kAnyModel, 1)));
    EXPECT_EQ(policy.choose(cluster(kFatLean), whole(1)).node, 1);
    EXPECT_EQ(policy.choose(cluster(kLeanFat), whole(1)).node, 0);
  }
  // When CPU binds (CPU-only tasks of 200 cores), the scores tie the same way but the balance
  // is not asked: the lowest index.
  expectTheTieGoesToTheLowestIndex(tieWorkload(kAnyModel, 200));
}

TEST(Fgd, ASharedTaskTieGoesToTheNodeWithTheMostSharedGpus) {
  // A workload of half-GPU tasks. On `fresh` a half task changes nothing (0 milli: 500 usable
  // left of the 1,000 it took); on `sharing`, whose GPU 0 has 600 free, the same holds on its
  // free GPU 1 (on GPU 0 it would leave 100 no task fits). A tie: the task goes to `sharing`,
  // listed first or not, so whole GPUs stay whole on `fresh`.
  std::vector<Task> workload(10, shared(500));
  for (bool sharingFirst : {false, true}) {
    std::vector<NodeSpec> nodes = {{"fresh", 64000, 100000, 2, "V100"},
                                   {"sharing", 64000, 100000, 2, "V100"}};
    if (sharingFirst) std::swap(nodes[0], nodes[1]);
    ClusterState s = cluster(nodes);
    const int sharing = sharingFirst ? 0 : 1;
    s.apply(shared(400), Choice{sharing, 1u});
    WorkloadDistribution w = WorkloadDistribution::fromTasks(workload);
    EXPECT_NEAR(w.delta(s, 1 - sharing, shared(500), 1u), 0, 1e-9);
    EXPECT_NEAR(w.delta(s, sharing, shared(500), 2u), 0, 1e-9);
    FgdPolicy policy(w);
    Choice c = policy.choose(s, shared(500));
    EXPECT_EQ(c.node, sharing) << "sharing listed first: " << sharingFirst;
    EXPECT_EQ(c.gpus, 2u);
  }
}

TEST(Fgd, ACpuOnlyTaskTiesGoToTheBestFitOrder) {
  // A CPU-only task scores the same on a node whose GPUs are all taken and on an empty one (no
  // GPU type loses its fit either way); the BestFit order puts it on the full node, whose CPU no
  // GPU task can use any more, even when the empty node comes first.
  std::vector<Task> workload = {whole(8), Task{2000, 1024, 0, 0, kAnyModel}};
  ClusterState s =
      cluster({{"empty", 64000, 100000, 8, "V100"}, {"full", 64000, 100000, 8, "V100"}});
  FgdPolicy policy(WorkloadDistribution::fromTasks(workload));
  s.apply(whole(8), Choice{1, 0xff});
  Choice c = policy.choose(s, Task{2000, 1024, 0, 0, kAnyModel});
  EXPECT_EQ(c.node, 1);
}

TEST(Fgd, WhenCpuBindsACpuOnlyTaskPacksCpuOverASmallFragmentation) {
  // A GPU type asking 8 cores per GPU (most tasks) and a rare one asking 2; CPU-only tasks of
  // 1.5 cores. On "low" 3 cores are left: the task there stops the rare type fitting, a
  // fragmentation of 8,000 * 1/200 = 40 milli-GPU; on "roomy" it changes nothing.
  std::vector<Task> workload(199, Task{8000, 1024, 1, 1000, kAnyModel});
  workload.push_back(Task{2000, 1024, 1, 1000, kAnyModel});
  workload.insert(workload.end(), 100, Task{1500, 1024, 0, 0, kAnyModel});
  const Task cpuOnly{1500, 1024, 0, 0, kAnyModel};
  // CPU binds (19 free cores against 8 free GPUs that would bring ~70): the 40 milli count as
  // none, and the task packs CPU onto "low" rather than cut into the cores "roomy" keeps for
  // its GPUs.
  {
    ClusterState s =
        cluster({{"roomy", 16000, 100000, 4, "V100"}, {"low", 3000, 100000, 4, "V100"}});
    FgdPolicy policy(WorkloadDistribution::fromTasks(workload));
    EXPECT_EQ(policy.choose(s, cpuOnly).node, 1);
  }
  // With CPU to spare (a CPU-only node with 200 cores), the fragmentation counts: not "low".
  {
    ClusterState s = cluster({{"roomy", 16000, 100000, 4, "V100"},
                              {"low", 3000, 100000, 4, "V100"},
                              {"cpus", 200000, 400000, 0, "V100"}});
    FgdPolicy policy(WorkloadDistribution::fromTasks(workload));
    EXPECT_NE(policy.choose(s, cpuOnly).node, 1);
  }
}

TEST(Placement, PropertyNoGpuOverCommittedAndDeterministic) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<NodeSpec> nodes;
    const char* models[] = {"G1", "G2", "G3"};
    int n = 1 + rng() % 12;
    for (int i = 0; i < n; ++i) {
      nodes.push_back({"n" + std::to_string(i), int64_t(8000 + rng() % 64000),
                       int64_t(16000 + rng() % 200000), int(rng() % 9), models[rng() % 3]});
    }
    std::vector<Task> stream;
    for (int i = 0; i < 300; ++i) {
      Task t{int64_t(rng() % 8000), int64_t(rng() % 16000), 0, 0, kAnyModel};
      int kind = rng() % 4;
      if (kind == 1) t.numGpu = 1, t.gpuMilli = 50 + rng() % 950;
      if (kind >= 2) t.numGpu = 1 + rng() % 8, t.gpuMilli = 1000;
      if (rng() % 5 == 0) t.allowedModels = ModelSet::of({static_cast<int>(rng() % 3)});
      stream.push_back(t);
    }
    for (const char* name : {"random", "firstfit", "bestfit", "fgd"}) {
      std::vector<std::pair<int, uint32_t>> runs[2];
      for (int run = 0; run < 2; ++run) {
        ClusterState s = cluster(nodes);
        auto policy = std::move(makePolicy(name, seed, stream)).value();
        std::map<std::pair<int, int>, std::pair<int, int>> ledger;  // gpu -> (whole, milli)
        for (const Task& t : stream) {
          Choice c = policy->choose(s, t);
          runs[run].push_back({c.node, c.gpus});
          if (!c.ok()) continue;
          ASSERT_TRUE(s.fits(c.node, t));
          s.apply(t, c);
          for (int g = 0; g < 32; ++g) {
            if (!((c.gpus >> g) & 1)) continue;
            auto& [wholeHolders, milli] = ledger[{c.node, g}];
            if (t.shared()) {
              milli += t.gpuMilli;
            } else {
              ++wholeHolders;
            }
            ASSERT_LE(wholeHolders, 1) << name;
            ASSERT_TRUE(wholeHolders == 0 || milli == 0) << name << ": fraction on a whole GPU";
            ASSERT_LE(milli, 1000) << name;
          }
        }
      }
      EXPECT_EQ(runs[0], runs[1]) << name << " seed " << seed;
    }
  }
}

TEST(Placement, RejectsOversizedNode) {
  auto s = ClusterState::create({{"big", 1, 1, 64, "G1"}});
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(makePolicy("nope", 1, {}).ok());
}

TEST(ModelSet, HoldsIdsPastSixtyFourAndKeepsSetAlgebra) {
  ModelSet a = ModelSet::of({1, 63, 64, 200});
  for (int id : {1, 63, 64, 200}) EXPECT_TRUE(a.contains(id)) << id;
  for (int id : {-1, 0, 2, 65, 199, 201, 100000}) EXPECT_FALSE(a.contains(id)) << id;
  EXPECT_EQ(a.maxId(), 200);
  const ModelSet b = ModelSet::of({63, 200, 300});
  EXPECT_EQ(a & b, ModelSet::of({63, 200}));
  EXPECT_EQ(a | b, ModelSet::of({1, 63, 64, 200, 300}));
  EXPECT_EQ(a - b, ModelSet::of({1, 64}));
  // Trimmed: a set emptied of its high ids equals one that never had them.
  EXPECT_EQ(ModelSet::of({5, 300}) - ModelSet::of({300}), ModelSet::of({5}));
  EXPECT_TRUE((a - a).empty());
  EXPECT_FALSE((a - b) < (a - b));
  // Any model: contains everything, is the identity of &, absorbs |.
  EXPECT_TRUE(kAnyModel.contains(65'000));
  EXPECT_EQ(kAnyModel & b, b);
  EXPECT_TRUE((kAnyModel | b).isAny());
  EXPECT_TRUE((b - kAnyModel).empty());
  EXPECT_EQ(ModelSet::of({7}).hash(), (ModelSet::of({7, 300}) - ModelSet::of({300})).hash());
}

TEST(ClusterState, ModelsPastSixtyFourPlace) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 300; ++i)
    nodes.push_back({"n" + std::to_string(i), 8000, 65536, 1, "M" + std::to_string(1000 + i)});
  auto s = ClusterState::create(nodes);
  ASSERT_TRUE(s.ok()) << s.status().message();
  Task t{1000, 1024, 1, 1000, s->modelMask({"M1299"})};
  auto policy = makePolicy("bestfit", 1, {});
  ASSERT_TRUE(policy.ok());
  Choice c = (*policy)->choose(*s, t);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(s->name(c.node), "n299");
  // FGD's workload index is per model too: a task type on model 299 is used there.
  WorkloadDistribution w = WorkloadDistribution::fromTasks({t});
  EXPECT_EQ(w.typeOf(t), 0);
  EXPECT_GT(w.usable(*s, c.node), 0);
  EXPECT_EQ(w.usable(*s, 0), 0);
}

}  // namespace
}  // namespace allot::sched::placement
