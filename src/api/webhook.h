#pragma once
// WebhookSender: delivers event JSON to the http:// webhooks of idle-allocation policies. Each
// delivery runs in the background on allotd's I/O context and never holds up the caller: up to
// `tries` attempts, each bounded by `timeout`, with a growing pause between them. Failures are
// logged by host only; the URL itself may carry a secret and is never logged.
//
// Threading: call send() on the thread that runs the io_context.

// GCC 12 needs <utility> ahead of Boost.Asio's coroutine headers; clang-format would sort it.
// clang-format off
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <string>

namespace allot::api {

struct WebhookOptions {
  std::chrono::milliseconds timeout{5'000};  // per attempt: resolve, connect, send, answer
  int tries = 3;
  std::chrono::milliseconds backoff{1'000};  // before the second try; doubles after each
};

class WebhookSender {
 public:
  explicit WebhookSender(boost::asio::io_context& io, WebhookOptions options = {})
      : io_(io), options_(options) {}

  // POSTs `body` (JSON) to `url`, which Cluster has already checked (parseWebhookUrl). A 2xx
  // answer is success; anything else is retried.
  void send(const std::string& url, std::string body);

 private:
  boost::asio::io_context& io_;
  WebhookOptions options_;
};

}  // namespace allot::api
