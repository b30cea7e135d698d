#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace allot::it {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error(msg); }

std::vector<char*> cStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string lastLines(const std::string& text, size_t n) {
  size_t pos = text.size();
  for (size_t i = 0; i < n && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

}  // namespace

// This process's environment, less the variables that would point the CLI elsewhere, plus
// `extra`.
std::vector<std::string> childEnv(const std::vector<std::string>& extra) {
  static const std::set<std::string> kDropped = {"ALLOT_SERVER", "ALLOT_TOKEN", "ALLOT_CONFIG",
                                                 "ALLOT_CA_FILE", "XDG_CONFIG_HOME"};
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    if (kDropped.count(entry.substr(0, entry.find('=')))) continue;
    out.push_back(entry);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::string binPath(const std::string& name) { return std::string(ALLOT_BIN_DIR) + "/" + name; }

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot write " + tmp);
    out << content;
  }
  fs::rename(tmp, path);  // readers see all of it or nothing
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string textOf(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string joinStrings(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  // /proc/PID/stat: "pid (comm) S ..."; comm may hold spaces and parentheses.
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

// ---- Process -----------------------------------------------------------------------------

std::unique_ptr<Process> Process::spawn(const std::vector<std::string>& argvIn,
                                        const std::string& stdoutPath,
                                        const std::string& stderrPath,
                                        const std::vector<std::string>& envIn) {
  std::unique_ptr<Process> p(new Process());
  p->argv0_ = fs::path(argvIn.at(0)).filename().string();
  p->stdoutPath_ = stdoutPath;
  p->stderrPath_ = stderrPath;
  std::vector<std::string> argv = argvIn, env = envIn;
  auto cargv = cStrings(argv), cenv = cStrings(env);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdoutPath.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderrPath.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Default dispositions and an empty mask, whatever the test runner set.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  int rc = posix_spawn(&p->pid_, argv[0].c_str(), &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) fail("cannot start " + argv[0] + ": " + std::strerror(rc));
  return p;
}

Process::~Process() {
  if (!done_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait();
  }
}

void Process::reaped(int status) {
  done_ = true;
  exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool Process::running() {
  if (done_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) reaped(status);
  return !done_;
}

void Process::signal(int sig) {
  if (!done_) ::kill(pid_, sig);
}

int Process::wait() {
  while (!done_) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, 0);
    if (r == pid_)
      reaped(status);
    else if (r < 0 && errno != EINTR)
      fail("waitpid failed: " + std::string(std::strerror(errno)));
  }
  return exit_;
}

std::optional<int> Process::waitFor(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
  return exit_;
}

// ---- CLI and HTTP results ----------------------------------------------------------------

json CliResult::parsed() const {
  auto j = json::parse(out, nullptr, false);
  if (j.is_discarded()) fail("not JSON on stdout: " + describe());
  return j;
}

std::string CliResult::describe() const {
  return "`" + command + "` exited " + std::to_string(code) + "\n--- stdout:\n" + out +
         "\n--- stderr:\n" + err;
}

json HttpResult::parsed() const { return json::parse(body, nullptr, false); }

HttpResult httpRequest(uint16_t port, const std::string& method, const std::string& target,
                       const std::string& body, const std::string& token,
                       const std::map<std::string, std::string>& headers) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) fail("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " + ec.message());

  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.keep_alive(false);
  req.body() = body;
  req.prepare_payload();
  // A server refusing a large body may reply and close before reading all of it: the write may
  // fail while the reply is already waiting to be read.
  http::write(socket, req, ec);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(socket, buffer, parser, ec);
  if (ec && !parser.is_header_done()) {
    fail(method + " " + target + ": no reply: " + ec.message());
  }
  auto res = parser.release();
  HttpResult out;
  out.status = static_cast<int>(res.result_int());
  out.body = res.body();
  for (const auto& f : res) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(f.value());
  }
  return out;
}

// ---- TestCluster -------------------------------------------------------------------------

