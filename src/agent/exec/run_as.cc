#include "agent/exec/run_as.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

// Team names are validated by allotd (letters, digits, '-', '_', '.'); a name that would leave
// the root is refused here all the same, since the agent runs as root.
bool safeName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

Status checkRunAs(const JobSpec& spec) {
  const std::string job = "job " + std::to_string(spec.id);
  if (!spec.runAs)
    return Status::FailedPrecondition(
        job +
        " has no Unix identity (its submitter has no uid yet); this agent runs workloads "
        "as their owner and never as root");
  const model::RunAs& r = *spec.runAs;
  if (r.uid <= 0 || r.gid <= 0 || r.teamGid == 0)
    return Status::FailedPrecondition(job + " would run as uid " + std::to_string(r.uid) + " gid " +
                                      std::to_string(r.gid) + "; workloads never run as root");
  return Status::Ok();
}

Status giveTo(const std::string& path, int64_t uid, int64_t gid, unsigned mode) {
  if (::chown(path.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0 ||
      ::chmod(path.c_str(), mode) != 0)
    return Status::Unavailable("cannot give " + path + " to uid " + std::to_string(uid) + " gid " +
                               std::to_string(gid) + ": " + std::strerror(errno));
  return Status::Ok();
}

Result<std::string> ensureTeamDir(const std::string& root, const model::RunAs& runAs, bool owned) {
  if (!safeName(runAs.team)) return Status::InvalidArgument("bad team name '" + runAs.team + "'");
  const std::string dir = root + "/" + runAs.team;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Unavailable("cannot create team directory " + dir + ": " + ec.message());
  if (fs::is_symlink(fs::symlink_status(dir, ec)))
    return Status::FailedPrecondition("team directory " + dir + " is a symlink; refusing it");
  if (owned && runAs.teamGid > 0) {
    // Others must reach their own team's directory through the root, but list nothing in it.
    ::chmod(root.c_str(), 0711);
    ALLOT_RETURN_IF_ERROR(giveTo(dir, 0, runAs.teamGid, 02770));
  }
  return dir;
}

std::vector<std::string> shimIdentityArgs(const model::RunAs& runAs) {
  std::vector<std::string> args = {"--uid", std::to_string(runAs.uid), "--gid",
                                   std::to_string(runAs.gid)};
  if (runAs.teamGid > 0) {
    args.push_back("--groups");
    args.push_back(std::to_string(runAs.teamGid));
  }
  return args;
}

}  // namespace allot::agent
