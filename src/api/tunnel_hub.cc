#include "api/tunnel_hub.h"

#include <spdlog/spdlog.h>

namespace allot::api {

namespace asio = boost::asio;

std::shared_ptr<tunnel::TunnelMux> TunnelHub::attach(const std::string& host,
                                                     tunnel::FrameSink sink) {
  auto mux = std::make_shared<tunnel::TunnelMux>(ex_, std::move(sink));
  auto& slot = muxes_[host];
  if (slot) slot->shutdown("host " + host + " reconnected");
  slot = mux;
  return mux;
}

void TunnelHub::detach(const std::string& host, const std::shared_ptr<tunnel::TunnelMux>& mux) {
  mux->shutdown("agent of host " + host + " disconnected");
  auto it = muxes_.find(host);
  if (it != muxes_.end() && it->second == mux) muxes_.erase(it);
}

void TunnelHub::onFrame(const std::string& host, tunnel::TunnelMux& mux, std::string_view message) {
  auto frame = model::decodeTunnelFrame(message);
  if (!frame.ok()) {
    spdlog::warn("agent {}: bad tunnel frame dropped: {}", host, frame.status().message());
    return;
  }
  if (frame->op == model::TunnelOp::kOpen) {
    spdlog::warn("agent {}: OPEN from an agent dropped (only allotd opens streams)", host);
    return;
  }
  mux.deliver(*frame);
}

asio::awaitable<Result<std::shared_ptr<TunnelStream>>> TunnelHub::open(
    const std::string& host, int64_t session, const std::string& target,
    std::chrono::milliseconds timeout) {
  auto it = muxes_.find(host);
  if (it == muxes_.end())
    co_return Status::Unavailable("cannot open " + target + " of session " +
                                  std::to_string(session) + ": host " + host + " is not connected");
  auto mux = it->second;
  auto stream = mux->open(model::TunnelOpen{session, target});
  auto waiting = tunnel::TunnelMux::waitOpen(stream, timeout);
  Status st = co_await std::move(waiting);
  if (!st.ok())
    co_return st.withContext("cannot open " + target + " of session " + std::to_string(session) +
                             " on host " + host);
  co_return stream;
}

}  // namespace allot::api
