#include "sched/quota/quota.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <sstream>

namespace allot::sched::quota {
namespace {

Team team(const std::string& name, std::map<std::string, int> guaranteed, int borrow, int lend,
          double weight = 1.0, double usage = 0) {
  return Team{name, std::move(guaranteed), borrow, lend, weight, usage};
}

Allocation alloc(int64_t id, const std::string& t, int gpus, TimeMs startedAt, int priority = 0,
                 const std::string& model = "A100") {
  return Allocation{id, t, model, gpus, priority, true, startedAt, false};
}

Request req(int64_t id, const std::string& t, int gpus, TimeMs submittedAt = 0,
            const std::string& model = "A100", int priority = 0) {
  return Request{id, t, model, gpus, priority, submittedAt};
}

QuotaDecisions decide(const QuotaSnapshot& s) {
  auto r = decideQuota(s);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : QuotaDecisions{};
}

// The job ids of admissions or victims, in the order decided.
template <typename Decided>
std::vector<int64_t> jobIds(const std::vector<Decided>& decided) {
  std::vector<int64_t> ids;
  for (const auto& x : decided) ids.push_back(x.jobId);
  return ids;
}
std::vector<int64_t> admittedIds(const QuotaDecisions& d) { return jobIds(d.admissions); }
std::vector<int64_t> victimIds(const QuotaDecisions& d) { return jobIds(d.victims); }

const QuotaWait* waitOf(const QuotaDecisions& d, int64_t id) {
  for (const auto& w : d.waits) {
    if (w.jobId == id) return &w;
  }
  return nullptr;
}

std::optional<WaitReason> reasonOf(const QuotaDecisions& d, int64_t id) {
  const QuotaWait* w = waitOf(d, id);
  return w ? std::optional(w->reason) : std::nullopt;
}

// The victims job `id` waits to see leave; none when it does not wait.
std::vector<int64_t> waitingForOf(const QuotaDecisions& d, int64_t id) {
  const QuotaWait* w = waitOf(d, id);
  return w ? w->waitingFor : std::vector<int64_t>{};
}

const TeamLedger& ledgerOf(const QuotaDecisions& d, const std::string& name) {
  for (const auto& l : d.ledger) {
    if (l.team == name) return l;
  }
  ADD_FAILURE() << "no ledger for " << name;
  static TeamLedger none;
  return none;
}

int admittedGpus(const QuotaDecisions& d, const QuotaSnapshot& s, const std::string& t) {
  int n = 0;
  for (const auto& a : d.admissions) {
    for (const auto& r : s.pending) {
      if (r.jobId == a.jobId && r.team == t) n += r.gpus;
    }
  }
  return n;
}

TEST(Quota, WithinGuaranteeIsAdmittedBeforeBorrowing) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 4}};
  s.teams = {team("borrower", {}, 4, 0), team("owner", {{"A100", 4}}, 0, 4)};
  // The borrower asked first, but the owner's request is within its guarantee.
  s.pending = {req(1, "borrower", 2, 100), req(2, "owner", 2, 200)};
  auto d = decide(s);
  EXPECT_EQ(admittedIds(d), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(d.admissions[0].withinGpus, 2);
  EXPECT_EQ(d.admissions[1].borrowedGpus, 2);
  EXPECT_TRUE(d.victims.empty());
}

TEST(Quota, WithinGuaranteeOrderIsPriorityThenSubmitTime) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 8}};
  s.teams = {team("t", {{"A100", 8}}, 0, 0)};
  s.pending = {req(1, "t", 1, 300, "A100", 0), req(2, "t", 1, 100, "A100", 0),
               req(3, "t", 1, 500, "A100", 5)};
  EXPECT_EQ(admittedIds(decide(s)), (std::vector<int64_t>{3, 2, 1}));
}

