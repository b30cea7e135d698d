#pragma once
// GPU device confinement for cgroup v2. v2 has no devices.deny file: device access is decided by
// BPF_PROG_TYPE_CGROUP_DEVICE programs attached to the group (and to its ancestors; with
// BPF_F_ALLOW_MULTI every attached program must allow). As runc and systemd do, we hand-assemble
// the program from raw instructions, so building the agent needs neither clang nor libbpf, only
// the kernel's UAPI header.
//
// The program denies NVIDIA GPU nodes (char major 195, minors 0..254, which includes
// nvidia-modeset at 254) other than the given minors, and allows everything else: nvidiactl
// (195:255), nvidia-uvm and nvidia-uvm-tools (a dynamic major), and every non-NVIDIA device, which
// stay under whatever rules the group's ancestors apply. It matches the v1 rules CgroupManager
// writes into devices.deny.
//
// Stateless functions; any thread may call them.

#include <linux/bpf.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace allot::agent {

// The program for a job allowed `gpuMinors` (others on major 195 in 0..254 are denied; values
// outside 0..254 are ignored, duplicates too). Its length is kGpuFilterFixedInsns plus one
// instruction per distinct allowed minor.
std::vector<bpf_insn> gpuDeviceFilterProgram(const std::vector<int>& gpuMinors);
inline constexpr size_t kGpuFilterFixedInsns = 11;

// The BPF_PROG_LOAD attributes of a device program (GPL), as attachGpuDeviceFilter loads it; they
// point into `prog`, which must outlive their use. The tests probe the kernel with them.
bpf_attr deviceProgramLoadAttr(const std::vector<bpf_insn>& prog);

// Loads gpuDeviceFilterProgram(gpuMinors) and attaches it to the cgroup v2 directory
// `cgroupDir` (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI). The attachment holds the program for as long
// as the group exists; nothing needs to be kept or detached. Errors say which step failed on
// which directory, with the kernel's reason (and the verifier's log when loading is refused).
[[nodiscard]] Status attachGpuDeviceFilter(const std::string& cgroupDir,
                                           const std::vector<int>& gpuMinors);

}  // namespace allot::agent