void TestCluster::SetUp() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/allot-it-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    fail("mkdtemp failed: " + std::string(std::strerror(errno)));
  root_ = tmpl;
  // Traversable (not listable), as an agent's directory is on a real host, where session owners
  // reach the fork server's socket: its discovery child (nobody) then works next to the socket,
  // inside this directory, and nothing is left in /tmp when a test kills it.
  ::chmod(root_.c_str(), 0711);
  fs::create_directories(path("cli"));
  fs::create_directories(path("agents"));
  fs::create_directories(path("proc"));
  startServer();
}

// An agent keeps its jobs' cgroups under its subtree (cgroupName) in each hierarchy it was started
// in (this process's own, which it inherits). Once its processes are gone, the empty groups are
// removed so repeated runs leave nothing behind in /sys/fs/cgroup: every subtree whose name starts
// with `prefix`, the cluster's (cgroupName), so that the agents a test spawns itself (JoinTest's)
// are cleaned up with those of agents_.
namespace {

// Removes one agent's subtree, after killing what is left in it.
void removeSubtree(const fs::path& base) {
  std::error_code ec;
  // Children first; rmdir (not remove_all) because a cgroup's files cannot be unlinked.
  std::vector<fs::path> dirs;
  for (auto it = fs::recursive_directory_iterator(base, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec)) dirs.push_back(it->path());
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) {
    return a.string().size() > b.string().size();
  });
  dirs.push_back(base);
  // What is still in the groups is this cluster's: a job's process that killStrayProcesses
  // could not tell by its command line or directory (one in a container, whose directory is the
  // image's) would keep its group busy for as long as it runs, and the group would be left.
  for (const auto& d : dirs) {
    std::ifstream procs(d / "cgroup.procs");
    for (pid_t pid; procs >> pid;) {
      if (pid > 0) ::kill(pid, SIGKILL);
    }
  }
  // A process just killed leaves its group busy until it has been reaped (by init, for a job
  // whose agent is gone): retry for a while, and say so if it is still busy.
  for (const auto& d : dirs) {
    int tries = 0;
    while (::rmdir(d.c_str()) != 0 && errno == EBUSY && tries < 500) {
      std::this_thread::sleep_for(10ms);
      ++tries;
    }
    if (tries == 500) std::cerr << "cgroup " << d << " still busy after 5 s; left behind\n";
  }
}

void removeClusterCgroups(const std::string& prefix) {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    std::string mount = controllers.empty() ? "unified" : controllers;
    if (mount.rfind("name=", 0) == 0) mount = mount.substr(5);
    fs::path parent = fs::path("/sys/fs/cgroup") / mount;
    parent += line.substr(second + 1);
    std::error_code ec;
    std::vector<fs::path> subtrees;
    for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      if (it->path().filename().string().rfind(prefix, 0) == 0 && it->is_directory(ec))
        subtrees.push_back(it->path());
    }
    for (const auto& base : subtrees) removeSubtree(base);
  }
}

}  // namespace

std::string TestCluster::cgroupName(const std::string& name) const {
  return fs::path(root_).filename().string() + "-" + name;
}

void TestCluster::TearDown() {
  if (HasFailure()) dumpLogs();
  for (auto& [name, agent] : agents_) agent.proc.reset();
  server_.reset();
  killStrayProcesses();
  removeClusterCgroups(cgroupName(""));
  const char* keep = std::getenv("ALLOT_IT_KEEP");
  if (keep && *keep) {
    std::cerr << "keeping " << root_ << "\n";
    return;
  }
  std::error_code ec;
  fs::remove_all(root_, ec);
}

void TestCluster::dumpLogs() {
  std::cerr << "---- logs of " << root_ << " (ALLOT_IT_KEEP=1 keeps the dir)\n";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path("proc"))) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string text = readFile(f);
    if (text.empty()) continue;
    std::cerr << "== " << fs::path(f).filename().string() << " (last lines)\n"
              << lastLines(text, 30) << "\n";
  }
}

