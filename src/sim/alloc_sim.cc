#include "sim/alloc_sim.h"

#include "sched/placement/policy.h"

namespace allot::sim {
namespace {

namespace pl = sched::placement;

class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t s_;
};

void shuffle(std::vector<int>& v, SplitMix& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// Independent streams for the two draws of a seed, so the node order does not depend on the task
// list and the other way round.
constexpr uint64_t kArrivalStream = 0x61727269766c7321ULL;
constexpr uint64_t kNodeStream = 0x6e6f64656f726472ULL;

// Accumulates the allocation over the decisions whose arrival ratio rounds to `percent`
// (arrived / capacity in [percent - 0.5%, percent + 0.5%)), as the paper's analysis does.
class Window {
 public:
  Window(int percent, int64_t capacity)
      : lo_(percent * 10 - 5), hi_(percent * 10 + 5), cap_(capacity) {}
  void observe(int64_t arrived, double allocPercent) {
    // arrived / cap * 1000 in [lo, hi), in integers.
    if (arrived * 1000 >= lo_ * cap_ && arrived * 1000 < hi_ * cap_) {
      sum_ += allocPercent;
      ++count_;
    } else if (!passed_ && arrived * 1000 >= hi_ * cap_) {
      fallback_ = allocPercent;  // first decision past the window, used when none falls inside
      passed_ = true;
    }
    last_ = allocPercent;
  }
  double value() const { return count_ > 0 ? sum_ / count_ : (passed_ ? fallback_ : last_); }

 private:
  int64_t lo_, hi_, cap_;
  double sum_ = 0, fallback_ = 0, last_ = 0;
  int64_t count_ = 0;
  bool passed_ = false;
};

}  // namespace

std::vector<int> arrivalSequence(const std::vector<pl::Task>& tasks, int64_t capacityMilli,
                                 uint64_t seed) {
  SplitMix rng(seed ^ kArrivalStream);
  std::vector<int> seq(tasks.size());
  for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<int>(i);
  shuffle(seq, rng);
  if (tasks.empty()) return seq;
  // Target: 130% of capacity, in integers (request * 10 <= capacity * 13).
  int64_t requested = 0;
  for (int i : seq) requested += tasks[i].gpuRequest();
  while (requested * 10 > capacityMilli * 13 && !seq.empty()) {
    size_t at = rng.below(seq.size());
    requested -= tasks[seq[at]].gpuRequest();
    seq.erase(seq.begin() + static_cast<std::ptrdiff_t>(at));
  }
  while (true) {
    int i = static_cast<int>(rng.below(tasks.size()));
    if ((requested + tasks[i].gpuRequest()) * 10 > capacityMilli * 13) break;
    requested += tasks[i].gpuRequest();
    seq.push_back(i);
  }
  return seq;
}

std::vector<int> nodeOrder(size_t n, uint64_t seed) {
  SplitMix rng(seed ^ kNodeStream);
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  shuffle(order, rng);
  return order;
}

Result<AllocResult> runAlloc(const std::vector<pl::NodeSpec>& nodes,
                             const std::vector<pl::Task>& tasks, const std::string& policyName,
                             const std::vector<uint64_t>& seeds) {
  AllocResult out;
  out.policy = policyName;
  int64_t requested = 0;
  for (const auto& t : tasks) requested += t.gpuRequest();
  if (requested == 0) return Status::InvalidArgument("no task asks for a GPU");
  for (uint64_t seed : seeds) {
    std::vector<pl::NodeSpec> listed;
    listed.reserve(nodes.size());
    for (int i : nodeOrder(nodes.size(), seed)) listed.push_back(nodes[i]);
    auto state = pl::ClusterState::create(listed);
    if (!state.ok()) return state.status();
    if (state->totalGpuMilli() == 0) return Status::InvalidArgument("the cluster has no GPUs");
    auto policy = pl::makePolicy(policyName, seed, tasks);
    if (!policy.ok()) return policy.status();
    const int64_t total = state->totalGpuMilli();
    SeedResult r;
    r.seed = seed;
    Window at100(100, total), at130(130, total);
    int64_t arrived = 0;
    for (int i : arrivalSequence(tasks, total, seed)) {
      const pl::Task& t = tasks[i];
      pl::Choice c = (**policy).choose(*state, t);
      ++r.decisions;
      if (c.ok()) {
        state->apply(t, c);
        ++r.placements;
      }
      arrived += t.gpuRequest();
      double alloc = 100.0 * double(state->allocatedGpuMilli()) / double(total);
      at100.observe(arrived, alloc);
      at130.observe(arrived, alloc);
    }
    r.alloc100 = at100.value();
    r.alloc130 = at130.value();
    out.alloc100 += r.alloc100 / seeds.size();
    out.alloc130 += r.alloc130 / seeds.size();
    out.placements += r.placements;
    out.decisions += r.decisions;
    out.perSeed.push_back(r);
  }
  return out;
}

}  // namespace allot::sim
