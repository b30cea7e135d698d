#pragma once
// JobDir: a job's directories, and the files in them that let a restarted agent re-adopt the
// job. The records live under the executor's state dir, the job's data under its work dir:
//
//   <stateDir>/jobs/<id>/
//     spec.json    the JobSpec, start time and cgroup directories  (executor, before the shim)
//     shim.json    the shim's pid and /proc start time             (executor, after spawning)
//     pid          "<pid> <start ticks>" of the job's main process (shim, before exec)
//     status.json  the outcome                                     (shim, or executor when the
//                                                                   shim never started)
//   <workDir>/jobs/<id>/
//     output.log   the job's stdout and stderr
//     work/        the job's working directory
//
// The two are one directory when the state dir is the work dir (the default, and the layout of
// agents before --state-dir). A state dir on tmpfs (/run/allot-agent) is what the records need:
// they must outlive the agent, not the host, whose restart ends the jobs they describe; and
// where the work dir's file system is ext4 without a journal, each inode it allocates skips
// those freed in the last seconds to minutes, so a stream of short jobs, each creating and
// removing its records, makes every later creation slower (docs/benchmarks.md, section 2c).
//
// Every record is written whole to a temporary name and renamed, so a reader sees all or
// nothing. None is fsynced (see writeFile()). status.json is the one the shim writes too; its
// format is defined here and in job_shim_main.cc.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/exec/executor.h"
#include "agent/exec/tree_remover.h"
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
  // Records and data in one directory, <workDir>/jobs/<id>.
  JobDir(const std::string& workDir, int64_t id) : JobDir(workDir, workDir, id) {}
  JobDir(const std::string& stateDir, const std::string& workDir, int64_t id);

  // The records' directory (the shim's --job-dir).
  const std::string& path() const { return path_; }
  // The data's directory: the log and work/.
  const std::string& dataPath() const { return dataPath_; }
  bool split() const { return path_ != dataPath_; }
  std::string workPath() const { return dataPath_ + "/work"; }
  std::string logPath() const { return dataPath_ + "/output.log"; }
  std::string pidPath() const { return path_ + "/pid"; }
  std::string statusPath() const { return path_ + "/status.json"; }

  // Creates both directories (the records' mode 0700), work/ and an empty output.log, replacing
  // anything left there.
  Status create() const;
  // Removes both: the records at once, the data through `remover`, which sets aside what it
  // cannot remove in its budget (*setAside then says so).
  Status remove(TreeRemover& remover, bool* setAside = nullptr) const;

  Status writeRecord(const JobRecord& r) const;
  Result<JobRecord> readRecord() const;
  Status writeShim(const ShimRecord& s) const;
  std::optional<ShimRecord> readShim() const;
  // The job's main process as the shim recorded it: {pid, start ticks}.
  std::optional<ShimRecord> readJobPid() const;
  Status writeOutcome(const JobOutcome& o) const;
  // nullopt while the job has no recorded outcome; Unavailable while it cannot be read for now
  // (out of descriptors or memory: look again later); any other unreadable file is an error.
  Result<std::optional<JobOutcome>> readOutcome() const;

 private:
  Status writeFile(const std::string& name, const std::string& content) const;
  std::string path_;
  std::string dataPath_;
};

}  // namespace allot::agent
