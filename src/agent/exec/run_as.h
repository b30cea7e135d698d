#pragma once
// Workloads run as their owner (docs/access.md): what the agent does with a job's identity
// (model::RunAs) before its shim starts it. The switch itself (setgroups, setgid, setuid) is the
// shim's, in the job's process just before exec (job_shim_main.cc, --uid/--gid/--groups).
//
// Plain functions over the filesystem; called from the agent's loop.

#include <sys/stat.h>

#include <string>
#include <vector>

#include "agent/exec/executor.h"
#include "common/status.h"

namespace allot::agent {

// The job may run under `required` (the agent switches users): it has an identity, and neither
// its uid nor its gid is 0. A job refused here fails to start with this message.
Status checkRunAs(const JobSpec& spec);
// The same for job `id`'s identity alone (a session's, before the agent prepares it).
Status checkRunAs(const std::optional<model::RunAs>& runAs, int64_t id);

// Makes `path` the owner's: chown uid:gid, then chmod `mode`, on the opened file (a symlink in
// its place is refused, not followed). The agent (root) still reaches it.
Status giveTo(const std::string& path, int64_t uid, int64_t gid, unsigned mode);
// The same, for a directory only (a file in its place, a hard link planted there, is refused).
Status giveDirectoryTo(const std::string& path, int64_t uid, int64_t gid, unsigned mode);
// Makes the directory `path` and gives it, as opened, to uid:gid with `mode`: AlreadyExists when
// something is there already, and refused when what it opens is no longer the directory it made
// (on a root others may write, one swapped in between the mkdir and the open).
Status makeDirectoryFor(const std::string& path, int64_t uid, int64_t gid, unsigned mode);

// A directory the agent may do root-side work in: its own user's, writable by no one else, so
// nobody can plant a link there.
bool isAgentOwnedDir(const struct stat& st);

// The environment of what the agent starts for a workload or a session (sshd as the user,
// ssh-keygen): never the agent's own, which may hold its join token and which a user could read
// from /proc. A null-terminated array, made before any fork.
const std::vector<char*>& fixedEnvironment();

// A root the agent makes workloads' directories in (scratch, team directories, homes): a real
// directory of the agent's user, writable by no one else. `what` names it in the error.
Status checkAgentOwnedDir(const std::string& dir, const char* what);

// The team's shared directory <root>/<team>, made if missing. With `owned`, it belongs to
// root:<team gid> with mode 2770 (setgid: files made in it keep the team's group), reset at each
// start so that a directory someone loosened is closed again. Without, it is left as made.
Result<std::string> ensureTeamDir(const std::string& root, const model::RunAs& runAs, bool owned);

// The first of `dir` and the directories above it that others may not pass through (no o+x),
// with its mode ("/tmp/x (mode 0700)"); "" when every one lets them through.
std::string firstClosedAncestor(const std::string& dir);

// The shim's flags for the switch: --uid U --gid G [--groups TEAM_GID].
std::vector<std::string> shimIdentityArgs(const model::RunAs& runAs);

}  // namespace allot::agent
