// Words for the fleet scheduler's compact decisions, made only when someone asks.

#include <cstdio>
#include <cstdlib>

#include "common/time_format.h"
#include "sched/fleet.h"

namespace allot::sched {
namespace {

std::string gpusText(const Request& r) {
  std::string models;
  for (const auto& m : r.models) models += (models.empty() ? "" : "/") + m;
  if (r.gpuMilli < kMilliPerGpu) {
    char pct[16];
    std::snprintf(pct, sizeof pct, "%g", r.gpuMilli / 10.0);
    return std::string(pct) + "% of a shared " + (models.empty() ? "" : models + " ") + "GPU";
  }
  return std::to_string(r.gpus) + " " + (models.empty() ? "" : models + " ") +
         (r.gpus == 1 ? "GPU" : "GPUs");
}

std::string cpuMemoryText(const Request& r) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g CPU cores and %g GiB of memory", r.cpuMillis / 1000.0,
                static_cast<double>(r.memoryMib) / 1024.0);
  return buf;
}

std::string milliText(int64_t milli) {
  if (milli % kMilliPerGpu == 0) return std::to_string(milli / kMilliPerGpu);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(milli) / kMilliPerGpu);
  return buf;
}

}  // namespace

const char* placedByName(PlacedBy by) {
  switch (by) {
    case PlacedBy::kDedicated:
      return "dedicated";
    case PlacedBy::kQuota:
      return "quota";
    case PlacedBy::kLentDedicated:
      return "lent_dedicated";
    case PlacedBy::kBackfill:
      return "backfill";
  }
  return "quota";
}

const char* waitKindName(WaitKind kind) {
  switch (kind) {
    case WaitKind::kNoHosts:
      return "no_hosts";
    case WaitKind::kHostsDrained:
      return "hosts_drained";
    case WaitKind::kNoSuchModel:
      return "no_such_model";
    case WaitKind::kTooBig:
      return "too_big";
    case WaitKind::kNeedsOnlineHost:
      return "needs_host";
    case WaitKind::kOverQuota:
      return "over_quota";
    case WaitKind::kNoFreeGpus:
      return "no_free_gpus";
    case WaitKind::kWaitingForLenders:
      return "waiting_for_lenders";
    case WaitKind::kWaitingForGrace:
      return "waiting_for_preemption";
    case WaitKind::kGuaranteeInUse:
      return "guarantee_in_use";
    case WaitKind::kFragmented:
      return "fragmented";
    case WaitKind::kGang:
      return "waiting_for_gang";
    case WaitKind::kNoIdleHost:
      return "no_idle_host";
    case WaitKind::kDriverTooOld:
      return "driver_too_old";
    case WaitKind::kCudaTooOld:
      return "cuda_too_old";
    case WaitKind::kReserved:
      return "reserved";
    case WaitKind::kHeldForLease:
      return "held_for_lease";
    case WaitKind::kNoHostInContour:
      return "no_host_in_contour";
    case WaitKind::kContourLimit:
      return "contour_limit";
    case WaitKind::kSchedulerError:
      return "scheduler_error";
    case WaitKind::kNoImageHosts:
      return "no_image_hosts";
  }
  return "waiting";
}

