#include "sim/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "sched/quota/quota.h"

namespace allot::sim {
namespace {

constexpr TimeMs kMsPerS = 1000;
// Passes at one instant before the loop moves on: each repeat follows evictions (grace 0), and a
// victim's team only borrows, so it never evicts in turn; this bounds a bug, not a workload.
constexpr int kMaxPassesPerInstant = 64;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string teamName(int i) { return "team" + std::to_string(i); }

DelayStats delayStats(std::vector<double> delays) {
  DelayStats d;
  d.count = static_cast<int64_t>(delays.size());
  if (delays.empty()) return d;
  std::sort(delays.begin(), delays.end());
  double sum = 0;
  for (double v : delays) sum += v;
  d.meanS = sum / static_cast<double>(delays.size());
  auto rank = [&](double p) {
    size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(delays.size())));
    return delays[std::clamp<size_t>(k, 1, delays.size()) - 1];
  };
  d.p50S = rank(0.50);
  d.p99S = rank(0.99);
  d.maxS = delays.back();
  return d;
}

enum class State { kFuture, kPending, kRunning, kDone, kKilled, kNever };

struct TaskState {
  State state = State::kFuture;
  TimeMs firstPlacedMs = -1;
  int64_t heldMilli = 0;  // while running
  int gen = 0;            // bumped whenever a run ends, so stale events are ignored
};

enum class EventKind { kComplete = 0, kGraceEnd = 1 };
using Event = std::tuple<TimeMs, int, int, int>;  // time, kind, task, gen

class Replay {
 public:
  Replay(const std::vector<sched::HostView>& hosts, const ReplayTrace& trace,
         const ReplayOptions& o)
      : trace_(trace), o_(o), tasks_(trace.tasks.size()) {
    snap_.hosts = hosts;
    snap_.policy.placement = o.policy;
    snap_.policy.seed = o.seed;
    for (const auto& h : hosts)
      totalMilli_ += int64_t{sched::kMilliPerGpu} * int64_t(h.gpus.size());
    const int guarantee = static_cast<int>(
        std::floor(double(totalMilli_ / sched::kMilliPerGpu) * o.guaranteeShare / o.teams));
    for (int i = 0; i < o.teams; ++i) {
      sched::TeamView t;
      t.name = teamName(i);
      t.guaranteed[""] = guarantee;
      snap_.teams.push_back(std::move(t));
    }
    teamHeld_.assign(o.teams, 0);
    teamUsage_.assign(o.teams, 0);
    teamReceived_.assign(o.teams, 0);
    arrivals_.resize(trace.tasks.size());
    for (size_t i = 0; i < arrivals_.size(); ++i) arrivals_[i] = static_cast<int>(i);
    std::stable_sort(arrivals_.begin(), arrivals_.end(), [&](int a, int b) {
      return trace.tasks[a].arrivalMs < trace.tasks[b].arrivalMs;
    });
  }

  Result<ReplayResult> run();

 private:
  void advance(TimeMs to);
  void addPending(int task);
  void removePending(int task);
  void removeRunning(int task);
  void leave(int task, bool requeue);
  Status pass();

  const ReplayTrace& trace_;
  const ReplayOptions& o_;
  std::vector<TaskState> tasks_;
  std::vector<int> arrivals_;  // task indices by arrival
  size_t nextArrival_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  sched::Snapshot snap_;
  std::unordered_map<int64_t, size_t> pendingAt_, runningAt_;  // job id -> index in snap_
  TimeMs now_ = 0;
  int64_t totalMilli_ = 0;
  int64_t heldMilli_ = 0;
  std::vector<int64_t> teamHeld_;
  std::vector<double> teamUsage_;     // decayed milli-GPU-seconds
  std::vector<double> teamReceived_;  // milli-GPU-ms within [0, trace end]
  double allocIntegral_ = 0;          // milli-GPU-ms
  TimeMs nextSample_ = 0;
  bool changed_ = false;
  ReplayResult out_;
};

int taskOf(int64_t jobId) { return static_cast<int>(jobId - 1); }

