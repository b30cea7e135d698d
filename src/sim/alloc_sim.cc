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

 private:
  uint64_t s_;
};

void shuffle(std::vector<int>& v, SplitMix& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.next() % i]);
}

}  // namespace

Result<AllocResult> runAlloc(const std::vector<pl::NodeSpec>& nodes,
                             const std::vector<pl::Task>& tasks, const std::string& policyName,
                             const std::vector<uint64_t>& seeds) {
  AllocResult out;
  out.policy = policyName;
  int64_t requested = 0;
  for (const auto& t : tasks) requested += t.gpuRequest();
  if (requested == 0) return Status::InvalidArgument("no task asks for a GPU");
  for (uint64_t seed : seeds) {
    auto state = pl::ClusterState::create(nodes);
    if (!state.ok()) return state.status();
    if (state->totalGpuMilli() == 0) return Status::InvalidArgument("the cluster has no GPUs");
    auto policy = pl::makePolicy(policyName, seed, tasks);
    if (!policy.ok()) return policy.status();
    SplitMix rng(seed);
    std::vector<int> order(tasks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    const int64_t total = state->totalGpuMilli();
    SeedResult r;
    r.seed = seed;
    int64_t arrived = 0;
    bool reached100 = false;
    while (arrived * 10 < total * 13) {
      shuffle(order, rng);
      for (int i : order) {
        const pl::Task& t = tasks[i];
        pl::Choice c = (**policy).choose(*state, t);
        ++r.decisions;
        if (c.ok()) {
          state->apply(t, c);
          ++r.placements;
        }
        arrived += t.gpuRequest();
        if (!reached100 && arrived >= total) {
          reached100 = true;
          r.alloc100 = 100.0 * state->allocatedGpuMilli() / total;
        }
        if (arrived * 10 >= total * 13) break;
      }
    }
    r.alloc130 = 100.0 * state->allocatedGpuMilli() / total;
    out.alloc100 += r.alloc100 / seeds.size();
    out.alloc130 += r.alloc130 / seeds.size();
    out.placements += r.placements;
    out.decisions += r.decisions;
    out.perSeed.push_back(r);
  }
  return out;
}

}  // namespace allot::sim
