#include "agent/session/session_ssh.h"

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/exec/run_as.h"

extern char** environ;

namespace allot::agent {

namespace fs = std::filesystem;

namespace {

// Runs argv (absolute program) to its end with no input and its output discarded; its status.
Status runQuietly(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return Status::Unavailable("cannot run " + argv[0] + ": " + std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::Unavailable(argv[0] + " failed");
  return Status::Ok();
}

// Written whole under a temporary name, then renamed: sshd never reads half a file.
Status writeFile(const std::string& path, const std::string& text, uid_t uid, gid_t gid,
                 unsigned mode) {
  const std::string tmp = path + ".new";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return Status::Unavailable("cannot write " + tmp);
  }
  ALLOT_RETURN_IF_ERROR(giveTo(tmp, uid, gid, mode));
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Unavailable("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string loginName(uid_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) != 0 || found == nullptr) return "";
  return pw.pw_name;
}

// What a login keeps of the session's environment: not what sshd sets for the login itself (the
// user's home, shell and names), not the Jupyter token, and nothing sshd_config cannot quote.
bool keepInLogin(const std::string& name, const std::string& value) {
  static const char* dropped[] = {"HOME",  "USER", "LOGNAME", "SHELL",         "PWD", "OLDPWD",
                                  "SHLVL", "_",    "TERM",    "JUPYTER_TOKEN", "MAIL"};
  for (const char* d : dropped) {
    if (name == d) return false;
  }
  if (name.empty() || name.find_first_of("=\" \\\t\n") != std::string::npos) return false;
  return value.find_first_of("\"\\\n\r") == std::string::npos;
}

}  // namespace

std::string sessionSshdConfig(const std::string& dir, const std::string& user, bool root,
                              const std::map<std::string, std::string>& env) {
  std::ostringstream c;
  c << "# Written by allot-agent at each connection; sshd runs with -i on allotd's tunnel.\n"
    << "HostKey " << dir << "/host_ed25519\n"
    << "AuthorizedKeysFile " << dir << "/authorized_keys\n"
    << "AuthenticationMethods publickey\n"
    << "PubkeyAuthentication yes\n"
    << "PasswordAuthentication no\n"
    << "KbdInteractiveAuthentication no\n"
    << "UsePAM no\n"
    // The files are the agent's, made with the right modes; the directories above them (a
    // work directory under /tmp, say) are not the user's to vouch for.
    << "StrictModes no\n"
    << "AllowUsers " << user << "\n"
    << "PermitRootLogin " << (root ? "prohibit-password" : "no") << "\n"
    << "PidFile none\n"
    << "PrintMotd no\n"
    << "PrintLastLog no\n"
    << "X11Forwarding no\n"
    // VS Code Remote-SSH reaches its server through a forwarded port.
    << "AllowTcpForwarding yes\n"
    << "Subsystem sftp internal-sftp\n";
  // sshd keeps only its first SetEnv line: every variable goes on this one.
  std::string setEnv;
  for (const auto& [k, v] : env) {
    if (keepInLogin(k, v)) setEnv += " \"" + k + "=" + v + "\"";
  }
  if (!setEnv.empty()) c << "SetEnv" << setEnv << "\n";
  return c.str();
}

std::map<std::string, std::string> processEnvironment(int pid) {
  std::map<std::string, std::string> env;
  if (pid <= 0) return env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && eq > 0) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

std::string SessionSsh::dirOf(int64_t id) const {
  return config_.stateDir + "/" + std::to_string(id);
}

Status SessionSsh::prepare(int64_t id, const SessionIdentity& who) {
  if (!enabled()) return Status::Ok();
  if (loginName(who.uid).empty())
    return Status::FailedPrecondition("uid " + std::to_string(who.uid) +
                                      " has no login name on this host; sshd needs one");
  std::error_code ec;
  fs::create_directories(config_.stateDir, ec);
  // Owners reach their own session's directory through it, and list nothing.
  ::chmod(config_.stateDir.c_str(), 0711);
  const std::string dir = dirOf(id);
  reported_.erase(id);
  fs::remove_all(dir, ec);
  if (!fs::create_directory(dir, ec))
    return Status::Unavailable("cannot create " + dir + ": " + ec.message());
  ALLOT_RETURN_IF_ERROR(giveTo(dir, who.uid, who.gid, 0700));
  const std::string key = dir + "/host_ed25519";
  ALLOT_RETURN_IF_ERROR(runQuietly({config_.keygen, "-q", "-t", "ed25519", "-N", "", "-C",
                                    "allot-session-" + std::to_string(id), "-f", key}));
  ALLOT_RETURN_IF_ERROR(giveTo(key, who.uid, who.gid, 0600));
  return giveTo(key + ".pub", who.uid, who.gid, 0644);
}

void SessionSsh::report(int64_t id, model::ActualSession& out) const {
  if (!enabled()) return;
  auto known = reported_.find(id);
  if (known == reported_.end()) {
    const std::string dir = dirOf(id);
    struct stat st {};
    std::ifstream in(dir + "/host_ed25519.pub");
    std::string type, blob;
    if (::stat(dir.c_str(), &st) != 0 || !(in >> type >> blob)) return;
    known = reported_.emplace(id, std::make_pair(loginName(st.st_uid), type + " " + blob)).first;
  }
  out.sshUser = known->second.first;
  out.sshHostKey = known->second.second;
}

Result<TunnelTarget> SessionSsh::connect(int64_t id, const SessionIdentity& who,
                                         const std::vector<std::string>& authorizedKeys,
                                         const std::vector<std::string>& cgroups,
                                         const std::map<std::string, std::string>& env) const {
  if (!enabled()) return Status::FailedPrecondition("this host offers no SSH (allot-agent --sshd)");
  const std::string dir = dirOf(id);
  const std::string user = loginName(who.uid);
  if (user.empty() || !fs::exists(dir + "/host_ed25519"))
    return Status::FailedPrecondition("session " + std::to_string(id) + " has no SSH on this host");
  if (authorizedKeys.empty())
    return Status::FailedPrecondition(
        "the session's owner has no SSH key; add one with `allot ssh-key add`");
  std::string keys;
  for (const auto& k : authorizedKeys) keys += k + "\n";
  ALLOT_RETURN_IF_ERROR(writeFile(dir + "/authorized_keys", keys, who.uid, who.gid, 0600));
  ALLOT_RETURN_IF_ERROR(writeFile(dir + "/sshd_config",
                                  sessionSshdConfig(dir, user, who.uid == 0, env), who.uid, who.gid,
                                  0600));
  if (who.uid == 0) {
    // sshd run by root wants its privilege-separation directory, which its service unit makes.
    std::error_code ec;
    fs::create_directories("/run/sshd", ec);
  }
  TunnelTarget t = TunnelTarget::process({config_.sshd, "-i", "-e", "-f", dir + "/sshd_config"});
  if (who.switchUser) {
    t.uid = who.uid;
    t.gid = who.gid;
    t.groups = who.groups;
  }
  t.cgroups = cgroups;
  return t;
}

void SessionSsh::forget(int64_t id) {
  reported_.erase(id);
  std::error_code ec;
  fs::remove_all(dirOf(id), ec);
}

}  // namespace allot::agent