void Replay::advance(TimeMs to) {
  const TimeMs dt = to - now_;
  if (dt <= 0) return;
  const TimeMs end = trace_.endMs;
  const double inWindow = double(std::max<TimeMs>(0, std::min(to, end) - std::min(now_, end)));
  for (int i = 0; i < o_.teams; ++i) {
    teamUsage_[i] = sched::quota::advanceUsage(teamUsage_[i], static_cast<int>(teamHeld_[i]), dt,
                                               o_.usageHalfLifeMs);
    teamReceived_[i] += double(teamHeld_[i]) * inWindow;
  }
  allocIntegral_ += double(heldMilli_) * double(dt);
  const double percent = totalMilli_ > 0 ? 100.0 * double(heldMilli_) / double(totalMilli_) : 0;
  while (nextSample_ < to) {
    out_.utilisation.push_back(percent);
    nextSample_ += o_.sampleMs;
  }
  now_ = to;
}

void Replay::addPending(int task) {
  sched::Request r = trace_.tasks[task].request;
  pendingAt_[r.id] = snap_.pending.size();
  snap_.pending.push_back(std::move(r));
  tasks_[task].state = State::kPending;
  out_.maxPending = std::max<int64_t>(out_.maxPending, int64_t(snap_.pending.size()));
  changed_ = true;
}

// Swap with the last and pop: the queue's order is the scheduler's (priority, submission, id),
// not the vector's, so this changes no decision.
template <typename T>
void swapRemove(std::vector<T>& v, std::unordered_map<int64_t, size_t>& at, int64_t id) {
  auto it = at.find(id);
  const size_t i = it->second;
  at.erase(it);
  if (i + 1 != v.size()) {
    v[i] = std::move(v.back());
    at[v[i].id] = i;
  }
  v.pop_back();
}

void Replay::removePending(int task) {
  swapRemove(snap_.pending, pendingAt_, trace_.tasks[task].request.id);
}

void Replay::removeRunning(int task) {
  swapRemove(snap_.running, runningAt_, trace_.tasks[task].request.id);
  TaskState& s = tasks_[task];
  heldMilli_ -= s.heldMilli;
  teamHeld_[trace_.tasks[task].team] -= s.heldMilli;
  s.heldMilli = 0;
  ++s.gen;
  changed_ = true;
}

void Replay::leave(int task, bool requeue) {
  removeRunning(task);
  TeamReplay& team = out_.teams[trace_.tasks[task].team];
  if (requeue) {
    ++team.requeued;
    addPending(task);
  } else {
    ++team.killed;
    tasks_[task].state = State::kKilled;
  }
}

Status Replay::pass() {
  snap_.now = now_;
  for (int i = 0; i < o_.teams; ++i) snap_.teams[i].usageGpuSeconds = teamUsage_[i] / 1000.0;
  auto d = sched::decide(snap_);
  ++out_.passes;
  if (!d.ok()) {
    return Status::Internal("pass at " + std::to_string(now_ / kMsPerS) +
                            " s: " + d.status().message());
  }
  for (auto& p : d->placements) {
    const int task = taskOf(p.jobId);
    const ReplayTask& t = trace_.tasks[task];
    TaskState& s = tasks_[task];
    removePending(task);
    sched::RunningJob j;
    j.id = p.jobId;
    j.team = t.request.team;
    j.preemptible = t.request.preemptible;
    j.startedAt = now_;
    j.endsBy = o_.declareRuntimes ? now_ + t.runtimeMs : 0;
    int64_t held = 0;
    for (const auto& sl : p.slices) held += int64_t(sl.gpus.size()) * sl.gpuMilli;
    j.slices = std::move(p.slices);
    runningAt_[j.id] = snap_.running.size();
    snap_.running.push_back(std::move(j));
    s.state = State::kRunning;
    s.heldMilli = held;
    heldMilli_ += held;
    teamHeld_[t.team] += held;
    if (s.firstPlacedMs < 0) s.firstPlacedMs = now_;
    ++out_.placements;
    events_.emplace(now_ + t.runtimeMs, int(EventKind::kComplete), task, s.gen);
  }
  for (const auto& e : d->evictions) {
    const int task = taskOf(e.jobId);
    if (o_.graceMs <= 0) {
      leave(task, e.requeue);
      continue;
    }
    snap_.running[runningAt_.at(e.jobId)].evicting = true;
    events_.emplace(now_ + o_.graceMs, int(EventKind::kGraceEnd), task, tasks_[task].gen);
  }
  for (const auto& w : d->waits) {
    // A replay's fleet never changes: these waits never end.
    if (w.kind != sched::WaitKind::kNoSuchModel && w.kind != sched::WaitKind::kTooBig &&
        w.kind != sched::WaitKind::kNoHosts && w.kind != sched::WaitKind::kDriverTooOld &&
        w.kind != sched::WaitKind::kCudaTooOld)
      continue;
    const int task = taskOf(w.jobId);
    removePending(task);
    tasks_[task].state = State::kNever;
    ++out_.impossible;
  }
  return Status::Ok();
}

