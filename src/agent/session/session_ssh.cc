#include "agent/session/session_ssh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "agent/exec/remove_tree.h"
#include "agent/exec/run_as.h"

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
  const int err =
      ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), fixedEnvironment().data());
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return Status::Unavailable("cannot run " + argv[0] + ": " + std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::Unavailable(argv[0] + " failed");
  return Status::Ok();
}

// The session's directory, opened for the *at calls below, once it is known to be ours alone:
// a directory that is not (a symlink, one the session's user owns or may write, as an older
// agent made them) is refused, since in it a link planted by the user would aim our writes and
// chowns, as root, at any file of the host.
Result<int> openOwnDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Status::Unavailable("cannot open " + dir + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !isAgentOwnedDir(st)) {
    ::close(fd);
    return Status::FailedPrecondition(dir +
                                      " is not the agent's own directory; refusing to use it");
  }
  return fd;
}

// Written whole under a temporary name, then renamed: sshd never reads half a file. Every step
// is relative to the directory's descriptor and follows no link, and the owner and mode are set
// on the open file, never by path.
Status writeFile(const std::string& dir, const std::string& name, const std::string& text,
                 uid_t uid, gid_t gid, unsigned mode) {
  auto dirFd = openOwnDirectory(dir);
  if (!dirFd.ok()) return dirFd.status();
  const std::string tmp = name + ".new";
  ::unlinkat(*dirFd, tmp.c_str(), 0);
  const int fd =
      ::openat(*dirFd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  Status st = Status::Ok();
  if (fd < 0) {
    st = Status::Unavailable("cannot write " + dir + "/" + tmp + ": " + std::strerror(errno));
  } else {
    size_t done = 0;
    while (st.ok() && done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) st = Status::Unavailable("cannot write " + dir + "/" + tmp);
      done += n > 0 ? static_cast<size_t>(n) : 0;
    }
    if (st.ok() && (::fchown(fd, uid, gid) != 0 || ::fchmod(fd, mode) != 0))
      st = Status::Unavailable("cannot give " + dir + "/" + tmp + " to uid " + std::to_string(uid) +
                               ": " + std::strerror(errno));
    ::close(fd);
    if (st.ok() && ::renameat(*dirFd, tmp.c_str(), *dirFd, name.c_str()) != 0)
      st = Status::Unavailable("cannot write " + dir + "/" + name + ": " + std::strerror(errno));
    if (!st.ok()) ::unlinkat(*dirFd, tmp.c_str(), 0);
  }
  ::close(*dirFd);
  return st;
}

