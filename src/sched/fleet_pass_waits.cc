// Why a request waits: what the fleet lacks for it, versions, lease holds, contours, and the
// numbers of a request that could place but did not (fleet_pass.h).

#include "sched/fleet_pass.h"

namespace allot::sched::fleet_pass {

// Hosts an admin took out of service are not in the fleet the pass places on, so a request only
// they could run would read as "no host has such GPUs". It waits for them, and says which.
void Pass::outOfServiceWait(const Request& r, Wait& w) const {
  constexpr size_t kNamed = 3;
  for (const HostView& h : s_.hosts) {
    if (!h.drained || (!h.dedicatedTo.empty() && h.dedicatedTo != r.team)) continue;
    if (!r.contour.empty() && !h.contour.empty() && h.contour != r.contour) continue;
    int usable = 0;
    for (const GpuView& g : h.gpus) {
      const bool mine = h.dedicatedTo == r.team || g.dedicatedTo.empty() || g.dedicatedTo == r.team;
      const bool model = r.models.empty() ||
                         std::find(r.models.begin(), r.models.end(), g.model) != r.models.end();
      if (mine && model) ++usable;
    }
    if (!r.wholeHost && (usable == 0 || usable < r.gpus)) continue;
    if (r.wholeHost && h.gpus.empty()) continue;
    if (w.outOfService.size() < kNamed)
      w.outOfService.push_back(
          {h.name, h.outOfService.empty() ? "out of service" : h.outOfService, h.drainDeadline});
    else
      ++w.outOfServiceMore;
  }
  if (!w.outOfService.empty()) w.kind = WaitKind::kHostsDrained;
}

std::optional<Wait> Pass::impossible(const Request& r) {
  auto w = impossibleIn(r, visibleMask(r));
  if (w && r.images) {
    // It would fit on hosts that do not run images: say that, not that the GPUs are missing.
    Request plain = r;
    plain.images = false;
    if (!impossibleIn(plain, visibleMask(plain))) {
      w->kind = WaitKind::kNoImageHosts;
      return w;
    }
  }
  if (w &&
      (w->kind == WaitKind::kNoSuchModel || w->kind == WaitKind::kTooBig ||
       w->kind == WaitKind::kHostsDrained) &&
      r.minDriver.empty() && r.minCuda.empty())
    outOfServiceWait(r, *w);
  if (!w || st_.size() == 0 || w->kind == WaitKind::kHostsDrained) return w;
  switch (w->kind) {
    case WaitKind::kNoSuchModel:
    case WaitKind::kTooBig:
    case WaitKind::kDriverTooOld:
    case WaitKind::kCudaTooOld:
      break;
    default:
      return w;
  }
  // Its contour is all that stands in the way when hosts of other contours could take it.
  if (impossibleIn(r, visibleMask(r, /*ignoreContour=*/true))) return w;
  Wait c{r.id, WaitKind::kNoHostInContour};
  c.contour = r.contour;
  c.contourNever = true;
  c.largest = w->largest;
  return c;
}

std::optional<Wait> Pass::impossibleIn(const Request& r, const pl::ModelSet& visible) {
  Wait w;
  w.jobId = r.id;
  if (st_.size() == 0) {
    // "No host is online" would send people to check their agents when an admin drained them.
    const bool drained =
        std::any_of(s_.hosts.begin(), s_.hosts.end(), [](const HostView& h) { return h.drained; });
    w.kind = drained ? WaitKind::kHostsDrained : WaitKind::kNoHosts;
    return w;
  }
  if (cpuOnly(r)) return std::nullopt;
  // What the fleet offers this team for this many GPUs does not depend on the CPU and memory
  // asked, so it is summed up once per (visibility, GPUs) and each request compares against the
  // few distinct (CPU, memory) capacities: a deep queue costs a scan of the hosts per shape, not
  // per request.
  auto key = std::tuple(visible, r.wholeHost, fractional(r), r.gpus);
  auto it = capacityCache_.find(key);
  if (it == capacityCache_.end()) it = capacityCache_.emplace(key, capacityFor(r, visible)).first;
  const Capacity& cap = it->second;
  if (!cap.any) {
    versionWait(r, w);
    return w;
  }
  w.largest = cap.largest;
  if (!r.wholeHost && cap.largest < r.gpus) {
    w.kind = WaitKind::kTooBig;
    return w;
  }
  int hostsBig = 0;
  for (const auto& [cpuMem, hosts] : cap.bigEnough) {
    if (cpuMem.first >= r.cpuMillis && cpuMem.second >= r.memoryMib) hostsBig += hosts;
  }
  // Enough GPUs somewhere, but no such host also has the CPU and memory asked: never fits.
  if (!r.wholeHost && hostsBig == 0) {
    w.kind = WaitKind::kTooBig;
    w.cpuMemory = true;
    return w;
  }
  if (r.hosts > 1 && hostsBig < r.hosts) {
    w.kind = WaitKind::kTooBig;
    w.hostsReady = hostsBig;
    w.hostsWanted = r.hosts;
    return w;
  }
  return std::nullopt;
}

// Nothing the request may use fits: when hosts with the GPUs asked are there and only the version
// minimums rule them out, say which minimum and what the newest host offers, so that people know
// to ask less or to upgrade hosts ("no such model" would send them looking for GPUs).
void Pass::versionWait(const Request& r, Wait& w) const {
  w.kind = WaitKind::kNoSuchModel;
  if (r.minDriver.empty() && r.minCuda.empty()) return;
  Request any = r;
  any.minDriver.clear();
  any.minCuda.clear();
  Request driverOnly = any;
  driverOnly.minDriver = r.minDriver;
  const bool driverFails = !r.minDriver.empty() && !anyNode(visibleMask(driverOnly));
  // Newest among the nodes that pass every other test (the driver, when CUDA is the problem).
  const pl::ModelSet candidates = visibleMask(driverFails ? any : driverOnly);
  if (!anyNode(candidates)) return;
  w.kind = driverFails ? WaitKind::kDriverTooOld : WaitKind::kCudaTooOld;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, candidates)) continue;
    const fleet::Kind& k = f_.kinds()[f_.segments()[n].kind];
    const std::string& v = driverFails ? k.driver : k.cuda;
    if (!v.empty() && (w.newest.empty() || compareVersions(v, w.newest) > 0)) w.newest = v;
  }
}