// Jobs outlive their agents by design; whatever still runs from this test's dir goes now.
void TestCluster::killStrayProcesses() {
  const pid_t self = ::getpid();
  for (int round = 0; round < 50; ++round) {
    int found = 0;
    DIR* d = ::opendir("/proc");
    if (!d) return;
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0 || pid == self) continue;
      std::string proc = std::string("/proc/") + e->d_name;
      std::string cmdline = readFile(proc + "/cmdline");
      std::error_code ec;
      std::string cwd = fs::read_symlink(proc + "/cwd", ec).string();
      bool ours = cmdline.find(root_) != std::string::npos || cwd.rfind(root_, 0) == 0;
      if (ours && !processGone(static_cast<pid_t>(pid))) {
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        ++found;
      }
    }
    ::closedir(d);
    if (found == 0) return;
    std::this_thread::sleep_for(20ms);
  }
}

void TestCluster::startServer() {
  int n = ++serverStarts_;
  std::vector<std::string> argv = {binPath("allotd"), "--listen",
                                   "127.0.0.1:" + std::to_string(port_), "--data-dir",
                                   path("data")};
  for (const auto& f : serverFlags()) argv.push_back(f);
  std::string out = path("proc/allotd." + std::to_string(n) + ".out");
  std::string err = path("proc/allotd." + std::to_string(n) + ".err");
  server_ = Process::spawn(argv, out, err, childEnv({}));

  // "listening http://127.0.0.1:PORT", or https:// when allotd serves TLS.
  const std::string prefix = "listening ";
  const std::string hostPart = "://127.0.0.1:";
  std::string line;
  bool up = it::waitFor([&] {
    std::string text = server_->stdoutText();
    auto pos = text.find(prefix);
    auto eol = pos == std::string::npos ? pos : text.find('\n', pos);
    if (eol != std::string::npos) {
      line = text.substr(pos, eol - pos);
      return true;
    }
    return !server_->running();
  });
  if (!up || line.empty()) {
    fail("allotd did not start: " + trim(server_->stderrText()));
  }
  const auto hostAt = line.find(hostPart);
  if (hostAt == std::string::npos) fail("allotd printed an unexpected address: " + line);
  const std::string scheme = line.substr(prefix.size(), hostAt - prefix.size());
  uint16_t port = static_cast<uint16_t>(std::stoi(line.substr(hostAt + hostPart.size())));
  if (port_ != 0 && port != port_) fail("allotd came back on another port: " + line);
  port_ = port;
  url_ = scheme + "://127.0.0.1:" + std::to_string(port_);
  if (n == 1) {
    adminToken_ = trim(readFile(path("data/admin.token")));
    if (adminToken_.empty()) fail("no admin token in " + path("data/admin.token"));
    // allotd prints the token on the line after "listening": on a loaded machine the test can
    // read between the two writes, so wait (bounded) for it.
    std::string shown;
    it::waitFor([&] {
      shown = server_->stdoutText();
      return shown.find(adminToken_) != std::string::npos;
    });
    if (shown.find("admin token") == std::string::npos ||
        shown.find(adminToken_) == std::string::npos) {
      fail("allotd's first start did not print the admin token:\n" + shown);
    }
  }
}

void TestCluster::killServer() {
  server_->signal(SIGKILL);
  server_->wait();
}

void TestCluster::restartServer() {
  killServer();
  startServer();
}

void TestCluster::restartServerGracefully() {
  server_->signal(SIGTERM);
  if (!server_->waitFor(std::chrono::seconds(30))) killServer();
  startServer();
}

std::string TestCluster::fetchJoinToken() {
  if (joinToken_.empty()) {
    auto j = cliJson(adminToken_, {"host", "join-token", "--uses", "1000"});
    joinToken_ = j.at("token").get<std::string>();
  }
  return joinToken_;
}

