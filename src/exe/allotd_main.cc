// allotd: the control plane. Flags and the TOML config become a ServerConfig here and nowhere
// else; flags override the file.

#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "api/server.h"
#include "common/log.h"
#include "common/secrets.h"
#include "common/time_format.h"
#include "store/sqlite/sqlite_store.h"

namespace {

struct Flags {
  std::string configFile;
  std::string listen;
  std::string dataDir;
  std::string logLevel;
  std::string heartbeat;
  std::string lostAfter;
  bool logJson = false;
};

int fail(const std::string& msg) {
  std::cerr << "allotd: " << msg << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allotd: the Allot control plane (API, scheduler, store)"};
  Flags f;
  app.add_option("--config", f.configFile, "TOML config file (flags override it)");
  app.add_option("--listen", f.listen,
                 "address:port to listen on (default 127.0.0.1:7070; port 0 = any)");
  app.add_option("--data-dir", f.dataDir,
                 "where the database, logs and admin.token live (default ./.allot)");
  app.add_option("--log-level", f.logLevel, "trace|debug|info|warn|error (default info)");
  app.add_flag("--log-json", f.logJson, "log one JSON object per line");
  app.add_option("--heartbeat", f.heartbeat, "agent heartbeat interval (default 5s)");
  app.add_option("--lost-after", f.lostAfter,
                 "declare an unreachable host's jobs lost after this long (default 5m)");
  CLI11_PARSE(app, argc, argv);

  std::string listen = "127.0.0.1:7070", dataDir = ".allot", logLevel = "info";
  std::string heartbeat = "5s", lostAfter = "5m";
  if (!f.configFile.empty()) {
    try {
      auto tbl = toml::parse_file(f.configFile);
      listen = tbl["listen"].value_or(listen);
      dataDir = tbl["data_dir"].value_or(dataDir);
      logLevel = tbl["log_level"].value_or(logLevel);
      heartbeat = tbl["agents"]["heartbeat"].value_or(heartbeat);
      lostAfter = tbl["agents"]["lost_after"].value_or(lostAfter);
    } catch (const toml::parse_error& e) {
      return fail("config " + f.configFile + ": " + std::string(e.description()));
    }
  }
  if (!f.listen.empty()) listen = f.listen;
  if (!f.dataDir.empty()) dataDir = f.dataDir;
  if (!f.logLevel.empty()) logLevel = f.logLevel;
  if (!f.heartbeat.empty()) heartbeat = f.heartbeat;
  if (!f.lostAfter.empty()) lostAfter = f.lostAfter;

  allot::setupLogging("allotd", logLevel, f.logJson);
  allot::initSecrets();

  allot::api::ServerConfig cfg;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return fail("--listen: expected ADDRESS:PORT, got '" + listen + "'");
  cfg.listenAddress = listen.substr(0, colon);
  if (cfg.listenAddress.size() > 2 && cfg.listenAddress.front() == '[')
    cfg.listenAddress = cfg.listenAddress.substr(1, cfg.listenAddress.size() - 2);
  try {
    int port = std::stoi(listen.substr(colon + 1));
    if (port < 0 || port > 65535) throw std::out_of_range("port");
    cfg.port = static_cast<uint16_t>(port);
  } catch (...) {
    return fail("--listen: bad port in '" + listen + "'");
  }
  cfg.dataDir = dataDir;
  auto hb = allot::parseDurationMs(heartbeat);
  if (!hb.ok() || *hb <= 0) return fail("--heartbeat: " + hb.status().message());
  auto lost = allot::parseDurationMs(lostAfter);
  if (!lost.ok() || *lost <= 0) return fail("--lost-after: " + lost.status().message());
  cfg.cluster.heartbeatMs = *hb;
  cfg.cluster.lostAfterMs = *lost;

  std::error_code ec;
  std::filesystem::create_directories(dataDir, ec);
  if (ec) return fail("cannot create data dir " + dataDir + ": " + ec.message());
  auto store = allot::store::SqliteStore::open(dataDir + "/allot.db");
  if (!store.ok()) return fail(store.status().message());

  allot::SystemClock clock;
  auto server = allot::api::Server::create(cfg, clock, std::move(store).value());
  if (!server.ok()) return fail(server.status().message());
  auto port = (*server)->listen();
  if (!port.ok()) return fail(port.status().message());

  spdlog::info("allotd listening on http://{}:{} data_dir={}", cfg.listenAddress, *port, dataDir);
  // One machine-readable line on stdout, so scripts and tests learn the port chosen for port 0.
  std::cout << "listening http://" << cfg.listenAddress << ":" << *port << std::endl;
  if (const auto& token = (*server)->newAdminToken()) {
    std::cout << "admin token (shown once; also in " << dataDir << "/admin.token): " << *token
              << std::endl;
  }
  (*server)->run(true);
  spdlog::info("allotd stopped");
  return 0;
}
