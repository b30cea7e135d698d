#pragma once
// JobDir: a job's directory under the executor's work dir, and the files in it that let a
// restarted agent re-adopt the job. Layout of <workDir>/jobs/<id>/:
//
//   spec.json    the JobSpec, start time and cgroup directories    (executor, before the shim)
//   shim.json    the shim's pid and /proc start time               (executor, after spawning)
//   pid          "<pid> <start ticks>" of the job's main process   (shim, before exec)
//   status.json  the outcome                                       (shim, or executor when the
//                                                                   shim never started)
//   output.log   the job's stdout and stderr
//   work/        the job's working directory
//
// Every file is written whole to a temporary name and renamed, so a reader sees all or nothing.
// None is fsynced: they must survive the agent, not the host (see writeFile()).
// status.json is the one the shim writes too; its format is defined here and in job_shim_main.cc.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/exec/executor.h"
#include "common/status.h"

namespace allot::agent {

struct JobRecord {
  JobSpec spec;
  TimeMs startedAt = 0;
  std::vector<std::string> cgroups;  // group directories the shim joins
};

struct ShimRecord {
  pid_t pid = 0;
  uint64_t startTicks = 0;
};

// How the job ended: state is kExited (with exitCode or signal) or kFailedToStart (with message).
struct JobOutcome {
  model::ActualState state = model::ActualState::kExited;
  std::optional<int> exitCode;
  std::optional<int> signal;
  TimeMs finishedAt = 0;
  std::string message;
};

class JobDir {
 public:
  JobDir(const std::string& workDir, int64_t id);
  explicit JobDir(std::string path) : path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  std::string workPath() const { return path_ + "/work"; }
  std::string logPath() const { return path_ + "/output.log"; }
  std::string pidPath() const { return path_ + "/pid"; }
  std::string statusPath() const { return path_ + "/status.json"; }

  // Creates the directory, work/ and an empty output.log, replacing anything left there.
  Status create() const;
  Status remove() const;

  Status writeRecord(const JobRecord& r) const;
  Result<JobRecord> readRecord() const;
  Status writeShim(const ShimRecord& s) const;
  std::optional<ShimRecord> readShim() const;
  // The job's main process as the shim recorded it: {pid, start ticks}.
  std::optional<ShimRecord> readJobPid() const;
  Status writeOutcome(const JobOutcome& o) const;
  // nullopt while the job has no recorded outcome; an unreadable file is an error.
  Result<std::optional<JobOutcome>> readOutcome() const;

 private:
  Status writeFile(const std::string& name, const std::string& content) const;
  std::string path_;
};

}  // namespace allot::agent
