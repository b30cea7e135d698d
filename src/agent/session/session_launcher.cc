#include "agent/session/session_launcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "agent/exec/run_as.h"
#include "common/hex.h"

namespace allot::agent {

namespace fs = std::filesystem;

namespace {

// 32 random bytes as hex: the strength of Jupyter's own generated tokens (24 bytes) and more.
Result<std::string> randomToken() {
  unsigned char bytes[32];
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open /dev/urandom");
  ssize_t n = ::read(fd, bytes, sizeof bytes);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof bytes))
    return Status::Internal("short read of /dev/urandom");
  std::string out;
  for (unsigned char b : bytes) appendHexByte(out, b);
  return out;
}

bool isJupyter(const std::string& app) { return app.rfind("jupyter-", 0) == 0; }

// Bytes the files under `dir` take on disk (allocated blocks, as du counts them).
int64_t diskUsage(const std::string& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) bytes += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return bytes;
}

}  // namespace

Result<SessionStorage> SessionLauncher::storageOf(const model::DesiredJob& d) const {
  const model::DesiredSession& s = *d.session;
  if (s.storage == "scratch" || s.storage.empty())
    return SessionStorage{"scratch", config_.scratchRoot + "/" + std::to_string(d.id)};
  // allotd's names are safe in paths; this only refuses what could climb out of the root.
  if (s.user.empty() || s.user.find('/') != std::string::npos || s.user[0] == '.')
    return Status::InvalidArgument("bad user name '" + s.user + "' for a storage directory");
  if (s.storage == "local") return SessionStorage{"local", config_.homeRoot + "/" + s.user};
  if (s.storage == "shared") {
    if (s.sharedRoot.empty())
      return Status::FailedPrecondition("allotd has no shared storage configured");
    return SessionStorage{"shared", s.sharedRoot + "/" + s.user};
  }
  return Status::InvalidArgument("unknown storage kind '" + s.storage + "'");
}

SessionLauncher::SessionLauncher(SessionLauncherConfig config) : config_(std::move(config)) {}

std::string SessionLauncher::socketPath(const std::string& workPath) {
  return workPath + "/jupyter.sock";
}

std::string SessionLauncher::tokenPath(int64_t id) const {
  return config_.stateDir + "/" + std::to_string(id) + ".token";
}

std::optional<std::string> SessionLauncher::token(int64_t id) {
  if (auto it = tokens_.find(id); it != tokens_.end()) return it->second;
  std::ifstream in(tokenPath(id));
  std::string t;
  if (!(in >> t) || t.empty()) return std::nullopt;
  tokens_[id] = t;
  return t;
}

Status SessionLauncher::prepare(const model::DesiredJob& d, const std::string& workPath,
                                bool asRoot, uid_t uid, gid_t gid, JobSpec& spec) {
  const model::DesiredSession& session = *d.session;
  const std::string baseUrl = "/sessions/" + std::to_string(d.id) + "/";
  spec.env["ALLOT_SESSION_ID"] = std::to_string(d.id);
  spec.env["ALLOT_SESSION_URL"] = baseUrl;

  auto storage = storageOf(d);
  if (!storage.ok()) return storage.status();
  if (storage->kind != "scratch") {
    // The persistent kinds: made once, the owner's alone, and the session's home.
    const std::string root = fs::path(storage->path).parent_path().string();
    std::error_code ec;
    if (storage->kind == "shared" && !fs::is_directory(root, ec))
      return Status::FailedPrecondition("shared storage " + root + " is not mounted on this host");
    fs::create_directories(root, ec);
    if (storage->kind == "local") ::chmod(root.c_str(), 0711);  // owners reach only their own
    // Made here, or already there: on shared storage others may write the root, so the mkdir
    // itself says which (a directory swapped in before it is the owner's check below, one swapped
    // in after it is refused), and the new one is given as opened, never through a link.
    Status made = makeDirectoryFor(storage->path, uid, gid, 0700);
    if (!made.ok() && made.code() != Code::kAlreadyExists) return made;
    struct stat home {};
    const bool owners = made.ok() || (::lstat(storage->path.c_str(), &home) == 0 &&
                                      S_ISDIR(home.st_mode) && home.st_uid == uid);
    if (!owners) {
      return Status::FailedPrecondition(storage->path +
                                        " is not a directory of the session's "
                                        "owner; refusing to make it the session's home");
    }
    spec.env["HOME"] = storage->path;
    spec.binds.push_back(storage->path);  // a session in an image sees it where the host has it
  }
  spec.env["ALLOT_STORAGE"] = storage->path;
  spec.env["ALLOT_STORAGE_KIND"] = storage->kind;
  storage_[d.id] = *storage;
  if (!isJupyter(session.app)) return Status::Ok();

  auto made = randomToken();
  if (!made.ok()) return made.status();
  std::error_code ec;
  fs::create_directories(config_.stateDir, ec);
  ::chmod(config_.stateDir.c_str(), 0700);
  {
    // Written before the session starts, so that a restarted agent can still supply it.
    const std::string path = tokenPath(d.id);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Internal("cannot write " + path);
    const std::string line = *made + "\n";
    const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!ok) return Status::Internal("cannot write " + path);
  }
  tokens_[d.id] = *made;
  spec.env["JUPYTER_TOKEN"] = *made;

  // The classic notebook (6.x) is its own app, with its own option names.
  const std::string app = session.app == "jupyter-notebook" ? "NotebookApp" : "ServerApp";
  std::vector<std::string> options = {
      "--no-browser",
      "--" + app + ".base_url=" + baseUrl,
      "--" + app + ".sock=" + socketPath(workPath),
      "--" + app + ".sock_mode=0600",
      // Where notebooks live and kernels and terminals start: the session's storage.
      "--" + app + ".root_dir=" + storage->path,
  };
  if (session.app == "jupyter-notebook")
    options.back() = "--NotebookApp.notebook_dir=" + storage->path;
  if (asRoot) options.push_back("--allow-root");

  // The fork server serves Debian's own programs, named bare as the default profile does; a
  // profile with its own environment (a virtualenv's jupyter) runs as a plain program. Its client
  // is used even before the server is listening: it then runs Jupyter itself, with the same fix
  // of the kernels' state (allot-jupyter-forkserver, kernel_state_from_work_only).
  // A session in an image runs the image's Jupyter, never the host's fork server.
  const bool plainDebian =
      d.image.empty() && spec.command.size() == 1 &&
      (spec.command[0] == "jupyter-server" || spec.command[0] == "jupyter-notebook" ||
       spec.command[0] == "/usr/bin/jupyter-server" ||
       spec.command[0] == "/usr/bin/jupyter-notebook");
  if (plainDebian && !config_.forkServer.empty()) {
    std::vector<std::string> command = {config_.forkServer,
                                        "run",
                                        "--socket",
                                        config_.forkServerSock,
                                        "--app",
                                        session.app == "jupyter-notebook" ? "notebook" : "server",
                                        "--"};
    command.insert(command.end(), options.begin(), options.end());
    spec.command = std::move(command);
  } else {
    spec.command.insert(spec.command.end(), options.begin(), options.end());
  }
  return Status::Ok();
}

