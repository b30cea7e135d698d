#pragma once
// Builders and look-ups shared by the fleet scheduler's tests (fleet_test.cc, fleet_contour_test.cc):
// a host of identical GPUs, a request, running work, a team, and one pass with its decisions
// searched by job id. Test-only; nothing outside the tests includes it.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sched/fleet.h"

namespace allot::sched::fleettest {

inline HostView host(const std::string& name, int gpus, const std::string& model = "A100") {
  HostView h;
  h.name = name;
  h.cpuMillis = 64'000;
  h.memoryMib = 512 * 1024;
  h.driverVersion = "535.104.05";
  h.cudaVersion = "12.2";
  for (int i = 0; i < gpus; ++i) h.gpus.push_back({i, model, 81'920});
  return h;
}

// Submitted at `at`, or at its id when 0, so that ids give the order in line.
inline Request req(int64_t id, const std::string& team, int gpus, TimeMs at = 0) {
  Request r;
  r.id = id;
  r.team = team;
  r.gpus = gpus;
  r.submittedAt = at == 0 ? id : at;
  return r;
}

inline RunningJob running(int64_t id, const std::string& team, const std::string& h,
                          std::vector<int> gpus, TimeMs started = 1) {
  RunningJob j;
  j.id = id;
  j.team = team;
  j.startedAt = started;
  j.slices.push_back({h, std::move(gpus)});
  return j;
}

inline TeamView team(const std::string& name, int guaranteed = 0, int borrowLimit = -1) {
  TeamView t;
  t.name = name;
  if (guaranteed > 0) t.guaranteed[""] = guaranteed;
  t.borrowLimit = borrowLimit;
  return t;
}

// One pass; a refused snapshot fails the test and decides nothing.
inline Decisions run(const Snapshot& s) {
  auto d = decide(s);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : Decisions{};
}

inline const Placement* placementOf(const Decisions& d, int64_t id) {
  for (const auto& p : d.placements) {
    if (p.jobId == id) return &p;
  }
  return nullptr;
}

inline const Wait* waitOf(const Decisions& d, int64_t id) {
  for (const auto& w : d.waits) {
    if (w.jobId == id) return &w;
  }
  return nullptr;
}

// Why job `id` waits; none when it does not.
inline std::optional<WaitKind> waitKindOf(const Decisions& d, int64_t id) {
  const Wait* w = waitOf(d, id);
  return w ? std::optional(w->kind) : std::nullopt;
}

}  // namespace allot::sched::fleettest