TEST(Quota, BorrowLimitCapsUseBeyondGuarantee) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 16}};  // all unowned: freely borrowable
  s.teams = {team("t", {{"A100", 2}}, 1, 0)};
  s.pending = {req(1, "t", 3, 1)};
  auto d = decide(s);
  ASSERT_EQ(admittedIds(d), (std::vector<int64_t>{1}));
  EXPECT_EQ(d.admissions[0].withinGpus, 2);
  EXPECT_EQ(d.admissions[0].borrowedGpus, 1);
  // Next pass: it runs; one more GPU would be a second borrowed one.
  s.running = {alloc(1, "t", 3, 5)};
  s.pending = {req(2, "t", 1, 2)};
  d = decide(s);
  EXPECT_TRUE(d.admissions.empty());
  ASSERT_NE(waitOf(d, 2), nullptr);
  EXPECT_EQ(reasonOf(d, 2), WaitReason::kOverQuota);
  EXPECT_NE(describeWait(*waitOf(d, 2), s.pending[0]).find("over quota"), std::string::npos);
}

TEST(Quota, LendLimitCapsWhatOthersMayBorrow) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 8}};
  s.teams = {team("b", {}, 8, 0), team("lender", {{"A100", 8}}, 0, 3)};
  for (int i = 1; i <= 5; ++i) s.pending.push_back(req(i, "b", 1, i));
  auto d = decide(s);
  EXPECT_EQ(admittedIds(d), (std::vector<int64_t>{1, 2, 3}));
  ASSERT_NE(waitOf(d, 4), nullptr);
  EXPECT_EQ(reasonOf(d, 4), WaitReason::kWaitingForLenders);
  EXPECT_EQ(ledgerOf(d, "b").borrowedGpus, 3);
}

TEST(Quota, LendableShrinksAsTheLenderUsesItsGuarantee) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 8}};
  s.teams = {team("b", {}, 8, 0), team("lender", {{"A100", 8}}, 0, 8)};
  s.running = {alloc(1, "lender", 6, 0)};
  s.pending = {req(2, "b", 3, 1), req(3, "b", 2, 2)};
  auto d = decide(s);
  EXPECT_EQ(admittedIds(d), (std::vector<int64_t>{3}));  // idle guarantee is 2
  EXPECT_EQ(reasonOf(d, 2), WaitReason::kNoFreeGpus);
}

TEST(Quota, ATeamDoesNotLendToItself) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 4}, {"H100", 2}};
  s.teams = {team("x", {{"A100", 4}}, 4, 4), team("y", {{"H100", 2}}, 0, 0)};
  s.pending = {req(1, "x", 2, 0, "H100")};
  auto d = decide(s);
  EXPECT_TRUE(d.admissions.empty());
  EXPECT_EQ(reasonOf(d, 1), WaitReason::kWaitingForLenders);
}

TEST(Quota, FairShareSplitsIdleCapacityByWeight) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 12}};
  s.teams = {team("a", {}, 12, 0, 2.0), team("b", {}, 12, 0, 1.0)};
  for (int i = 0; i < 12; ++i) {
    s.pending.push_back(req(100 + i, "a", 1, i));
    s.pending.push_back(req(200 + i, "b", 1, i));
  }
  auto d = decide(s);
  EXPECT_EQ(admittedGpus(d, s, "a"), 8);
  EXPECT_EQ(admittedGpus(d, s, "b"), 4);
}