bool Pass::anyNode(const pl::ModelSet& allowed) const {
  for (int n = 0; n < st_.size(); ++n)
    if (kindAllowed(n, allowed)) return true;
  return false;
}

Pass::Capacity Pass::capacityFor(const Request& r, const pl::ModelSet& visible) const {
  Capacity c;
  int lastHost = -1;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, visible)) continue;
    c.any = true;
    int gpus = r.wholeHost ? st_.numGpus(n) : (fractional(r) ? 1 : st_.numGpus(n));
    c.largest = std::max(c.largest, gpus);
    // A host's segments are consecutive, so counting changes of host counts distinct hosts.
    const int host = f_.segments()[n].host;
    if (host != lastHost && gpus >= r.gpus) {
      ++c.bigEnough[{st_.cpuCap(n), st_.memCap(n)}];
      lastHost = host;
    }
  }
  return c;
}

std::optional<Wait> Pass::heldWait(const Request& r) const {
  if (cpuOnly(r) || r.hosts != 1 || !anyHeld_) return std::nullopt;
  const pl::ModelSet unheld = mask(r, Phase::kOwn, "", true) | mask(r, Phase::kPool, "", true) |
                              mask(r, Phase::kLent, "", true);
  const pl::ModelSet heldOnly = unheld - visibleMask(r);
  if (heldOnly.empty()) return std::nullopt;
  const pl::Task t = taskFor(r, heldOnly);
  int best = -1;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, heldOnly)) continue;
    const bool fits = r.wholeHost
                          ? f_.hasOneSegment(f_.segments()[n].host) &&
                                st_.fullFreeGpus(n) == st_.numGpus(n) &&
                                st_.cpuFree(n) == st_.cpuCap(n) && st_.memFree(n) == st_.memCap(n)
                          : st_.fits(n, t);
    if (fits && (best < 0 || f_.kindOf(n).heldFrom < f_.kindOf(best).heldFrom)) best = n;
  }
  if (best < 0) return std::nullopt;
  Wait w{r.id, WaitKind::kHeldForLease};
  w.host = f_.hostOf(best).name;
  w.startAt = f_.kindOf(best).heldFrom;
  w.lease = f_.kindOf(best).heldLease;
  return w;
}