// A small file of the session's directory, read without following a link; "" if absent.
std::string readOwnFile(const std::string& dir, const std::string& name, struct stat* st) {
  auto dirFd = openOwnDirectory(dir);
  if (!dirFd.ok()) return "";
  const int fd = ::openat(*dirFd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  ::close(*dirFd);
  if (fd < 0) return "";
  std::string out;
  struct stat own {};
  if (::fstat(fd, &own) == 0 && S_ISREG(own.st_mode)) {
    char buf[4096];
    ssize_t n;
    while (out.size() < 64 * 1024 && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
    if (st != nullptr) *st = own;
  }
  ::close(fd);
  return out;
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
                              const std::map<std::string, std::string>& env, int port,
                              const std::string& address, const std::string& forceCommand) {
  std::ostringstream c;
  if (port > 0) {
    c << "# Written by allot-agent: the session's own listening sshd (a direct port).\n"
      << "Port " << port << "\n";
    if (!address.empty()) c << "ListenAddress " << address << "\n";
  } else {
    c << "# Written by allot-agent at each connection; sshd runs with -i on allotd's tunnel.\n";
  }
  c << "HostKey " << dir << "/host_ed25519\n"
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
  if (!forceCommand.empty()) c << "ForceCommand " << forceCommand << "\n";
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
  if (int err = removeTree(dir); err != 0)
    return Status::Unavailable("cannot remove " + dir + ": " + std::strerror(err));
  if (!fs::create_directory(dir, ec))
    return Status::Unavailable("cannot create " + dir + ": " + ec.message());
  // The agent's, not the user's: sshd (as the user) reads the files in it, and only the agent
  // writes there (see writeFile).
  ALLOT_RETURN_IF_ERROR(giveTo(dir, ::geteuid(), ::getegid(), 0711));
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
    // The public key is the user's file (prepare gave it to them), in the agent's directory.
    struct stat st {};
    std::istringstream in(readOwnFile(dirOf(id), "host_ed25519.pub", &st));
    std::string type, blob;
    if (!(in >> type >> blob)) return;
    known = reported_.emplace(id, std::make_pair(loginName(st.st_uid), type + " " + blob)).first;
  }
  out.sshUser = known->second.first;
  out.sshHostKey = known->second.second;
  // Told once its sshd listens: a client given the port earlier would be refused.
  if (auto d = direct_.find(id); d != direct_.end() && d->second.listening) {
    out.sshDirect = (config_.directAddress.empty() || config_.directAddress == "0.0.0.0"
                         ? config_.hostname
                         : config_.directAddress) +
                    ":" + std::to_string(d->second.port);
    if (auto n = directConnections_.find(d->second.port); n != directConnections_.end())
      out.connections += n->second;
  }
}

int SessionSsh::freePort() const {
  for (int port = config_.directPortLo; port <= config_.directPortHi; ++port) {
    bool taken = false;
    for (const auto& [id, d] : direct_) taken = taken || d.port == port;
    if (taken) continue;
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (config_.directAddress.empty() ||
        ::inet_pton(AF_INET, config_.directAddress.c_str(), &addr.sin_addr) != 1)
      addr.sin_addr.s_addr = htonl(INADDR_ANY);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

void SessionSsh::keepDirect(int64_t id, int pid, const SessionIdentity& who,
                            const std::vector<std::string>& authorizedKeys,
                            const std::vector<std::string>& cgroups,
                            const std::optional<SessionContainer>& container) {
  if (!enabled() || config_.directPortLo <= 0 || pid <= 0) return;
  // Called at every status round: once a session has its entry, only a key change costs I/O.
  const std::string dir = dirOf(id);
  std::string keys;
  for (const auto& k : authorizedKeys) keys += k + "\n";
  auto it = direct_.find(id);
  if (it == direct_.end()) {
    // Started by an earlier agent: it still runs, in the session's cgroups.
    std::istringstream in(readOwnFile(dir, "direct", nullptr));
    int port = 0, started = 0;
    if (in >> port >> started && port > 0)
      it = direct_.emplace(id, Direct{port, static_cast<pid_t>(started), ""}).first;
  }
  if (it != direct_.end()) {
    if (it->second.port > 0 && it->second.keys != keys &&
        writeFile(dir, "authorized_keys", keys, who.uid, who.gid, 0600).ok())
      it->second.keys = keys;  // sshd reads it at each login
    return;
  }
  const std::string user = loginName(who.uid);
  if (user.empty() || !fs::exists(dir + "/host_ed25519")) {
    direct_[id] = Direct{0, 0, keys};  // prepare() gave it no SSH: none to start, ever
    return;
  }
  const int port = freePort();
  if (port == 0) {
    spdlog::warn("session {}: no free port in {}-{} for its sshd", id, config_.directPortLo,
                 config_.directPortHi);
    direct_[id] = Direct{0, 0, keys};  // not tried again for this session
    return;
  }
  // A session in an image: the bridge (root) runs the listening sshd and serves its logins.
  const std::string socket = dir + "/login-direct.sock";
  Result<std::string> force = std::string();
  if (container)
    force = config_.bridge.empty() ? Status::FailedPrecondition("no bridge") : forceCommand(socket);
  if (!force.ok()) {
    spdlog::warn("session {}: no sshd on a port of its own: {}", id, force.status().message());
    direct_[id] = Direct{0, 0, keys};
    return;
  }
  if (!writeFile(dir, "authorized_keys", keys, who.uid, who.gid, 0600).ok() ||
      !writeFile(dir, "sshd_direct_config",
                 sessionSshdConfig(dir, user, who.uid == 0, processEnvironment(pid), port,
                                   config_.directAddress, *force),
                 who.uid, who.gid, 0600)
           .ok())
    return;
  if (who.uid == 0) {
    std::error_code ec;
    fs::create_directories("/run/sshd", ec);
  }
  // Prepared before fork; after it, only async-signal-safe calls (as tunnel processes do).
  const std::string cfg = dir + "/sshd_direct_config";
  std::vector<std::string> argv = {config_.sshd, "-D", "-e", "-f", cfg};
  const bool switchUser = who.switchUser && !container;  // else the bridge switches for sshd
  if (container) argv = bridgeArgv(who, *container, socket, {}, argv);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> procs;
  for (const auto& g : cgroups) procs.push_back(g + "/cgroup.procs");
  const pid_t child = ::fork();
  if (child == 0) {
    for (const auto& p : procs) {
      int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(126);
      ::close(fd);
    }
    int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) ::dup2(null, 0);
    ::setsid();
    if (switchUser && (::setgroups(who.groups.size(), who.groups.data()) != 0 ||
                       ::setgid(who.gid) != 0 || ::setuid(who.uid) != 0))
      ::_exit(126);
    ::execve(args[0], args.data(), fixedEnvironment().data());
    ::_exit(127);
  }
  if (child < 0) return;
  direct_[id] = Direct{port, child, keys};
  (void)writeFile(dir, "direct", std::to_string(port) + " " + std::to_string(child) + "\n",
                  ::geteuid(), ::getegid(), 0644);
  spdlog::info("session {}: its sshd listens on port {}", id, port);
}

void SessionSsh::countDirectConnections(TimeMs now) {
  bool starting = false;  // a new sshd is looked for at every tick until it listens
  for (const auto& [id, d] : direct_) starting = starting || (d.port > 0 && !d.listening);
  if (direct_.empty() || (!starting && now - countedAt_ < 2000)) return;
  countedAt_ = now;
  std::set<int> listening;
  std::map<int, int> counts;
  for (const auto& [id, d] : direct_) {
    if (d.port > 0) counts[d.port] = 0;
  }
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      // "  sl  local_address rem_address   st ...": local "0100007F:5674", state 01 = ESTABLISHED
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      // ... and 0A = LISTEN.
      if (!(fields >> slot >> local >> remote >> state)) continue;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos) continue;
      const int port = static_cast<int>(std::strtol(local.c_str() + colon + 1, nullptr, 16));
      if (state == "0A") listening.insert(port);
      if (auto c = counts.find(port); state == "01" && c != counts.end()) ++c->second;
    }
  }
  directConnections_ = std::move(counts);
  for (auto& [id, d] : direct_) d.listening = listening.count(d.port) > 0;
}

