#pragma once
// Ledger entries built by hand, for the tests of the usage report and the usage series, which
// read a ledger without a Cluster to write it.

#include <cstdint>
#include <string>

#include "model/job.h"

namespace allot::control::testsupport {

// The open entry of job `seq` (its own seq), of project "p", holding GPUs 0..gpus-1 from `start`.
inline model::LedgerEntry opened(int64_t seq, const std::string& team, const std::string& user,
                                 const std::string& host, const std::string& gpuModel, int gpus,
                                 int milli, TimeMs start) {
  model::LedgerEntry e;
  e.seq = seq;
  e.jobId = seq;
  e.team = team;
  e.project = "p";
  e.user = user;
  e.host = host;
  e.gpuModel = gpuModel;
  for (int g = 0; g < gpus; ++g) e.gpuIndices.push_back(g);
  e.gpuMilli = milli;
  e.startAt = start;
  return e;
}

// The entry that ends (or, with kCorrect, moves the end of) the open entry `ref` at `end`.
inline model::LedgerEntry closed(int64_t seq, int64_t ref, TimeMs end,
                                 model::LedgerKind kind = model::LedgerKind::kClose) {
  model::LedgerEntry e;
  e.seq = seq;
  e.kind = kind;
  e.ref = ref;
  e.jobId = ref;
  e.endAt = end;
  return e;
}

}  // namespace allot::control::testsupport