std::optional<Wait> Pass::contourWait(const Request& r) const {
  // No kind outside its contour: nothing could be "elsewhere" (the usual fleet of one contour).
  if (contours_.empty() || (contours_.size() == 1 && *contours_.begin() == r.contour))
    return std::nullopt;
  const pl::ModelSet elsewhere = visibleMask(r, /*ignoreContour=*/true) - visibleMask(r);
  if (elsewhere.empty()) return std::nullopt;
  const pl::Task t = taskFor(r, elsewhere);
  std::set<int> hostsWithRoom;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, elsewhere)) continue;
    const bool fits = r.wholeHost
                          ? f_.hasOneSegment(f_.segments()[n].host) && st_.numGpus(n) > 0 &&
                                st_.fullFreeGpus(n) == st_.numGpus(n) &&
                                st_.cpuFree(n) == st_.cpuCap(n) && st_.memFree(n) == st_.memCap(n)
                          : st_.fits(n, t);
    if (fits) hostsWithRoom.insert(f_.segments()[n].host);
  }
  if (static_cast<int>(hostsWithRoom.size()) < r.hosts) return std::nullopt;
  Wait w{r.id, WaitKind::kNoHostInContour};
  w.contour = r.contour;
  return w;
}

Wait Pass::unplacedWait(const Request& r, const pl::Task& t) {
  // A single-host GPU request's wait (free GPUs in total, the most on one host) does not depend on
  // its CPU and memory; a gang's and a CPU-only request's do.
  const bool byResources = r.hosts > 1 || cpuOnly(r);
  auto key = std::tuple(t.allowedModels, byResources ? t.cpuMilli : -1,
                        byResources ? t.memoryMib : -1, t.numGpu, t.gpuMilli, r.hosts, cpuOnly(r));
  auto it = unplacedCache_.find(key);
  if (it == unplacedCache_.end() || it->second.first != version_)
    it =
        unplacedCache_.insert_or_assign(key, std::pair(version_, unplacedWaitUncached(r, t))).first;
  Wait w = it->second.second;
  w.jobId = r.id;
  return w;
}

Wait Pass::unplacedWaitUncached(const Request& r, const pl::Task& t) const {
  Wait w{r.id, WaitKind::kFragmented};
  if (cpuOnly(r)) {
    w.kind = WaitKind::kNeedsOnlineHost;
    return w;
  }
  int hostsReady = 0, lastHost = -1;
  for (int n = 0; n < st_.size(); ++n) {
    if (!kindAllowed(n, t.allowedModels)) continue;
    w.freeTotal += st_.gpuFreeTotal(n);
    w.largest = std::max(
        w.largest, t.shared() ? (st_.maxFreeMilli(n) >= t.gpuMilli ? 1 : 0) : st_.fullFreeGpus(n));
    const int host = f_.segments()[n].host;
    if (host != lastHost && st_.fits(n, t)) {
      ++hostsReady;
      lastHost = host;
    }
  }
  if (r.hosts > 1) {
    w.kind = WaitKind::kGang;
    w.hostsReady = hostsReady;
    w.hostsWanted = r.hosts;
  } else if (w.freeTotal < t.gpuRequest() * r.hosts) {
    w.kind = WaitKind::kNoFreeGpus;
  }
  return w;
}

}  // namespace allot::sched::fleet_pass
