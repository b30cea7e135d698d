#pragma once
// The largest resource request allotd takes, one set of bounds for every kind of request (jobs,
// sessions, profiles, leases): more than any host offers, so that a bigger number is a typo or
// an attack, refused with a 400 naming the field, never stored. The hardware a host may claim is
// bounded separately (agent_protocol.h, kMaxHost*).

#include <cstdint>

namespace allot::model {

inline constexpr int kMaxRequestGpus = 1024;                          // a gang's GPUs, all hosts
inline constexpr int64_t kMaxRequestCpuMillis = 4096 * 1000;          // 4096 CPUs
inline constexpr int64_t kMaxRequestMemoryMib = int64_t{64} << 20;    // 64 TiB
inline constexpr int64_t kMaxRequestGpuMemoryMib = int64_t{1} << 20;  // 1 TiB per GPU

}  // namespace allot::model
