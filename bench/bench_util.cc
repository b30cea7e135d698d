#include "bench_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>

namespace allot::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

Result<ChildProcess> ChildProcess::start(const std::vector<std::string>& argv,
                                         const std::string& stderrPath) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return Status::Unavailable(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    if (!stderrPath.empty()) {
      int err = ::open(stderrPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
    }
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  ChildProcess c;
  c.pid_ = pid;
  c.stdoutFd_ = fds[0];
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      stdoutFd_(std::exchange(o.stdoutFd_, -1)),
      pending_(std::move(o.pending_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    stop();
    pid_ = std::exchange(o.pid_, -1);
    stdoutFd_ = std::exchange(o.stdoutFd_, -1);
    pending_ = std::move(o.pending_);
  }
  return *this;
}

ChildProcess::~ChildProcess() { stop(); }

Result<std::string> ChildProcess::waitForLine(const std::string& prefix,
                                              std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n')) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (line.rfind(prefix, 0) == 0) return line;
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Status::Unavailable("timed out waiting for '" + prefix + "'");
    pollfd p{stdoutFd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(stdoutFd_, buf, sizeof buf);
    if (n <= 0) return Status::Unavailable("process exited before printing '" + prefix + "'");
    pending_.append(buf, static_cast<size_t>(n));
  }
}

void ChildProcess::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    bool exited = false;
    for (int i = 0; i < 1000 && !exited; ++i) {  // 10 s
      exited = ::waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
  if (stdoutFd_ >= 0) ::close(std::exchange(stdoutFd_, -1));
}

Result<Allotd> startAllotd(const std::string& allotdPath, const std::string& dataDir,
                           const std::vector<std::string>& extraArgs) {
  Allotd d;
  std::error_code ec;
  std::filesystem::create_directories(dataDir, ec);  // so that its log can go there
  if (ec) return Status::Unavailable("cannot create " + dataDir + ": " + ec.message());
  std::vector<std::string> argv = {allotdPath, "--listen",    "127.0.0.1:0", "--data-dir",
                                   dataDir,    "--log-level", "warn"};
  argv.insert(argv.end(), extraArgs.begin(), extraArgs.end());
  auto proc = ChildProcess::start(argv, dataDir + "/allotd.log");
  if (!proc.ok()) return proc.status();
  d.process = std::move(proc).value();
  auto line = d.process.waitForLine("listening http://127.0.0.1:", std::chrono::seconds(60));
  if (!line.ok())
    return line.status().withContext("allotd did not start (see " + dataDir + "/allotd.log)");
  d.port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  std::ifstream tok(dataDir + "/admin.token");
  if (!(tok >> d.adminToken)) return Status::Unavailable("cannot read " + dataDir + "/admin.token");
  return d;
}

Result<ChildProcess> startSimAgent(const std::string& agentPath, const Allotd& server,
                                   const std::string& name, const std::string& gpus,
                                   const std::string& workDir,
                                   const std::vector<std::string>& extraFlags) {
  auto join = httpRequest(server.port, "POST", "/api/v1/hosts/join-tokens", server.adminToken,
                          R"({"ttl":"10m"})");
  if (!join.ok()) return join.status();
  auto reply = nlohmann::json::parse(join->body, nullptr, false);
  if (join->status != 201 || !reply.contains("token"))
    return Status::Unavailable("cannot create a join token: " + join->body);
  std::vector<std::string> argv = {
      agentPath, "--server",    server.url(), "--join-token", reply["token"].get<std::string>(),
      "--name",  name,          "--gpus",     gpus,           "--work-dir",
      workDir,   "--log-level", "warn"};
  argv.insert(argv.end(), extraFlags.begin(), extraFlags.end());
  return ChildProcess::start(argv, workDir + ".log");
}

Result<HttpReply> httpRequest(uint16_t port, const std::string& method, const std::string& target,
                              const std::string& token, const std::string& body) {
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 30);
    http::read(stream, buf, parser);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return HttpReply{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
  } catch (const std::exception& e) {
    return Status::Unavailable(method + " " + target + ": " + e.what());
  }
}

nlohmann::json callOrExit(uint16_t port, const std::string& method, const std::string& target,
                          const nlohmann::json& body, const std::string& token) {
  auto r = httpRequest(port, method, target, token, body.is_null() ? "" : body.dump());
  if (!r.ok() || r->status >= 300) {
    std::cerr << method << " " << target << ": " << (r.ok() ? r->body : r.status().toString())
              << "\n";
    std::exit(1);
  }
  return nlohmann::json::parse(r->body);
}

double metricValue(uint16_t port, const std::string& token, const std::string& series) {
  auto r = httpRequest(port, "GET", "/metrics", token, "");
  if (!r.ok() || r->status != 200) return -1;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

Result<std::string> makeScratchDir(const std::string& prefix) {
  const char* root = std::getenv("ALLOT_BENCH_DIR");
  std::string tmpl = std::string(root != nullptr ? root : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status::Unavailable("mkdtemp " + tmpl + ": " + std::strerror(errno));
  // A root agent runs jobs as their owners, who must pass through (and it checks they can).
  ::chmod(tmpl.c_str(), 0711);
  return tmpl;
}

void removeTree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

std::string selfDir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

int64_t procStatusKib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  }
  return -1;
}

double procCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = all.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream rest(all.substr(close + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> f; ++i) {  // fields 14 and 15 are utime and stime
    if (i == 14) utime = std::atof(f.c_str());
    if (i == 15) stime = std::atof(f.c_str());
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double percentile(std::vector<double>& samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  if (rank == 0) rank = 1;
  return samples[std::min(rank, samples.size()) - 1];
}

double loadAverage1() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : -1;
}

std::string machineLine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, modelName = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      modelName = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::ostringstream out;
  out << std::thread::hardware_concurrency() << " CPUs (" << modelName << "), load average "
      << loadAverage1();
  return out.str();
}

}  // namespace allot::bench