Result<ReplayResult> Replay::run() {
  out_.policy = o_.policy;
  out_.sampleMs = o_.sampleMs;
  for (int i = 0; i < o_.teams; ++i) out_.teams.push_back({teamName(i)});
  while (true) {
    TimeMs next = std::numeric_limits<TimeMs>::max();
    if (nextArrival_ < arrivals_.size()) next = trace_.tasks[arrivals_[nextArrival_]].arrivalMs;
    if (!events_.empty()) next = std::min(next, std::get<0>(events_.top()));
    if (next == std::numeric_limits<TimeMs>::max()) break;
    advance(next);
    changed_ = false;
    while (!events_.empty() && std::get<0>(events_.top()) == now_) {
      auto [at, kind, task, gen] = events_.top();
      events_.pop();
      TaskState& s = tasks_[task];
      if (s.state != State::kRunning || s.gen != gen) continue;  // stale
      if (kind == int(EventKind::kComplete)) {
        removeRunning(task);
        s.state = State::kDone;
        ++out_.teams[trace_.tasks[task].team].completed;
      } else {
        leave(task, trace_.tasks[task].request.preemptible);  // the end of its grace
      }
    }
    while (nextArrival_ < arrivals_.size() &&
           trace_.tasks[arrivals_[nextArrival_]].arrivalMs == now_) {
      addPending(arrivals_[nextArrival_++]);
    }
    for (int k = 0; changed_ && !snap_.pending.empty() && k < kMaxPassesPerInstant; ++k) {
      changed_ = false;
      ALLOT_RETURN_IF_ERROR(pass());
    }
  }
  out_.endMs = now_;
  while (nextSample_ <= now_) {
    out_.utilisation.push_back(totalMilli_ > 0 ? 100.0 * double(heldMilli_) / double(totalMilli_)
                                               : 0);
    nextSample_ += o_.sampleMs;
  }
  out_.meanUtilisation = now_ > 0 && totalMilli_ > 0
                             ? 100.0 * allocIntegral_ / (double(totalMilli_) * double(now_))
                             : 0;

  // Per team and overall.
  std::vector<std::vector<double>> delays(o_.teams);
  std::vector<double> all;
  std::vector<double> demanded(o_.teams, 0);
  for (size_t i = 0; i < trace_.tasks.size(); ++i) {
    const ReplayTask& t = trace_.tasks[i];
    const TaskState& s = tasks_[i];
    TeamReplay& team = out_.teams[t.team];
    ++team.tasks;
    if (s.firstPlacedMs >= 0) {
      ++team.placed;
      double d = double(s.firstPlacedMs - t.arrivalMs) / double(kMsPerS);
      delays[t.team].push_back(d);
      all.push_back(d);
    }
    if (s.state == State::kPending || s.state == State::kNever) ++team.neverPlaced;
    const int64_t milli = int64_t(t.request.gpus) * t.request.gpuMilli;
    const TimeMs span =
        std::max<TimeMs>(0, std::min(t.arrivalMs + t.runtimeMs, trace_.endMs) - t.arrivalMs);
    demanded[t.team] += double(milli) * double(span);
  }
  std::vector<double> ratios;
  TeamReplay& o = out_.overall;
  o.team = "all";
  for (int i = 0; i < o_.teams; ++i) {
    TeamReplay& team = out_.teams[i];
    team.delay = delayStats(std::move(delays[i]));
    // milli-GPU-ms to GPU-seconds
    team.gpuSecondsReceived = teamReceived_[i] / 1e6;
    team.gpuSecondsDemanded = demanded[i] / 1e6;
    team.serviceRatio = demanded[i] > 0 ? teamReceived_[i] / demanded[i] : 0;
    if (demanded[i] > 0) ratios.push_back(team.serviceRatio);
    o.tasks += team.tasks;
    o.placed += team.placed;
    o.completed += team.completed;
    o.requeued += team.requeued;
    o.killed += team.killed;
    o.neverPlaced += team.neverPlaced;
    o.gpuSecondsReceived += team.gpuSecondsReceived;
    o.gpuSecondsDemanded += team.gpuSecondsDemanded;
  }
  o.delay = delayStats(std::move(all));
  o.serviceRatio = o.gpuSecondsDemanded > 0 ? o.gpuSecondsReceived / o.gpuSecondsDemanded : 0;
  out_.jain = jainIndex(ratios);
  return std::move(out_);
}

}  // namespace

