#include "agent/exec/run_as.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
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

Status checkRunAs(const JobSpec& spec) { return checkRunAs(spec.runAs, spec.id); }

Status checkRunAs(const std::optional<model::RunAs>& runAs, int64_t id) {
  const std::string job = "job " + std::to_string(id);
  if (!runAs)
    return Status::FailedPrecondition(
        job +
        " has no Unix identity (its submitter has no uid yet); this agent runs workloads "
        "as their owner and never as root");
  const model::RunAs& r = *runAs;
  if (r.uid <= 0 || r.gid <= 0 || r.teamGid == 0)
    return Status::FailedPrecondition(job + " would run as uid " + std::to_string(r.uid) + " gid " +
                                      std::to_string(r.gid) + "; workloads never run as root");
  if (r.uid > model::kMaxUnixId || r.gid > model::kMaxUnixId || r.teamGid > model::kMaxUnixId ||
      r.teamGid < -1)
    return Status::FailedPrecondition(job + " has an id no host can give (uid " +
                                      std::to_string(r.uid) + " gid " + std::to_string(r.gid) +
                                      " team gid " + std::to_string(r.teamGid) + ")");
  return Status::Ok();
}

namespace {

// `ours`: only what this process owns (what it has just made) is given; anything else in its
// place is refused.
Status giveOpened(const std::string& path, int64_t uid, int64_t gid, unsigned mode, int flags,
                  bool ours = false) {
  // On the open file, never by path: a link in its place (planted by someone who could write
  // where it lies) is refused, not followed to a host file. O_NONBLOCK: a FIFO there cannot
  // hold the agent.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | flags);
  struct stat st {};
  Status result = Status::Ok();
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    result = Status::Unavailable("cannot open " + path + ": " + std::strerror(errno));
  } else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
    result = Status::FailedPrecondition(path + " is neither a directory nor a file; refusing it");
  } else if (ours && st.st_uid != ::geteuid()) {
    result = Status::FailedPrecondition(path + " was replaced after it was made; refusing it");
  } else if (::fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0 ||
             ::fchmod(fd, mode) != 0) {
    result = Status::Unavailable("cannot give " + path + " to uid " + std::to_string(uid) +
                                 " gid " + std::to_string(gid) + ": " + std::strerror(errno));
  }
  if (fd >= 0) ::close(fd);
  return result;
}

}  // namespace

Status giveTo(const std::string& path, int64_t uid, int64_t gid, unsigned mode) {
  return giveOpened(path, uid, gid, mode, 0);
}

Status giveDirectoryTo(const std::string& path, int64_t uid, int64_t gid, unsigned mode) {
  return giveOpened(path, uid, gid, mode, O_DIRECTORY);
}

Status makeDirectoryFor(const std::string& path, int64_t uid, int64_t gid, unsigned mode) {
  if (::mkdir(path.c_str(), 0700) != 0)
    return errno == EEXIST
               ? Status::AlreadyExists(path + " exists")
               : Status::Unavailable("cannot create " + path + ": " + std::strerror(errno));
  return giveOpened(path, uid, gid, mode, O_DIRECTORY, /*ours=*/true);
}

bool isAgentOwnedDir(const struct stat& st) {
  return S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 022) == 0;
}

const std::vector<char*>& fixedEnvironment() {
  static char path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin", lang[] = "LANG=C.UTF-8";
  static const std::vector<char*> env = {path, lang, nullptr};
  return env;
}

Status checkAgentOwnedDir(const std::string& dir, const char* what) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return Status::Unavailable(std::string(what) + " " + dir + ": " + std::strerror(errno));
  if (!isAgentOwnedDir(st))
    return Status::FailedPrecondition(
        std::string(what) + " " + dir +
        " must be a directory of the agent's user that no one else may write (a user who may "
        "could plant a link where the agent, as root, makes a job's directory)");
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
    ALLOT_RETURN_IF_ERROR(checkAgentOwnedDir(root, "the team directory root"));
    ::chmod(root.c_str(), 0711);
    ALLOT_RETURN_IF_ERROR(giveDirectoryTo(dir, 0, runAs.teamGid, 02770));
  }
  return dir;
}

std::string firstClosedAncestor(const std::string& dir) {
  for (fs::path p = fs::absolute(dir);; p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return p.string() + " (mode " + mode + ")";
    }
    if (p == p.root_path() || p.parent_path() == p) return "";
  }
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
