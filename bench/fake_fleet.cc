#include "fake_fleet.h"

#include <boost/asio/ip/tcp.hpp>
#include <cstdio>

#include "bench_util.h"

namespace allot::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using nlohmann::json;

namespace {

json inventory(int gpus, const std::string& model) {
  json g = json::array();
  for (int i = 0; i < gpus; ++i) {
    g.push_back({{"index", i},
                 {"uuid", "GPU-" + std::to_string(i)},
                 {"model", model},
                 {"memory_mib", 81920}});
  }
  return {{"hostname", "bench"},         {"cpus", 64},        {"memory_mib", 1 << 20},
          {"gpu_provider", "simulated"}, {"simulated", true}, {"gpus", g}};
}

Result<json> call(uint16_t port, const std::string& method, const std::string& target,
                  const json& body, const std::string& token) {
  auto r = httpRequest(port, method, target, token, body.dump());
  if (!r.ok()) return r.status();
  if (r->status >= 300) return Status::Internal(method + " " + target + ": " + r->body);
  return json::parse(r->body);
}

}  // namespace

std::vector<std::string> fakeFleetAllotdArgs(const std::string& dir, const std::string& limits) {
  const std::string config = dir + "/allotd-fake-fleet.toml";
  if (FILE* f = std::fopen(config.c_str(), "w")) {
    std::fputs("[health]\ncommission = false\n[limits]\nmax_connections_per_client = 0\n", f);
    std::fputs(limits.c_str(), f);
    std::fclose(f);
  }
  return {"--config", config};
}

Result<std::unique_ptr<FakeFleet>> FakeFleet::join(uint16_t port, const std::string& adminToken,
                                                   int hosts, int gpusPerHost,
                                                   const std::string& prefix,
                                                   const std::string& model) {
  std::unique_ptr<FakeFleet> fleet(new FakeFleet());
  fleet->gpusPerHost_ = gpusPerHost;
  fleet->model_ = model;
  auto joinToken = call(port, "POST", "/api/v1/hosts/join-tokens", {{"uses", hosts}}, adminToken);
  if (!joinToken.ok()) return joinToken.status();
  const json inv = inventory(gpusPerHost, model);
  const auto endpoint = asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port);
  for (int h = 0; h < hosts; ++h) {
    const std::string name = prefix + "-" + std::to_string(h);
    auto joined =
        call(port, "POST", "/api/v1/hosts/join",
             {{"name", name}, {"join_token", joinToken->at("token")}, {"inventory", inv}}, "");
    if (!joined.ok()) return joined.status();
    const std::string credential = joined->at("credential");
    auto ws = std::make_unique<Stream>(fleet->io_);
    beast::error_code ec;
    beast::get_lowest_layer(*ws).socket().connect(endpoint, ec);
    if (ec) return Status::Internal("connect: " + ec.message());
    ws->set_option(websocket::stream_base::decorator([credential](websocket::request_type& req) {
      req.set(beast::http::field::authorization, "Bearer " + credential);
    }));
    ws->handshake("127.0.0.1", "/api/v1/agent/stream", ec);
    if (ec) return Status::Internal("agent stream of " + name + ": " + ec.message());
    ws->text(true);
    ws->write(
        asio::buffer(json{{"type", "hello"}, {"inventory", inv}, {"jobs", json::array()}}.dump()));
    fleet->names_.push_back(name);
    fleet->streams_.push_back(std::move(ws));
  }
  return fleet;
}

FakeFleet::~FakeFleet() {
  for (auto& ws : streams_) {
    beast::error_code ec;
    beast::get_lowest_layer(*ws).socket().close(ec);
  }
}

bool FakeFleet::send(int host, const std::string& text) {
  beast::error_code ec;
  streams_[host]->write(asio::buffer(text), ec);
  return !ec;
}

std::string FakeFleet::telemetry(int host, int64_t atMs, const std::vector<int>& util,
                                 int64_t intervalMs) const {
  json gpus = json::array();
  for (int g = 0; g < gpusPerHost_; ++g) {
    const int u = g < static_cast<int>(util.size()) ? util[g] : 0;
    gpus.push_back({{"index", g},
                    {"utilization_pct", u},
                    {"memory_used_mib", 400 * u},
                    {"temperature_c", 35 + u / 3},
                    {"power_w", 70.0 + 6.3 * u},
                    {"sm_clock_mhz", 1980},
                    {"ecc_corrected", 0},
                    {"ecc_uncorrected", 0},
                    {"pids", json::array()}});
  }
  return json{{"type", "telemetry"},
              {"host", names_[host]},
              {"at_ms", atMs},
              {"interval_ms", intervalMs},
              {"gpus", gpus}}
      .dump();
}

}  // namespace allot::bench