std::string describeWait(const Wait& w, const Request& r) {
  const std::string what = gpusText(r);
  switch (w.kind) {
    case WaitKind::kNoHosts:
      return "no host is online to run it";
    case WaitKind::kHostsDrained: {
      if (w.outOfService.empty())
        return "no host is available to run it: the online hosts are draining or in maintenance";
      std::string hosts;
      for (const auto& h : w.outOfService) {
        if (!hosts.empty()) hosts += "; ";
        hosts += "host " + h.host + " is " + h.state;
        if (h.drainDeadline > 0)
          hosts += " (work still on it is stopped at " + formatIso8601(h.drainDeadline) + ")";
      }
      if (w.outOfServiceMore > 0) hosts += "; and " + std::to_string(w.outOfServiceMore) + " more";
      return "only hosts an admin took out of service could run it: " + hosts +
             "; it runs once one is back in service";
    }
    case WaitKind::kNoSuchModel:
      if (r.gpuMilli < kMilliPerGpu)
        return "no host team " + r.team + " may use has a shared GPU that matches";
      return "no host team " + r.team + " may use has " +
             (r.models.empty() ? std::string("GPUs") : what) +
             (r.minDriver.empty() && r.minCuda.empty() ? "" : " with the driver and CUDA asked");
    case WaitKind::kTooBig:
      if (w.hostsWanted > 0)
        return "a gang of " + std::to_string(w.hostsWanted) + " hosts x " + what + ", but only " +
               std::to_string(w.hostsReady) + " hosts team " + r.team + " may use are that big";
      if (w.cpuMemory)
        return "no host team " + r.team + " may use has " + cpuMemoryText(r) + " next to " + what;
      return "no host team " + r.team + " may use has " + what + " (the largest has " +
             std::to_string(w.largest) + ")";
    case WaitKind::kNeedsOnlineHost:
      return "waiting for a host with the CPU and memory free";
    case WaitKind::kOverQuota:
      return "over quota: team " + r.team + " is at its guarantee and its borrow limit";
    case WaitKind::kNoFreeGpus:
      return "quota allows " + what + " for team " + r.team + ", but they are in use";
    case WaitKind::kWaitingForLenders:
      return "waiting for lenders: the idle capacity other teams may lend is in use";
    case WaitKind::kWaitingForGrace: {
      std::string ids;
      for (int64_t id : w.waitingFor) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      return "reclaiming capacity for team " + r.team + ": waiting for job" +
             (w.waitingFor.size() == 1 ? " " : "s ") + ids + " to leave (preemption grace)";
    }
    case WaitKind::kGuaranteeInUse:
      return "within team " + r.team +
             "'s guarantee, but the GPUs are held by other teams' guaranteed work";
    case WaitKind::kFragmented:
      return "fragmented: " + milliText(w.freeTotal) + " GPUs are free in total, but no host has " +
             what + " free together with the CPU and memory asked (the most on one host is " +
             std::to_string(w.largest) + ")";
    case WaitKind::kGang:
      return "waiting for a gang: " + std::to_string(w.hostsReady) + " of " +
             std::to_string(w.hostsWanted) + " hosts have " + what + " free";
    case WaitKind::kNoIdleHost:
      return "waiting for an idle host team " + r.team + " may use";
    case WaitKind::kDriverTooOld:
    case WaitKind::kCudaTooOld: {
      const bool driver = w.kind == WaitKind::kDriverTooOld;
      const std::string label = driver ? "driver" : "CUDA";
      return "needs " + label + " >= " + (driver ? r.minDriver : r.minCuda) + "; " +
             (w.newest.empty()
                  ? "no host team " + r.team + " may use reports its " + label + " version"
                  : "the newest among hosts team " + r.team + " may use is " + w.newest);
    }
    case WaitKind::kReserved:
      return "waiting for " + what + " to come free; first in line on " + w.host +
             (w.startAt > 0 ? ", expected to start by " + formatIso8601(w.startAt) : "");
    case WaitKind::kHeldForLease:
      return "held for a lease: " + w.host + " is held for lease " + std::to_string(w.lease) +
             ", which starts " + formatIso8601(w.startAt) +
             (r.maxRuntimeMs > 0 ? ", and the job's max runtime does not end before then"
                                 : ", and the job declares no max runtime that ends before then");
    case WaitKind::kNoHostInContour:
      if (w.contourNever)
        return "no host in contour " + w.contour + " that team " + r.team + " may use can take " +
               what + "; hosts of other contours could, but a job runs only in its own contour";
      return "no host in contour " + w.contour + " has " + what +
             " free; hosts of other contours have room, but a job runs only in its own contour" +
             (w.host.empty() ? "" : "; first in line on " + w.host) +
             (w.startAt > 0 ? ", expected to start by " + formatIso8601(w.startAt) : "");
    case WaitKind::kContourLimit:
      return "contour limit: team " + r.team + " may hold at most " + milliText(w.limitMilli) +
             " GPUs in contour " + w.contour + " and holds " + milliText(w.usedMilli);
    case WaitKind::kSchedulerError:
      // The error itself may name any team's hosts: it goes to platform admins (an event).
      return "nothing can be placed: the scheduler refused the fleet's state (platform admins "
             "have a scheduler_error event)";
    case WaitKind::kNoImageHosts:
      return "no host team " + r.team +
             " may use runs jobs in images (an agent does where its workloads run as their "
             "owners and crun, skopeo and a seccomp profile are there: docs/environments.md)";
  }
  return "waiting";
}

}  // namespace allot::sched