void TestCluster::spawnAgent(const std::string& name, Agent& agent, bool join) {
  int n = ++agent.starts;
  std::vector<std::string> argv = {binPath("allot-agent"),
                                   "--server",
                                   url_,
                                   "--name",
                                   name,
                                   "--gpus",
                                   agent.gpus,
                                   "--work-dir",
                                   agent.workDir,
                                   "--cgroup-name",
                                   cgroupName(name)};
  const auto flags = agentFlags();
  // Jobs of most tests write into the test's own directory, which only root may enter: they run
  // as the agent's user unless a test asks for owners (runas_test.cc).
  if (std::find(flags.begin(), flags.end(), "--run-as-owner") == flags.end()) {
    argv.push_back("--run-as-owner");
    argv.push_back("off");
  }
  for (const auto& f : flags) argv.push_back(f);
  if (join) {
    argv.push_back("--join-token");
    argv.push_back(fetchJoinToken());
  }
  std::vector<std::string> wrapped = agentWrapper();
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  std::string base = path("proc/agent-" + name + "." + std::to_string(n));
  agent.proc = Process::spawn(wrapped, base + ".out", base + ".err", childEnv({}));
}

void TestCluster::startAgent(const std::string& name, const std::string& gpus) {
  if (agents_.count(name)) fail("agent " + name + " already started");
  Agent& agent = agents_[name];
  agent.workDir = path("agents/" + name);
  agent.gpus = gpus;
  spawnAgent(name, agent, /*join=*/true);
  bool online = it::waitFor([&] {
    if (!agent.proc->running()) return true;
    auto hosts = cliJson(adminToken_, {"host", "list"});
    for (const auto& h : hosts) {
      // Online, and commissioned: a new host takes work once its health check passed.
      if (textOf(h, "name") == name && textOf(h, "state") == "online" &&
          textOf(h, "admin_state") == "available")
        return true;
    }
    return false;
  });
  if (!agent.proc->running()) {
    fail("allot-agent " + name + " exited: " + trim(agent.proc->stderrText()));
  }
  if (!online) fail("host " + name + " did not come online and commissioned");
}

void TestCluster::killAgent(const std::string& name) {
  auto& agent = agents_.at(name);
  agent.proc->signal(SIGKILL);
  agent.proc->wait();
}

void TestCluster::restartAgent(const std::string& name) {
  auto& agent = agents_.at(name);
  if (agent.proc->running()) killAgent(name);
  spawnAgent(name, agent, /*join=*/false);
}

std::unique_ptr<Process> TestCluster::spawnCliAs(const std::string& token,
                                                 const std::vector<std::string>& args,
                                                 const std::string& name) {
  std::vector<std::string> argv = {binPath("allot"), "--server", url_, "--token", token};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string base = path("cli/" + name);
  return Process::spawn(argv, base + ".out", base + ".err",
                        childEnv({"ALLOT_CONFIG=" + path("cli/no-config.json")}));
}

