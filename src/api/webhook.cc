#include "api/webhook.h"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "control/idle_policy.h"

namespace allot::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

// One attempt; "" on success, else what went wrong (without the URL).
asio::awaitable<std::string> attempt(control::WebhookTarget to, std::string body,
                                     std::chrono::milliseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  // The resolver is not covered by the stream's expiry; a timer cancels it.
  tcp::resolver resolver(ex);
  asio::steady_timer resolveLimit(ex);
  resolveLimit.expires_after(timeout);
  resolveLimit.async_wait([&resolver](const boost::system::error_code& ec) {
    if (!ec) resolver.cancel();
  });
  auto [rec, endpoints] = co_await resolver.async_resolve(to.host, std::to_string(to.port),
                                                          asio::as_tuple(use_awaitable));
  resolveLimit.cancel();
  if (rec) co_return "cannot resolve: " + rec.message();

  beast::tcp_stream stream(ex);
  stream.expires_after(timeout);
  auto [cec, ep] = co_await stream.async_connect(endpoints, asio::as_tuple(use_awaitable));
  if (cec) co_return "cannot connect: " + cec.message();
  http::request<http::string_body> req{http::verb::post, to.target, 11};
  req.set(http::field::host, to.port == 80 ? to.host : to.host + ":" + std::to_string(to.port));
  req.set(http::field::user_agent, "allotd");
  req.set(http::field::content_type, "application/json");
  req.keep_alive(false);
  req.body() = std::move(body);
  req.prepare_payload();
  auto [wec, wn] = co_await http::async_write(stream, req, asio::as_tuple(use_awaitable));
  if (wec) co_return "cannot send: " + wec.message();
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  auto [rdec, rn] = co_await http::async_read(stream, buffer, res, asio::as_tuple(use_awaitable));
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (rdec) co_return "no answer: " + rdec.message();
  if (res.result_int() < 200 || res.result_int() > 299)
    co_return "answered HTTP " + std::to_string(res.result_int());
  co_return "";
}

asio::awaitable<void> deliver(control::WebhookTarget to, std::string body, WebhookOptions o) {
  auto backoff = o.backoff;
  for (int i = 1; i <= o.tries; ++i) {
    std::string failed = co_await attempt(to, body, o.timeout);
    if (failed.empty()) co_return;
    spdlog::warn("webhook to host {} failed (try {} of {}): {}", to.host, i, o.tries, failed);
    if (i == o.tries) break;
    asio::steady_timer pause(co_await asio::this_coro::executor);
    pause.expires_after(backoff);
    co_await pause.async_wait(asio::as_tuple(use_awaitable));
    backoff *= 2;
  }
  spdlog::error("webhook to host {}: giving up after {} tries", to.host, o.tries);
}

}  // namespace

void WebhookSender::send(const std::string& url, std::string body) {
  auto to = control::parseWebhookUrl(url);
  if (!to.ok()) {  // checked when the policy was set; a stored policy may predate a rule
    spdlog::warn("webhook skipped: {}", to.status().message());
    return;
  }
  asio::co_spawn(io_, deliver(std::move(to).value(), std::move(body), options_), asio::detached);
}

}  // namespace allot::api