// Passes over time: jobs run one pass each, usage history decays; the team that starts with a
// heavy history gets less at first, and the totals even out by weight.
TEST(Quota, FairShareCountsDecayedHistoryOverPasses) {
  const TimeMs kPass = 600'000, kHalfLife = 3'600'000;
  std::vector<Team> teams = {team("a", {}, 12, 0, 1.0, 0), team("b", {}, 12, 0, 1.0, 6 * 3600.0)};
  int totalA = 0, totalB = 0, firstA = 0, firstB = 0;
  int64_t nextId = 1;
  for (int pass = 0; pass < 24; ++pass) {
    QuotaSnapshot s;
    s.now = pass * kPass;
    s.capacity = {{"A100", 12}};
    s.teams = teams;
    s.policy.shareWindowMs = kHalfLife;
    for (int i = 0; i < 12; ++i) {
      s.pending.push_back(req(nextId++, "a", 1, s.now));
      s.pending.push_back(req(nextId++, "b", 1, s.now));
    }
    auto d = decide(s);
    int a = admittedGpus(d, s, "a"), b = admittedGpus(d, s, "b");
    ASSERT_EQ(a + b, 12);
    if (pass == 0) {
      firstA = a;
      firstB = b;
    }
    totalA += a;
    totalB += b;
    teams[0].usageGpuSeconds = advanceUsage(teams[0].usageGpuSeconds, a, kPass, kHalfLife);
    teams[1].usageGpuSeconds = advanceUsage(teams[1].usageGpuSeconds, b, kPass, kHalfLife);
  }
  EXPECT_GT(firstA, firstB);
  EXPECT_GT(totalA, totalB);  // b had used a lot before
  // ...but b is not starved: it catches up to within a small margin of an even split.
  EXPECT_GE(totalB * 100, 40 * (totalA + totalB));
}

TEST(Quota, HistoryDecaysWithHalfLife) {
  EXPECT_DOUBLE_EQ(decayUsage(100, 1000, 1000), 50);
  EXPECT_DOUBLE_EQ(decayUsage(100, 3000, 1000), 12.5);
  EXPECT_DOUBLE_EQ(decayUsage(100, 0, 1000), 100);
  // Accruing in one step or many gives the same history.
  double once = advanceUsage(10, 4, 60'000, 30'000);
  double steps = 10;
  for (int i = 0; i < 60; ++i) steps = advanceUsage(steps, 4, 1'000, 30'000);
  EXPECT_NEAR(once, steps, 1e-9 * once);
  // Held forever, usage tends to gpus * halfLife / ln 2.
  EXPECT_NEAR(advanceUsage(0, 2, 3'600'000'000, 60'000), 2 * 60 / std::log(2.0), 1e-6);
}

// A typical reclaim scene: the owner's guarantee of 6 is lent out; team b holds 2 within its own
// guarantee (job 10) and borrows 6 (jobs 11, 12).
QuotaSnapshot reclaimScene() {
  QuotaSnapshot s;
  s.capacity = {{"A100", 8}};
  s.teams = {team("b", {{"A100", 2}}, 6, 0), team("owner", {{"A100", 6}}, 0, 6)};
  s.running = {alloc(10, "b", 2, 100), alloc(11, "b", 2, 200), alloc(12, "b", 4, 300)};
  return s;
}

TEST(Quota, PreemptionPrefersFewestVictims) {
  QuotaSnapshot s = reclaimScene();
  s.pending = {req(1, "owner", 4, 1000)};
  auto d = decide(s);
  EXPECT_EQ(victimIds(d), (std::vector<int64_t>{12}));
  EXPECT_EQ(d.victims[0].reason, "reclaimed by team owner for job 1");
  EXPECT_TRUE(d.admissions.empty());
  EXPECT_EQ(reasonOf(d, 1), WaitReason::kWaitingForGrace);
  EXPECT_EQ(waitingForOf(d, 1), (std::vector<int64_t>{12}));
}

TEST(Quota, PreemptionPrefersFewestGpusAmongEqualCounts) {
  QuotaSnapshot s = reclaimScene();
  s.pending = {req(1, "owner", 2, 1000)};
  EXPECT_EQ(victimIds(decide(s)), (std::vector<int64_t>{11}));
}

TEST(Quota, PreemptionPrefersLowestPriorityThenMostRecent) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 8}};
  s.teams = {team("b", {}, 8, 0), team("owner", {{"A100", 8}}, 0, 8)};
  s.running = {alloc(10, "b", 2, 100, 1), alloc(11, "b", 2, 200, 0), alloc(12, "b", 2, 300, 1),
               alloc(13, "b", 2, 400, 1)};
  s.pending = {req(1, "owner", 2, 1000)};
  EXPECT_EQ(victimIds(decide(s)), (std::vector<int64_t>{11}));  // lowest priority
  s.running[1].priority = 1;
  EXPECT_EQ(victimIds(decide(s)), (std::vector<int64_t>{13}));  // most recently started
}