double jainIndex(const std::vector<double>& x) {
  double sum = 0, squares = 0;
  for (double v : x) {
    sum += v;
    squares += v * v;
  }
  if (x.empty() || squares <= 0) return 1.0;
  return sum * sum / (double(x.size()) * squares);
}

Result<ReplayTrace> buildReplayTrace(const std::vector<TraceTask>& pods,
                                     const std::vector<TraceTask>* times, int teams) {
  if (teams < 1) return Status::InvalidArgument("--teams must be at least 1", "teams");
  std::unordered_map<std::string, size_t> byName;
  if (times) {
    for (size_t i = 0; i < times->size(); ++i) byName.emplace((*times)[i].name, i);
  }
  ReplayTrace out;
  std::vector<TraceTask> rows = pods;
  for (TraceTask& row : rows) {
    if (row.creationTime >= 0) continue;
    if (!times || times->empty()) {
      return Status::InvalidArgument("task '" + row.name +
                                         "' has no creation_time (give --times POD_LIST to take "
                                         "times from another list by name)",
                                     "times");
    }
    auto it = byName.find(row.name);
    size_t k = 0;
    if (it != byName.end()) {
      k = it->second;
    } else {
      k = fnv1a(row.name) % times->size();
      ++out.timesHashed;
    }
    const TraceTask& src = (*times)[k];
    if (src.creationTime < 0) {
      return Status::InvalidArgument("--times row '" + src.name + "' has no creation_time",
                                     "times");
    }
    row.creationTime = src.creationTime;
    row.deletionTime = src.deletionTime;
    row.scheduledTime = src.scheduledTime;
    row.qos = src.qos;
    ++out.timesBorrowed;
  }
  TimeMs endS = 0;
  for (const TraceTask& row : rows) {
    endS = std::max({endS, row.creationTime, row.deletionTime, row.scheduledTime});
  }
  out.endMs = endS * kMsPerS;
  for (size_t i = 0; i < rows.size(); ++i) {
    const TraceTask& row = rows[i];
    ReplayTask t;
    t.name = row.name;
    t.team = static_cast<int>(i % static_cast<size_t>(teams));
    int64_t runtimeS = 0;
    if (row.scheduledTime >= 0 && row.deletionTime > row.scheduledTime) {
      runtimeS = row.deletionTime - row.scheduledTime;
    } else if (row.scheduledTime < 0 && row.deletionTime > row.creationTime) {
      runtimeS = row.deletionTime - row.creationTime;  // never placed for real: its lifetime
    } else {
      runtimeS = endS - row.creationTime;  // no usable deletion time: to the end of the trace
    }
    t.arrivalMs = row.creationTime * kMsPerS;
    t.runtimeMs = std::max<int64_t>(1, runtimeS) * kMsPerS;
    sched::Request& r = t.request;
    r.id = static_cast<int64_t>(i) + 1;
    r.team = teamName(t.team);
    r.preemptible = row.qos == "BE";
    r.submittedAt = t.arrivalMs;
    r.gpus = row.task.numGpu;
    r.gpuMilli =
        row.task.numGpu == 1 && row.task.gpuMilli > 0 ? row.task.gpuMilli : sched::kMilliPerGpu;
    r.models = row.gpuSpec;
    r.cpuMillis = row.task.cpuMilli;
    r.memoryMib = row.task.memoryMib;
    out.tasks.push_back(std::move(t));
  }
  return out;
}

