#include "agent/session/jupyter_probe.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/time_format.h"

namespace allot::agent {

namespace {

// One GET over the Unix socket with Connection: close; the body of a 200, else nullopt.
std::optional<std::string> get(const std::string& socketPath, const std::string& target,
                               const std::string& token, int timeoutMs) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  timeval tv{timeoutMs / 1000, (timeoutMs % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socketPath.size() >= sizeof addr.sun_path) {
    ::close(fd);
    return std::nullopt;
  }
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socketPath.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  // The socket is in the session owner's working directory: answered by the owner's server, or
  // not asked (a link there could lead this root process, and the token, to anyone's socket).
  const std::string dir = socketPath.substr(0, socketPath.rfind('/'));
  struct stat st {};
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::lstat(dir.c_str(), &st) != 0 ||
      ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != st.st_uid) {
    ::close(fd);
    return std::nullopt;
  }
  const std::string req = "GET " + target +
                          " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                          "Authorization: token " +
                          token + "\r\n\r\n";
  bool ok = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  std::string resp;
  char buf[8192];
  // One deadline for the whole answer: SO_RCVTIMEO bounds each recv alone, and a server that
  // sends a byte at a time, each within it, held this loop (and the host's idle data) for ever.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (ok) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd readable{fd, POLLIN, 0};
    const int ready = left > 0 ? ::poll(&readable, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      ok = false;  // out of time: what came so far is not the whole answer
      break;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
    if (resp.size() > (1 << 20)) break;  // a status is small; something else is answering
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  if (resp.rfind("HTTP/1.1 200", 0) != 0) return std::nullopt;
  const size_t body = resp.find("\r\n\r\n");
  if (body == std::string::npos) return std::nullopt;
  // Tornado answers these small JSON documents with a Content-Length, not chunked.
  return resp.substr(body + 4);
}

}  // namespace

std::optional<JupyterActivity> probeJupyter(const std::string& socketPath, int64_t sessionId,
                                            const std::string& token, int timeoutMs) {
  const std::string base = "/sessions/" + std::to_string(sessionId) + "/api/";
  auto status = get(socketPath, base + "status", token, timeoutMs);
  // no_track_activity: our own look must not count as use (api/status never does).
  auto kernels = status ? get(socketPath, base + "kernels?no_track_activity=1", token, timeoutMs)
                        : std::nullopt;
  if (!status || !kernels) return std::nullopt;
  return jupyterActivityOf(*status, *kernels);
}

std::optional<JupyterActivity> jupyterActivityOf(std::string_view status,
                                                 std::string_view kernels) {
  // The session owner's server wrote these: bounded like any foreign JSON, and each field read
  // only when it has the type asked for. (nlohmann's value() threw on another type, and cast a
  // fraction such as 1e30 into the int: a throw here ended the agent's connection loop.)
  auto s = parseBoundedJson(status);
  auto k = parseBoundedJson(kernels);
  if (!s.is_object() || !k.is_array()) return std::nullopt;
  JupyterActivity a;
  if (auto c = s.find("connections"); c != s.end() && c->is_number_integer())
    a.connections = static_cast<int>(std::clamp<int64_t>(c->get<int64_t>(), 0, 1'000'000));
  for (const auto& kernel : k) {
    if (!kernel.is_object()) continue;
    auto state = kernel.find("execution_state");
    if (state != kernel.end() && state->is_string() && state->get<std::string>() == "busy")
      ++a.busyKernels;
  }
  if (auto last = s.find("last_activity"); last != s.end() && last->is_string()) {
    auto t = parseTime(last->get<std::string>(), 0);
    if (t.ok()) a.lastActivity = *t;
  }
  return a;
}

}  // namespace allot::agent