TEST(Quota, NeverPreemptsWorkWithinItsOwnersGuarantee) {
  QuotaSnapshot s = reclaimScene();
  s.pending = {req(1, "owner", 6, 1000)};
  auto d = decide(s);
  auto v = victimIds(d);
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<int64_t>{11, 12}));  // job 10 is within b's guarantee
}

// Job 1 waits for `why`, and nobody is preempted for it.
void expectWaitWithoutVictims(const QuotaSnapshot& s, WaitReason why) {
  auto d = decide(s);
  EXPECT_TRUE(d.victims.empty());
  EXPECT_EQ(reasonOf(d, 1), why);
}

TEST(Quota, PartlyWithinGuaranteeWorkIsNotReclaimable) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 8}};
  s.teams = {team("b", {{"A100", 2}}, 6, 0), team("owner", {{"A100", 6}}, 0, 6)};
  s.running = {alloc(10, "b", 8, 100)};  // 2 within, 6 borrowed
  s.pending = {req(1, "owner", 2, 1000)};
  expectWaitWithoutVictims(s, WaitReason::kGuaranteeInUse);
}

TEST(Quota, AnyModelGuaranteedWorkIsNeverReclaimed) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 4}, {"H100", 4}};
  s.teams = {team("x", {{"A100", 4}}, 0, 4), team("y", {{kAnyModel, 4}}, 0, 0)};
  s.running = {alloc(10, "y", 4, 100)};  // on A100, within y's any-model guarantee
  s.pending = {req(1, "x", 4, 1000)};
  expectWaitWithoutVictims(s, WaitReason::kGuaranteeInUse);
}

TEST(Quota, BorrowingNeverPreempts) {
  QuotaSnapshot s = reclaimScene();
  s.teams.push_back(team("c", {}, 8, 0));
  s.pending = {req(1, "c", 2, 1000)};
  expectWaitWithoutVictims(s, WaitReason::kNoFreeGpus);
}

TEST(Quota, NextPassWaitsForEvictingVictimsWithoutNewOnes) {
  QuotaSnapshot s = reclaimScene();
  s.running[2].evicting = true;  // job 12 was reclaimed last pass
  s.pending = {req(1, "owner", 4, 1000)};
  auto d = decide(s);
  EXPECT_TRUE(d.victims.empty());
  EXPECT_EQ(reasonOf(d, 1), WaitReason::kWaitingForGrace);
  EXPECT_EQ(waitingForOf(d, 1), (std::vector<int64_t>{12}));
}

TEST(Quota, VictimsAreNotTakenTwiceInOnePass) {
  QuotaSnapshot s = reclaimScene();
  s.pending = {req(1, "owner", 2, 1000), req(2, "owner", 2, 1001)};
  auto d = decide(s);
  auto v = victimIds(d);
  std::set<int64_t> unique(v.begin(), v.end());
  EXPECT_EQ(unique.size(), v.size());
  EXPECT_EQ(reasonOf(d, 1), WaitReason::kWaitingForGrace);
  EXPECT_EQ(reasonOf(d, 2), WaitReason::kWaitingForGrace);
}

// GPUs are free, but the owner taking back its guarantee leaves less to lend than is borrowed.
TEST(Quota, UsingGuaranteeReclaimsWhatWasLentBeyondTheLendLimit) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 12}};
  s.teams = {team("b", {}, 8, 0), team("c", {{"A100", 4}}, 0, 0),
             team("lender", {{"A100", 8}}, 0, 4)};
  s.running = {alloc(10, "b", 2, 100), alloc(11, "b", 2, 200)};
  s.pending = {req(1, "lender", 6, 1000)};
  auto d = decide(s);
  EXPECT_EQ(admittedIds(d), (std::vector<int64_t>{1}));
  EXPECT_EQ(victimIds(d), (std::vector<int64_t>{11}));
  EXPECT_EQ(ledgerOf(d, "b").borrowedGpus, 2);
  EXPECT_EQ(ledgerOf(d, "lender").lendable, 2);
}