std::vector<sched::placement::NodeSpec> nodeFraction(
    const std::vector<sched::placement::NodeSpec>& nodes, double fraction) {
  std::map<std::string, int64_t> seen;
  std::vector<bool> keep(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t j = seen[nodes[i].model]++;
    keep[i] = std::floor(double(j + 1) * fraction) > std::floor(double(j) * fraction);
  }
  std::map<std::string, bool> kept;
  for (size_t i = 0; i < nodes.size(); ++i) kept[nodes[i].model] = kept[nodes[i].model] || keep[i];
  std::vector<sched::placement::NodeSpec> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!keep[i] && !kept[nodes[i].model]) {
      keep[i] = true;
      kept[nodes[i].model] = true;
    }
    if (keep[i]) out.push_back(nodes[i]);
  }
  return out;
}

std::vector<sched::HostView> replayHosts(const std::vector<sched::placement::NodeSpec>& nodes) {
  static const std::map<std::string, int64_t> kGpuMemoryMib = {
      {"A10", 24576}, {"P100", 16384}, {"T4", 16384}, {"V100M16", 16384}, {"V100M32", 32768}};
  std::vector<sched::HostView> hosts;
  hosts.reserve(nodes.size());
  for (const auto& n : nodes) {
    sched::HostView h;
    h.name = n.name;
    h.cpuMillis = n.cpuMilli;
    h.memoryMib = n.memoryMib;
    auto mem = kGpuMemoryMib.find(n.model);
    for (int g = 0; g < n.gpus; ++g) {
      sched::GpuView v;
      v.index = g;
      v.model = n.model;
      v.memoryMib = mem == kGpuMemoryMib.end() ? 0 : mem->second;
      v.shared = true;
      h.gpus.push_back(std::move(v));
    }
    hosts.push_back(std::move(h));
  }
  return hosts;
}

Result<ReplayResult> runReplay(const std::vector<sched::HostView>& hosts, const ReplayTrace& trace,
                               const ReplayOptions& options) {
  if (options.teams < 1) return Status::InvalidArgument("--teams must be at least 1", "teams");
  if (!(options.guaranteeShare >= 0 && options.guaranteeShare <= 1))
    return Status::InvalidArgument("--guarantee-share must be within 0..1", "guarantee-share");
  if (options.graceMs < 0) return Status::InvalidArgument("--grace-s must be >= 0", "grace-s");
  if (options.sampleMs <= 0) return Status::InvalidArgument("--sample-s must be > 0", "sample-s");
  if (options.policy != "fgd" && options.policy != "bestfit" && options.policy != "firstfit" &&
      options.policy != "random")
    return Status::InvalidArgument(
        "unknown policy '" + options.policy + "' (want fgd, bestfit, firstfit, random)", "policy");
  for (const auto& t : trace.tasks) {
    if (t.team >= options.teams)
      return Status::InvalidArgument("task '" + t.name + "' is in team " + std::to_string(t.team) +
                                         " of " + std::to_string(options.teams),
                                     "teams");
  }
  return Replay(hosts, trace, options).run();
}

}  // namespace allot::sim
