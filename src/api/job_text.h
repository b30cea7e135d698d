#pragma once
// A job as the API shows it, written straight to JSON text: byte for byte what
// jobJson(...).dump() gives, keys in the same (sorted) order, without building the document.
// Every submission's reply and every row of a job listing is one; building, dumping and freeing
// the document was about a sixth of allotd's CPU per submission (docs/benchmarks.md, section 1).
//
// It covers the jobs almost every reply shows: one process, no session, no pull under way, no idle
// flag, all text valid UTF-8. For the others it gives nullopt, and the caller builds the
// document (jobJson), which stays the one definition of the form: the tests hold the two to the
// same bytes over every kind of job.

#include <cstddef>
#include <optional>
#include <string>

#include "control/cluster.h"

namespace allot::api {

struct JobTextOptions {
  size_t maxSpecBytes = 0;  // as jobJson's: 0 = the whole command and environment
  size_t arrayTasks = 0;    // > 0: "array_tasks", the ids of an array from this job's on
  // Shown as the job's reason instead of its own (a queued job's wait, as Cluster::getJob gives
  // it); null = the job's own.
  const std::string* reason = nullptr;
};

std::optional<std::string> jobText(control::Cluster& cluster, const model::Job& j,
                                   const JobTextOptions& options = {});

}  // namespace allot::api