model::ActualSession SessionLauncher::report(const model::DesiredJob& d,
                                             const std::string& workPath) {
  const int64_t id = d.id;
  model::ActualSession out;
  if (!storage_.count(id)) {
    // A session this agent did not start (it restarted): the same place, worked out again.
    if (auto st = storageOf(d); st.ok()) storage_[id] = *st;
  }
  if (auto st = storage_.find(id); st != storage_.end()) out.storagePath = st->second.path;
  if (auto u = usage_.find(id); u != usage_.end()) out.storageBytes = u->second;
  if (!isJupyter(d.session->app)) {
    out.ready = true;
    out.activityKnown = true;  // nothing to ask: its use is its connections and GPUs
    return out;
  }
  if (auto t = token(id)) out.token = *t;
  struct stat st {};
  out.ready =
      !out.token.empty() && ::lstat(socketPath(workPath).c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  if (auto a = activity_.find(id); a != activity_.end()) {
    out.connections = a->second.connections;
    out.busyKernels = a->second.busyKernels;
    out.lastActivity = a->second.lastActivity;
    out.activityKnown = a->second.known;
  }
  return out;
}

void SessionLauncher::refreshActivity(
    TimeMs now, const std::vector<std::pair<int64_t, std::string>>& sessions) {
  if (probe_.valid()) {
    if (probe_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    for (auto& [id, a] : probe_.get()) {
      if (a) {
        activity_[id] = *a;
      } else {
        activity_[id].known = false;  // keeps what was last seen, marked stale
      }
    }
  }
  if (now - probedAt_ < kProbeEveryMs) return;
  probedAt_ = now;
  std::vector<std::tuple<int64_t, std::string, std::string>> targets;
  for (const auto& [id, workPath] : sessions) {
    if (auto t = token(id)) targets.emplace_back(id, socketPath(workPath), *t);
  }
  if (targets.empty()) return;
  probe_ = std::async(std::launch::async, [targets] {
    std::map<int64_t, std::optional<JupyterActivity>> out;
    for (const auto& [id, socket, token] : targets) out[id] = probeJupyter(socket, id, token);
    return out;
  });
}

void SessionLauncher::forget(int64_t id) {
  tokens_.erase(id);
  activity_.erase(id);
  usage_.erase(id);
  storageSeenAt_.erase(id);
  std::error_code ec;
  fs::remove(tokenPath(id), ec);
  // Scratch storage is the job's scratch directory, which the executor's forget() removes (in
  // the background when it is large); local and shared storage are kept.
  storage_.erase(id);
}

void SessionLauncher::refreshUsage(TimeMs now) {
  if (measuring_.valid()) {
    if (measuring_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    for (const auto& [id, bytes] : measuring_.get()) {
      if (storage_.count(id)) usage_[id] = bytes;
    }
  }
  // New sessions are measured often for their first minute (what they start with shows at
  // once), then every kUsageEveryMs.
  bool fresh = false;
  for (const auto& [id, st] : storage_) {
    auto [it, added] = storageSeenAt_.try_emplace(id, now);
    if (now - it->second < 60'000) fresh = true;
  }
  if (storage_.empty() || now - measuredAt_ < (fresh ? kProbeEveryMs : kUsageEveryMs)) return;
  measuredAt_ = now;
  std::map<int64_t, std::string> dirs;
  for (const auto& [id, st] : storage_) dirs[id] = st.path;
  measuring_ = std::async(std::launch::async, [dirs] {
    std::map<int64_t, int64_t> out;
    for (const auto& [id, dir] : dirs) out[id] = diskUsage(dir);
    return out;
  });
}

}  // namespace allot::agent