TEST(Quota, AnyModelRequestResolvesToAModel) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 2}, {"H100", 4}};
  s.teams = {team("t", {}, 8, 0)};
  s.pending = {req(1, "t", 3, 0, kAnyModel)};
  auto d = decide(s);
  ASSERT_EQ(d.admissions.size(), 1u);
  EXPECT_EQ(d.admissions[0].model, "H100");
}

TEST(Quota, ImpossibleRequestsSaySo) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 4}};
  s.teams = {team("t", {{"A100", 4}}, 8, 0)};
  s.pending = {req(1, "t", 2, 0, "V100"), req(2, "t", 8, 0)};
  auto d = decide(s);
  EXPECT_EQ(reasonOf(d, 1), WaitReason::kUnknownModel);
  EXPECT_EQ(reasonOf(d, 2), WaitReason::kExceedsCapacity);
}

TEST(Quota, RejectsInconsistentInput) {
  QuotaSnapshot s;
  s.capacity = {{"A100", 4}};
  s.teams = {team("t", {{"A100", 5}}, 0, 0)};
  auto r = decideQuota(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("exceed"), std::string::npos);
  s.teams = {team("t", {{"A100", 4}}, 0, 0)};
  s.pending = {req(1, "nobody", 1)};
  EXPECT_FALSE(decideQuota(s).ok());
  s.pending = {req(1, "t", 1)};
  s.running = {alloc(1, "t", 1, 0)};
  EXPECT_FALSE(decideQuota(s).ok());  // duplicate job id
}

// ---- Random snapshots: determinism and invariants after every pass. ----

std::string serialize(const QuotaDecisions& d) {
  std::ostringstream o;
  o.precision(17);
  for (const auto& a : d.admissions) {
    o << "A " << a.jobId << ' ' << a.model << ' ' << a.withinGpus << ' ' << a.borrowedGpus << '\n';
  }
  for (const auto& v : d.victims) {
    o << "V " << v.jobId << ' ' << v.team << ' ' << v.gpus << ' ' << v.forJob << ' ' << v.reason
      << '\n';
  }
  for (const auto& w : d.waits) {
    o << "W " << w.jobId << ' ' << waitReasonName(w.reason);
    for (auto id : w.waitingFor) o << ' ' << id;
    o << '\n';
  }
  for (const auto& l : d.ledger) {
    o << "L " << l.team << ' ' << l.guaranteed << ' ' << l.withinGpus << ' ' << l.borrowedGpus
      << ' ' << l.lendable << ' ' << l.share << '\n';
  }
  o << "U " << d.unownedGpus << '\n';
  return o.str();
}

const std::vector<std::string> kModels = {"A100", "H100"};

QuotaSnapshot randomCluster(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  QuotaSnapshot s;
  for (const auto& m : kModels) s.capacity[m] = pick(0, 16);
  std::map<std::string, int> left = s.capacity;
  int total = s.capacity["A100"] + s.capacity["H100"];
  int nTeams = pick(2, 4);
  for (int i = 0; i < nTeams; ++i) {
    std::map<std::string, int> g;
    for (const auto& m : kModels) {
      int n = pick(0, left[m] / 2 + 1);
      n = std::min({n, left[m], total});  // any-model guarantees take from the total too
      if (n > 0) g[m] = n;
      left[m] -= n;
      total -= n;
    }
    int any = std::min(pick(0, 3), total);
    if (any > 0) g[kAnyModel] = any;
    total -= any;
    s.teams.push_back(team("t" + std::to_string(i), g, pick(0, 8), pick(0, 8), pick(1, 3),
                           pick(0, 1) * pick(0, 36000)));
  }
  return s;
}

