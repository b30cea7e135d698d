#pragma once
// A container's seccomp filter compiled once, by the agent, with libseccomp: crun would compile
// the OCI form (container_config.h, ociSeccomp()) at every container start, about 13 ms of a
// 21 ms start here (docs/benchmarks.md, 2e). crun takes the program ready in the annotation
// run.oci.seccomp_bpf_data (base64 of what seccomp(SECCOMP_SET_MODE_FILTER) loads) and then
// ignores linux.seccomp.

#include <string>

#include "common/status.h"

namespace allot::agent {

// The base64 of the BPF program for `ociSeccompJson` (linux.seccomp as JSON text) on this
// machine's architecture. Syscalls this libseccomp does not know are left out, as crun leaves
// them; an action or operator it cannot express is an error (then crun compiles the OCI form).
Result<std::string> compileSeccomp(const std::string& ociSeccompJson);

}  // namespace allot::agent
