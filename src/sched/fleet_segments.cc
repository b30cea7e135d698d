#include "sched/fleet_segments.h"

#include <algorithm>
#include <bit>
#include <string>
#include <tuple>

namespace allot::sched::fleet {
namespace {

namespace pl = placement;

std::string encode(const Kind& k) {
  // The placement model only compares kind names; the separator cannot occur in names people type.
  return k.model + '\x1f' + k.owner + '\x1f' + (k.shared ? "s" : "x") + '\x1f' + k.driver + '\x1f' +
         k.cuda + '\x1f' + std::to_string(k.heldFrom) + '\x1f' + std::to_string(k.heldLease) +
         '\x1f' + k.contour + (k.images ? "\x1fi" : "");
}

}  // namespace

bool operator<(const Kind& a, const Kind& b) {
  return std::tie(a.model, a.owner, a.shared, a.driver, a.cuda, a.heldFrom, a.heldLease, a.contour,
                  a.images) < std::tie(b.model, b.owner, b.shared, b.driver, b.cuda, b.heldFrom,
                                       b.heldLease, b.contour, b.images);
}

Result<Fleet> Fleet::build(const Snapshot& snap) {
  Fleet f;
  f.hosts_ = &snap.hosts;
  f.byHost_.resize(snap.hosts.size());
  std::map<Kind, int> kindIds;
  std::vector<pl::NodeSpec> specs;
  auto kindId = [&](const Kind& k) {
    auto [it, added] = kindIds.emplace(k, static_cast<int>(f.kinds_.size()));
    if (added) f.kinds_.push_back(k);
    return it->second;
  };
  for (size_t h = 0; h < snap.hosts.size(); ++h) {
    const HostView& host = snap.hosts[h];
    if (!host.schedulable) continue;
    f.hostByName_[host.name] = static_cast<int>(h);
    // Group GPUs by kind, keeping index order inside a group.
    std::map<Kind, std::vector<const GpuView*>> groups;
    for (const auto& g : host.gpus) {
      Kind k{g.model, host.dedicatedTo.empty() ? g.dedicatedTo : host.dedicatedTo, g.shared,
             host.driverVersion, host.cudaVersion};
      k.heldFrom = host.heldFrom;
      k.heldLease = host.heldLease;
      k.contour = host.contour;
      k.images = host.images;
      groups[k].push_back(&g);
    }
    if (groups.empty())
      groups[Kind{"", host.dedicatedTo, false, "", "", host.heldFrom, host.heldLease, host.contour,
                  host.images}];
    const int totalGpus = std::max<int>(1, static_cast<int>(host.gpus.size()));
    int64_t cpuLeft = host.cpuMillis, memLeft = host.memoryMib;
    size_t n = 0;
    // A group larger than a placement node can address becomes several segments of at most
    // kMaxGpusPerNode GPUs (a request never spans two).
    std::vector<std::pair<Kind, std::vector<const GpuView*>>> parts;
    for (auto& [kind, gpus] : groups) {
      std::sort(gpus.begin(), gpus.end(),
                [](const GpuView* a, const GpuView* b) { return a->index < b->index; });
      if (gpus.empty()) parts.emplace_back(kind, gpus);
      for (size_t at = 0; at < gpus.size(); at += pl::kMaxGpusPerNode) {
        size_t end = std::min(gpus.size(), at + pl::kMaxGpusPerNode);
        parts.emplace_back(kind,
                           std::vector<const GpuView*>(gpus.begin() + at, gpus.begin() + end));
      }
    }
    for (const auto& [kind, gpus] : parts) {
      ++n;
      Segment seg;
      seg.host = static_cast<int>(h);
      seg.kind = kindId(kind);
      seg.gpus = gpus;
      seg.gpuMemoryMib = gpus.empty() ? 0 : gpus.front()->memoryMib;
      for (const GpuView* g : gpus) {
        seg.gpuIndex.push_back(g->index);
        seg.gpuMemoryMib = std::min(seg.gpuMemoryMib, g->memoryMib);
      }
      // CPU and memory in proportion to GPUs; the last part takes the rounding remainder.
      const bool last = n == parts.size();
      int64_t cpu = last ? cpuLeft : host.cpuMillis * int64_t(gpus.size()) / totalGpus;
      int64_t mem = last ? memLeft : host.memoryMib * int64_t(gpus.size()) / totalGpus;
      cpuLeft -= cpu;
      memLeft -= mem;
      f.byHost_[h].push_back(static_cast<int>(f.segments_.size()));
      specs.push_back({host.name, cpu, mem, static_cast<int>(gpus.size()), encode(kind)});
      f.segments_.push_back(std::move(seg));
    }
  }
  auto state = pl::ClusterState::create(specs);
  if (!state.ok()) return state.status();
  f.state_ = std::move(*state);
  for (const auto& k : f.kinds_) f.kindModel_.push_back(f.state_.modelId(encode(k)));
  return f;
}

int Fleet::hostIndex(const std::string& name) const {
  auto it = hostByName_.find(name);
  return it == hostByName_.end() ? -1 : it->second;
}

std::pair<int, int> Fleet::locate(int host, int gpuIndex) const {
  for (int node : byHost_[host]) {
    const auto& idx = segments_[node].gpuIndex;
    auto it = std::find(idx.begin(), idx.end(), gpuIndex);
    if (it != idx.end()) return {node, static_cast<int>(it - idx.begin())};
  }
  return {-1, -1};
}

std::vector<int> Fleet::applyRunning(const Slice& slice) {
  std::vector<int> touched;
  int host = hostIndex(slice.host);
  if (host < 0) return touched;
  // GPUs per segment.
  std::map<int, uint32_t> perNode;
  for (int g : slice.gpus) {
    auto [node, local] = locate(host, g);
    if (node >= 0) perNode[node] |= uint32_t{1} << local;
  }
  // CPU and memory go first to the segments that hold its GPUs, then spill over to the host's
  // other segments as far as they have room: a host's CPU and memory are one pool in reality,
  // split between segments only for placement, so the total is what must be right.
  int64_t cpuLeft = std::max<int64_t>(0, slice.cpuMillis);
  int64_t memLeft = std::max<int64_t>(0, slice.memoryMib);
  for (int node : byHost_[host]) perNode.emplace(node, 0);  // GPU-less segments last
  std::vector<std::pair<int, uint32_t>> order;
  for (auto [node, mask] : perNode) {
    if (mask != 0) order.emplace_back(node, mask);
  }
  for (auto [node, mask] : perNode) {
    if (mask == 0) order.emplace_back(node, mask);
  }
  for (auto [node, mask] : order) {
    pl::Task t;
    t.cpuMilli = std::min(cpuLeft, std::max<int64_t>(0, state_.cpuFree(node)));
    t.memoryMib = std::min(memLeft, std::max<int64_t>(0, state_.memFree(node)));
    const bool fraction = slice.gpuMilli > 0 && slice.gpuMilli < kMilliPerGpu;
    uint32_t fitting = 0;
    for (int local = 0; local < state_.numGpus(node); ++local) {
      if (!((mask >> local) & 1)) continue;
      int free = state_.gpuFree(node, local);
      if (fraction ? free >= slice.gpuMilli : free == pl::kGpuMilli)
        fitting |= uint32_t{1} << local;
    }
    if (fraction && fitting != 0) fitting = fitting & (~fitting + 1);  // one GPU
    t.numGpu = std::popcount(fitting);
    t.gpuMilli = fraction ? slice.gpuMilli : pl::kGpuMilli;
    t.allowedModels = pl::kAnyModel;
    if (t.numGpu == 0 && t.cpuMilli == 0 && t.memoryMib == 0) continue;
    state_.apply(t, {node, fitting});
    cpuLeft -= t.cpuMilli;
    memLeft -= t.memoryMib;
    touched.push_back(node);
  }
  return touched;
}

Slice Fleet::toSlice(int node, uint32_t gpus, const pl::Task& task) const {
  Slice s;
  const Segment& seg = segments_[node];
  s.host = (*hosts_)[seg.host].name;
  for (int local = 0; local < static_cast<int>(seg.gpuIndex.size()); ++local) {
    if ((gpus >> local) & 1) s.gpus.push_back(seg.gpuIndex[local]);
  }
  s.gpuMilli = task.shared() ? task.gpuMilli : kMilliPerGpu;
  s.cpuMillis = task.cpuMilli;
  s.memoryMib = task.memoryMib;
  return s;
}

}  // namespace allot::sched::fleet