CliResult TestCluster::cliAs(const std::string& token, const std::vector<std::string>& args) {
  int n = ++cliRuns_;
  std::vector<std::string> argv = {binPath("allot"), "--server", url_};
  if (!token.empty()) {
    argv.push_back("--token");
    argv.push_back(token);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  std::string base = path("cli/" + std::to_string(n));
  // No config file: only the flags above say where the server is.
  auto proc = Process::spawn(argv, base + ".out", base + ".err",
                             childEnv({"ALLOT_CONFIG=" + path("cli/no-config.json")}));
  CliResult r;
  r.command = "allot " + joinStrings(args, " ");
  auto code = proc->waitFor(60s);
  if (!code) fail(r.command + ": still running after 60 s");
  r.code = *code;
  r.out = proc->stdoutText();
  r.err = proc->stderrText();
  std::error_code ec;
  fs::remove(base + ".out", ec);
  fs::remove(base + ".err", ec);
  return r;
}

json TestCluster::cliJson(const std::string& token, const std::vector<std::string>& args) {
  // First: after a `--` it would belong to the job's command.
  std::vector<std::string> withJson = {"-o", "json"};
  withJson.insert(withJson.end(), args.begin(), args.end());
  auto r = cliAs(token, withJson);
  if (r.code != 0) fail(r.describe());
  return r.parsed();
}

void TestCluster::createTeam(const std::string& team) {
  auto t = cliJson(adminToken_, {"team", "create", team});
  if (textOf(t, "name") != team) fail("team create returned " + t.dump());
}

std::string TestCluster::createUser(const std::string& user, const std::string& team,
                                    const std::string& role) {
  auto u = cliJson(adminToken_, {"user", "create", user, "--team", team, "--role", role});
  if (!u.contains("token") || !u["token"].is_string()) fail("user create returned " + u.dump());
  return u["token"].get<std::string>();
}

std::pair<std::string, std::string> TestCluster::createTwoTeams(const std::string& team1,
                                                                const std::string& user1,
                                                                const std::string& team2,
                                                                const std::string& user2) {
  createTeam(team1);
  createTeam(team2);
  std::string first = createUser(user1, team1);
  return {first, createUser(user2, team2)};
}

std::string TestCluster::runToEnd(const std::string& token, const std::string& script,
                                  const std::vector<std::string>& flags) {
  int64_t id = submit(token, flags, {"sh", "-c", script + "; echo end-of-probe"});
  json last;
  EXPECT_TRUE(waitFor([&] {
    last = job(token, id);
    std::string s = textOf(last, "state");
    return s == "succeeded" || s == "failed";
  })) << last.dump();
  std::string out;
  // The last of the output may reach allotd after the job's end.
  EXPECT_TRUE(waitFor([&] {
    out = logs(token, id);
    return out.find("end-of-probe") != std::string::npos;
  })) << out;
  return out;
}

int64_t TestCluster::submit(const std::string& token, const std::vector<std::string>& flags,
                            const std::vector<std::string>& command) {
  std::vector<std::string> args = {"run"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  auto j = cliJson(token, args);
  if (!j.contains("id") || !j["id"].is_number_integer()) fail("run returned " + j.dump());
  return j["id"].get<int64_t>();
}

json TestCluster::job(const std::string& token, int64_t id) {
  return cliJson(token, {"job", "show", std::to_string(id)});
}

std::string TestCluster::logs(const std::string& token, int64_t id) {
  auto r = cliAs(token, {"job", "logs", std::to_string(id)});
  if (r.code != 0) fail(r.describe());
  return r.out;
}

json TestCluster::host(const std::string& name) {
  return cliJson(adminToken_, {"host", "show", name});
}

bool TestCluster::waitForSessionState(const std::string& token, const std::string& id,
                                      const std::string& state, json* last,
                                      std::chrono::milliseconds timeout) {
  json seen;
  const bool ok = it::waitFor(
      [&] {
        seen = cliJson(token, {"session", "show", id});
        return textOf(seen, "state") == state;
      },
      timeout);
  if (last) *last = seen;
  if (!ok)
    ADD_FAILURE() << "session " << id << " never became " << state << "; last seen " << seen.dump();
  return ok;
}

bool TestCluster::waitForJobState(const std::string& token, int64_t id, const std::string& state,
                                  json* last, std::chrono::milliseconds timeout) {
  json seen;
  static const std::set<std::string> kEnded = {"succeeded", "failed", "cancelled", "lost"};
  bool ok = it::waitFor(
      [&] {
        seen = job(token, id);
        std::string now = textOf(seen, "state");
        // An ended job does not change again: stop early when it ended otherwise.
        return now == state || (kEnded.count(now) && !kEnded.count(state));
      },
      timeout);
  ok = ok && textOf(seen, "state") == state;
  if (last) *last = seen;
  if (!ok)
    ADD_FAILURE() << "job " << id << " never became " << state << "; last seen " << seen.dump();
  return ok;
}

bool TestCluster::waitForHostState(const std::string& name, const std::string& state) {
  json seen;
  bool ok = it::waitFor([&] {
    seen = host(name);
    return textOf(seen, "state") == state;
  });
  if (!ok)
    ADD_FAILURE() << "host " << name << " never became " << state << "; last seen " << seen.dump();
  return ok;
}

}  // namespace allot::it