Result<TunnelTarget> SessionSsh::connect(int64_t id, const SessionIdentity& who,
                                         const std::vector<std::string>& authorizedKeys,
                                         const std::vector<std::string>& cgroups,
                                         const std::map<std::string, std::string>& env,
                                         const std::optional<SessionContainer>& container) const {
  if (!enabled()) return Status::FailedPrecondition("this host offers no SSH (allot-agent --sshd)");
  if (container && config_.bridge.empty())
    return Status::FailedPrecondition(
        "this host offers no SSH into sessions in images (allot-ssh-bridge is missing)");
  const std::string dir = dirOf(id);
  const std::string user = loginName(who.uid);
  if (user.empty() || !fs::exists(dir + "/host_ed25519"))
    return Status::FailedPrecondition("session " + std::to_string(id) + " has no SSH on this host");
  if (authorizedKeys.empty())
    return Status::FailedPrecondition(
        "the session's owner has no SSH key; add one with `allot ssh-key add`");
  std::string keys;
  for (const auto& k : authorizedKeys) keys += k + "\n";
  ALLOT_RETURN_IF_ERROR(writeFile(dir, "authorized_keys", keys, who.uid, who.gid, 0600));
  if (who.uid == 0) {
    // sshd run by root wants its privilege-separation directory, which its service unit makes.
    std::error_code ec;
    fs::create_directories("/run/sshd", ec);
  }
  if (container) {
    // Each connection has its own files: connections that overlap never read each other's.
    std::random_device random;
    char token[17];
    std::snprintf(token, sizeof token, "%08x%08x", random(), random());
    const std::string socket = dir + "/login-" + token + ".sock";
    const std::string configName = std::string("sshd_config.") + token;
    auto force = forceCommand(socket);
    if (!force.ok()) return force.status();
    ALLOT_RETURN_IF_ERROR(writeFile(dir, configName,
                                    sessionSshdConfig(dir, user, who.uid == 0, env, 0, "", *force),
                                    who.uid, who.gid, 0600));
    // As root, in the session's cgroups: the bridge starts sshd as the owner itself.
    const std::string configPath = dir + "/" + configName;
    TunnelTarget t = TunnelTarget::process(bridgeArgv(
        who, *container, socket, {configPath}, {config_.sshd, "-i", "-e", "-f", configPath}));
    t.cgroups = cgroups;
    return t;
  }
  ALLOT_RETURN_IF_ERROR(writeFile(
      dir, "sshd_config", sessionSshdConfig(dir, user, who.uid == 0, env), who.uid, who.gid, 0600));
  TunnelTarget t = TunnelTarget::process({config_.sshd, "-i", "-e", "-f", dir + "/sshd_config"});
  if (who.switchUser) {
    t.uid = who.uid;
    t.gid = who.gid;
    t.groups = who.groups;
  }
  t.cgroups = cgroups;
  return t;
}