void addRequests(QuotaSnapshot& s, std::mt19937& rng, int64_t& nextId, int n) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < n; ++i) {
    int m = pick(0, 2);
    s.pending.push_back(
        Request{nextId++, s.teams[pick(0, static_cast<int>(s.teams.size()) - 1)].name,
                m == 2 ? kAnyModel : kModels[m], pick(1, 6), pick(0, 2), s.now - pick(0, 1000)});
  }
}

// Independently of the policy: is allocation `v` wholly beyond its team's guarantee?
bool whollyBorrowed(const QuotaSnapshot& s, const Allocation& v) {
  const Team* t = nullptr;
  for (const auto& x : s.teams) {
    if (x.name == v.team) t = &x;
  }
  std::map<std::string, int> g = t->guaranteed;
  std::vector<const Allocation*> mine;
  for (const auto& a : s.running) {
    if (a.team == v.team && !a.evicting) mine.push_back(&a);
  }
  std::sort(mine.begin(), mine.end(), [](const Allocation* a, const Allocation* b) {
    return std::tuple(a->startedAt, a->jobId) < std::tuple(b->startedAt, b->jobId);
  });
  for (const Allocation* a : mine) {
    int specific = std::min(a->gpus, g[a->model]);
    g[a->model] -= specific;
    int any = std::min(a->gpus - specific, g[kAnyModel]);
    g[kAnyModel] -= any;
    if (a->jobId == v.jobId) return specific + any == 0;
  }
  return false;
}

void checkInvariants(const QuotaSnapshot& s, const QuotaDecisions& d) {
  std::map<int64_t, const Allocation*> running;
  for (const auto& a : s.running) running[a.jobId] = &a;
  std::map<int64_t, const Request*> pending;
  for (const auto& r : s.pending) pending[r.jobId] = &r;

  // Every request is decided exactly once.
  std::set<int64_t> decided;
  for (const auto& a : d.admissions) ASSERT_TRUE(decided.insert(a.jobId).second);
  for (const auto& w : d.waits) ASSERT_TRUE(decided.insert(w.jobId).second);
  ASSERT_EQ(decided.size(), s.pending.size());

  // Victims: running, not already leaving, wholly borrowed, chosen once.
  std::set<int64_t> victims;
  for (const auto& v : d.victims) {
    ASSERT_TRUE(running.count(v.jobId)) << v.jobId;
    EXPECT_FALSE(running[v.jobId]->evicting);
    EXPECT_TRUE(whollyBorrowed(s, *running[v.jobId])) << "victim " << v.jobId;
    EXPECT_TRUE(victims.insert(v.jobId).second);
    EXPECT_NE(v.team, "");
  }

  // Capacity: what runs (leaving work included) plus what is admitted fits each model.
  std::map<std::string, int> used, victimGpus;
  for (const auto& a : s.running) used[a.model] += a.gpus;
  for (const auto& v : d.victims) victimGpus[v.model] += v.gpus;
  for (const auto& a : d.admissions) {
    const Request* r = pending.at(a.jobId);
    EXPECT_TRUE(r->model.empty() || r->model == a.model);
    EXPECT_EQ(a.withinGpus + a.borrowedGpus, r->gpus);
    used[a.model] += r->gpus;
  }
  for (const auto& [m, n] : used) {
    int cap = s.capacity.count(m) ? s.capacity.at(m) : 0;
    EXPECT_LE(n, cap + victimGpus[m]) << m;
    EXPECT_LE(n, cap) << m;  // stronger: admissions never run on GPUs still held by victims
  }

  // Quotas: usage after the pass never exceeds guarantee + borrow limit; lending within limits.
  std::map<std::string, int> usage;
  for (const auto& a : s.running) {
    if (!a.evicting && !victims.count(a.jobId)) usage[a.team] += a.gpus;
  }
  for (const auto& a : d.admissions) usage[pending.at(a.jobId)->team] += pending.at(a.jobId)->gpus;
  int lendable = 0, borrowed = 0;
  for (const auto& t : s.teams) {
    int g = 0;
    for (const auto& [m, n] : t.guaranteed) g += n;
    EXPECT_LE(usage[t.name], g + t.borrowLimit) << t.name;
    const TeamLedger& l = ledgerOf(d, t.name);
    EXPECT_EQ(l.guaranteed, g);
    EXPECT_LE(l.borrowedGpus, t.borrowLimit) << t.name;
    EXPECT_LE(l.lendable, t.lendLimit) << t.name;
    EXPECT_LE(l.withinGpus, g) << t.name;
    lendable += l.lendable;
    borrowed += l.borrowedGpus;
  }
  EXPECT_LE(borrowed, d.unownedGpus + lendable);
  for (const auto& l : d.ledger) {
    EXPECT_LE(l.borrowedGpus, d.unownedGpus + lendable - l.lendable)
        << l.team << " lends to itself";
  }
}

