#include "cli/fake_server.h"

#include <sys/socket.h>

// GCC 12 needs <utility> ahead of Boost.Asio; keep clang-format from sorting it after.
// clang-format off
#include <utility>
// clang-format on

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace allot::cli::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct FakeServer::Impl {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
};

FakeServer::FakeServer(Handler handler)
    : impl_(std::make_unique<Impl>()), handler_(std::move(handler)) {
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  thread_ = std::thread([this] { serve(); });
}

FakeServer::~FakeServer() {
  stop_ = true;
  // Wake a blocked read, then a blocked accept.
  if (int fd = currentFd_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  {
    asio::io_context ioc;
    tcp::socket s(ioc);
    beast::error_code ec;
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port_)), ec);
  }
  thread_.join();
}

std::vector<FakeRequest> FakeServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void FakeServer::serve() {
  while (!stop_) {
    beast::error_code ec;
    tcp::socket sock(impl_->ioc);
    impl_->acceptor.accept(sock, ec);
    if (ec || stop_) return;
    ++connections_;
    currentFd_ = sock.native_handle();
    beast::flat_buffer buffer;
    while (!stop_) {
      http::request<http::string_body> req;
      http::read(sock, buffer, req, ec);
      if (ec) break;
      FakeRequest fr{std::string(req.method_string()), std::string(req.target()), req.body(),
                     std::string(req[http::field::authorization])};
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(fr);
      }
      FakeResponse out = handler_(fr);
      http::response<http::string_body> res{static_cast<http::status>(out.status), 11};
      res.set(http::field::content_type, "application/json");
      for (const auto& [k, v] : out.headers) res.set(k, v);
      res.body() = out.body;
      res.keep_alive(!out.close && req.keep_alive());
      res.prepare_payload();
      http::write(sock, res, ec);
      if (ec || out.close || out.hangUp) break;
    }
    currentFd_ = -1;
    sock.shutdown(tcp::socket::shutdown_both, ec);
    sock.close(ec);
  }
}

FakeResponse jsonReply(int status, const std::string& body) {
  FakeResponse r;
  r.status = status;
  r.body = body;
  return r;
}

}  // namespace allot::cli::testing
