// WebhookSender against a real loopback receiver: retries after a failure, stops at success,
// gives up after its tries.

#include "api/webhook.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

namespace allot::api {
namespace {

// Answers the given statuses in turn, one connection each, keeping each request's text.
class Receiver {
 public:
  explicit Receiver(std::vector<int> statuses) : statuses_(std::move(statuses)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (int status : statuses_) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::string req;
        char buf[4096];
        // The sender closes nothing until answered; read until the JSON body's end.
        while (req.find("\r\n\r\n") == std::string::npos || req.back() != '}') {
          ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          req.append(buf, static_cast<size_t>(n));
        }
        requests_.push_back(req);
        std::string res = "HTTP/1.1 " + std::to_string(status) +
                          " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!::send(c, res.data(), res.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~Receiver() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  // Only after the sender is done (io.run() returned): the thread has answered them all.
  const std::vector<std::string>& requests() const { return requests_; }

 private:
  std::vector<int> statuses_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::vector<std::string> requests_;
};

WebhookOptions fast() {
  WebhookOptions o;
  o.timeout = std::chrono::seconds(5);
  o.backoff = std::chrono::milliseconds(10);
  return o;
}

TEST(Webhook, RetriesAfterAFailureAndStopsAtSuccess) {
  Receiver r({500, 204});
  boost::asio::io_context io;
  WebhookSender sender(io, fast());
  sender.send("http://127.0.0.1:" + std::to_string(r.port()) + "/hook/s3cret?x=1",
              R"({"kind":"allocation_idle"})");
  io.run();  // returns once the delivery is done
  ASSERT_EQ(r.requests().size(), 2u);
  for (const auto& req : r.requests()) {
    EXPECT_EQ(req.rfind("POST /hook/s3cret?x=1 HTTP/1.1\r\n", 0), 0u) << req;
    EXPECT_NE(req.find("Content-Type: application/json"), std::string::npos) << req;
    EXPECT_NE(req.find(R"({"kind":"allocation_idle"})"), std::string::npos) << req;
  }
}

TEST(Webhook, GivesUpAfterItsTries) {
  Receiver r({503, 503, 503});
  boost::asio::io_context io;
  WebhookSender sender(io, fast());
  sender.send("http://127.0.0.1:" + std::to_string(r.port()) + "/", "{}");
  io.run();
  EXPECT_EQ(r.requests().size(), 3u);
}

}  // namespace
}  // namespace allot::api