TEST(QuotaProperty, InvariantsHoldAfterEveryPassAndDecisionsAreDeterministic) {
  // The random scenes must reach every rule, or the invariants would hold vacuously.
  int borrowedAdmissions = 0, victimCount = 0;
  std::map<WaitReason, int> reasons;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    QuotaSnapshot s = randomCluster(rng);
    s.now = 1'000'000;
    int64_t nextId = 1;
    addRequests(s, rng, nextId, 12);
    for (int pass = 0; pass < 6; ++pass) {
      auto first = decideQuota(s);
      ASSERT_TRUE(first.ok()) << first.status().toString();
      checkInvariants(s, *first);
      if (HasFatalFailure() || HasFailure()) return;
      for (const auto& a : first->admissions) borrowedAdmissions += a.borrowedGpus > 0;
      victimCount += static_cast<int>(first->victims.size());
      for (const auto& w : first->waits) ++reasons[w.reason];

      // Same snapshot in another input order: the same decisions, byte for byte.
      QuotaSnapshot shuffled = s;
      std::shuffle(shuffled.teams.begin(), shuffled.teams.end(), rng);
      std::shuffle(shuffled.running.begin(), shuffled.running.end(), rng);
      std::shuffle(shuffled.pending.begin(), shuffled.pending.end(), rng);
      auto second = decideQuota(shuffled);
      ASSERT_TRUE(second.ok());
      ASSERT_EQ(serialize(*first), serialize(*second));

      // Advance: leaving work is gone, victims start leaving, some work ends, admitted work starts.
      std::set<int64_t> victims, admitted;
      for (const auto& v : first->victims) victims.insert(v.jobId);
      for (const auto& a : first->admissions) admitted.insert(a.jobId);
      std::vector<Allocation> next;
      for (auto a : s.running) {
        if (a.evicting) continue;
        if (!victims.count(a.jobId) && std::uniform_int_distribution<int>(0, 4)(rng) == 0) continue;
        a.evicting = victims.count(a.jobId) > 0;
        next.push_back(a);
      }
      std::vector<Request> stillPending;
      for (const auto& r : s.pending) {
        if (!admitted.count(r.jobId)) {
          stillPending.push_back(r);
          continue;
        }
        for (const auto& a : first->admissions) {
          if (a.jobId == r.jobId) {
            next.push_back(Allocation{r.jobId, r.team, a.model, r.gpus, r.priority, r.priority == 0,
                                      s.now, false});
          }
        }
      }
      s.running = std::move(next);
      s.pending = std::move(stillPending);
      s.now += 60'000;
      addRequests(s, rng, nextId, 4);
    }
  }
  EXPECT_GT(borrowedAdmissions, 50);
  EXPECT_GT(victimCount, 20);
  for (WaitReason r : {WaitReason::kOverQuota, WaitReason::kWaitingForLenders,
                       WaitReason::kWaitingForGrace, WaitReason::kNoFreeGpus}) {
    EXPECT_GT(reasons[r], 5) << waitReasonName(r);
  }
}

}  // namespace
}  // namespace allot::sched::quota
