#pragma once
// The fleet as placement nodes ("segments"), for one pass of the fleet scheduler.
//
// A host's GPUs are grouped by (model, owner, shared mode); each group is one node of a
// placement::ClusterState. A node's "model" there is a placement kind: the GPU model, owner,
// mode and the host's driver and CUDA versions together, so that a request's allowed-kinds mask
// expresses every constraint at once (see fleet.h). A host with several groups splits its CPU and
// memory among them in proportion to their GPUs; a host without GPUs is one CPU-only node.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/fleet.h"
#include "sched/placement/cluster.h"

namespace allot::sched::fleet {

struct Kind {
  std::string model;  // empty for a CPU-only node
  std::string owner;  // empty: the shared pool
  bool shared = false;
  std::string driver;
  std::string cuda;
  // The host's lease hold (HostView::heldFrom, heldLease); 0 = not held.
  TimeMs heldFrom = 0;
  int64_t heldLease = 0;
  std::string contour{};  // the host's
  bool images = false;    // the host's agent runs jobs in images
};

struct Segment {
  int host = 0;               // index into Snapshot::hosts
  std::vector<int> gpuIndex;  // segment GPU i -> the host's GPU index
  std::vector<const GpuView*> gpus;
  int kind = 0;
  int64_t gpuMemoryMib = 0;  // of one GPU (the smallest in the segment)
};

class Fleet {
 public:
  // Fails when the snapshot cannot be modelled (more than placement::kMaxModels kinds).
  static Result<Fleet> build(const Snapshot& snapshot);

  placement::ClusterState& state() { return state_; }
  const placement::ClusterState& state() const { return state_; }
  const std::vector<Segment>& segments() const { return segments_; }
  const std::vector<Kind>& kinds() const { return kinds_; }
  const Kind& kindOf(int node) const { return kinds_[segments_[node].kind]; }
  const HostView& hostOf(int node) const { return (*hosts_)[segments_[node].host]; }
  // Segments of a host (by index into Snapshot::hosts).
  const std::vector<int>& segmentsOfHost(int host) const { return byHost_[host]; }
  // The placement model id of a kind, as a task's allowedModels holds it.
  int kindModel(int kind) const { return kindModel_[kind]; }
  bool hasOneSegment(int host) const { return byHost_[host].size() == 1; }

  // Takes what a running slice holds, as far as it still fits (reality wins over the model: a
  // slice that no longer matches the segments, after an admin changed a GPU's mode, is applied
  // in part). Returns the nodes touched.
  std::vector<int> applyRunning(const Slice& slice);
  // The host index for a name, -1 when it is not schedulable here.
  int hostIndex(const std::string& name) const;
  // Segment and local GPU of a host's GPU index; {-1, -1} when none.
  std::pair<int, int> locate(int host, int gpuIndex) const;
  // A placement choice as a Slice.
  Slice toSlice(int node, uint32_t gpus, const placement::Task& task) const;

 private:
  const std::vector<HostView>* hosts_ = nullptr;
  placement::ClusterState state_;
  std::vector<Segment> segments_;
  std::vector<Kind> kinds_;
  std::vector<int> kindModel_;
  std::vector<std::vector<int>> byHost_;
  std::map<std::string, int> hostByName_;
};

}  // namespace allot::sched::fleet