std::vector<std::string> SessionSsh::bridgeArgv(const SessionIdentity& who,
                                                const SessionContainer& container,
                                                const std::string& socket,
                                                const std::vector<std::string>& cleanup,
                                                const std::vector<std::string>& sshd) const {
  std::vector<std::string> argv = {config_.bridge,
                                   "serve",
                                   "--socket",
                                   socket,
                                   "--user",
                                   loginName(who.uid),
                                   "--container-state",
                                   container.state,
                                   "--container-config",
                                   container.config};
  if (who.switchUser) {
    std::string groups;
    for (gid_t g : who.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
    argv.insert(argv.end(), {"--uid", std::to_string(who.uid), "--gid", std::to_string(who.gid)});
    if (!groups.empty()) argv.insert(argv.end(), {"--groups", groups});
  }
  for (const auto& f : cleanup) argv.insert(argv.end(), {"--cleanup", f});
  if (!config_.sftpServer.empty()) argv.insert(argv.end(), {"--sftp", config_.sftpServer});
  argv.push_back("--");
  argv.insert(argv.end(), sshd.begin(), sshd.end());
  return argv;
}

Result<std::string> SessionSsh::forceCommand(const std::string& socket) const {
  // exec: the bridge itself is then the login's session leader, which may give its terminal up.
  const std::string command = "exec " + config_.bridge + " enter " + socket;
  // sshd hands it to the owner's shell: only words that need no quoting.
  if (command.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                "/._+- ") != std::string::npos)
    return Status::FailedPrecondition("cannot offer SSH into the container: the path " + command +
                                      " needs quoting");
  return command;
}

void SessionSsh::forget(int64_t id) {
  reported_.erase(id);
  if (auto d = direct_.find(id); d != direct_.end()) {
    // Its cgroups are swept with the session; this is for hosts without cgroups, and to reap it.
    // Only when it is still this session's: its command line names the session's directory
    // (sshd's configuration, the bridge's socket), which no other process's does.
    const pid_t pid = d->second.pid;
    std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
    const std::string line((std::istreambuf_iterator<char>(cmd)), {});
    const std::string argv0 = line.substr(0, line.find('\0'));
    if (pid > 0 && line.find(dirOf(id) + "/") != std::string::npos &&
        (argv0 == config_.sshd || (!config_.bridge.empty() && argv0 == config_.bridge))) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    direct_.erase(d);
  }
  if (int err = removeTree(dirOf(id)); err != 0)
    spdlog::warn("session={}: cannot remove {}: {}", id, dirOf(id), std::strerror(err));
}

}  // namespace allot::agent
