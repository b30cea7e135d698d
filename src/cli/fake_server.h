#pragma once
// FakeServer: a tiny HTTP/1.1 server on 127.0.0.1 and an OS-chosen port, for the CLI's tests. It
// answers each request with a handler, honours keep-alive, serves one connection at a time on its
// own thread, and records what it was sent. Test-only.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace allot::cli::testing {

struct FakeRequest {
  std::string method;
  std::string target;
  std::string body;
  std::string authorization;
};

struct FakeResponse {
  int status = 200;
  std::string body;
  std::map<std::string, std::string> headers;
  bool close = false;   // close the connection after this reply, saying so
  bool hangUp = false;  // close it after this reply without saying so, like an idle timeout
};

class FakeServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;
  explicit FakeServer(Handler handler);
  ~FakeServer();

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  std::vector<FakeRequest> requests() const;

 private:
  struct Impl;
  void serve();
  std::unique_ptr<Impl> impl_;
  Handler handler_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> currentFd_{-1};
  mutable std::mutex mu_;
  std::vector<FakeRequest> requests_;  // guarded by mu_
  std::thread thread_;
};

// A JSON reply.
FakeResponse jsonReply(int status, const std::string& body);

}  // namespace allot::cli::testing
