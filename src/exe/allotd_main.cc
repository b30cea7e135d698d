// allotd: the control plane. Flags and the TOML config become a ServerConfig here and nowhere
// else; flags override the file.

#include <sys/resource.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <map>
#include <tuple>
#include <vector>

#include "api/server.h"
#include "common/build_info.h"
#include "common/log.h"
#include "common/sealed_box.h"
#include "common/secrets.h"
#include "common/time_format.h"
#include "exe/contour_config.h"
#include "exe/lifecycle_config.h"
#include "exe/limits_config.h"
#include "exe/login_config.h"
#include "store/sqlite/sqlite_store.h"

namespace {

struct Flags {
  std::string configFile;
  std::string listen;
  std::string dataDir;
  std::string logLevel;
  std::string heartbeat;
  std::string lostAfter;
  std::string placement;
  std::string preemptGrace;
  std::string usageHalfLife;
  std::string tlsCert;
  std::string tlsKey;
  std::string webDir;
  std::string streamKeepalive;
  std::string sessionSharedDir;
  std::string sessionDomain;
  int64_t maxLogBytes = -1;  // -1: not given
  bool logJson = false;
};

int fail(const std::string& msg) {
  std::cerr << "allotd: " << msg << "\n";
  return 1;
}

// Every connection is a descriptor, and systemd's soft limit (1024) is far below the hard one:
// allotd takes what it is allowed, as Go programs do, and limits connections within that
// (api/connection_limit.h).
void raiseDescriptorLimit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= files.rlim_max) return;
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allotd: the Allot control plane (API, scheduler, store)"};
  app.set_version_flag("--version", std::string("allotd ") + allot::allotVersion());
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
  app.add_option("--placement", f.placement,
                 "placement policy: fgd (default), bestfit, firstfit or random");
  app.add_option("--preempt-grace", f.preemptGrace,
                 "time a preempted job has between SIGTERM and SIGKILL (default 30s)");
  app.add_option("--usage-half-life", f.usageHalfLife,
                 "half-life of the usage history fair share weighs (default 24h)");
  app.add_option("--tls-cert", f.tlsCert,
                 "PEM certificate chain: serve HTTPS (and WSS for agents) only; needs --tls-key");
  app.add_option("--tls-key", f.tlsKey, "PEM private key of --tls-cert");
  app.add_option("--web-dir", f.webDir,
                 "the web console's built files, served at / (default: ../share/allot/web or "
                 "../../web/dist next to this binary, the first that exists)");
  app.add_option("--stream-keepalive", f.streamKeepalive,
                 "keepalive and credential re-check period of live streams (default 15s)");
  app.add_option("--session-shared-dir", f.sessionSharedDir,
                 "sessions' shared storage: a directory mounted at this path on every host "
                 "(NFS); user U's sessions get DIR/U (default: none)");
  app.add_option("--session-domain", f.sessionDomain,
                 "session N is served at its own origin sN.DOMAIN on allotd's port, never at the "
                 "console's (needs wildcard DNS, and a wildcard certificate with TLS; default "
                 "localhost, which browsers resolve to this machine)");
  app.add_option("--max-log-bytes", f.maxLogBytes,
                 "output kept per job (and gang rank): its first and last halves, with a line "
                 "saying what was dropped between; 0 = no cap (default 67108864, 64 MiB)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  CLI11_PARSE(app, argc, argv);

  std::string listen = "127.0.0.1:7070", dataDir = ".allot", logLevel = "info";
  std::string tlsCert, tlsKey;
  std::string heartbeat = "5s", lostAfter = "5m";
  std::string placement = "fgd", preemptGrace = "30s", usageHalfLife = "24h";
  std::map<std::string, double> pricePerGpuHour;
  std::string rawRetention = "24h", minuteRetention = "30d", hourRetention = "730d";
  double idleBelowPct = 5;
  // [idle]: the idle-allocation policy of teams and projects that set none.
  allot::model::IdlePolicy idleDefault;
  std::string idleAfter = "30m", idleGrace = "15m", idleAction = "notify";
  std::map<std::string, allot::control::HookProfile> hookProfiles;
  // [leases] (docs/leases.md): durations as text until checked below.
  std::string leaseAutoApprove = "never", leaseMaxDuration = "0s", leaseNotice = "15m",
              leaseHoldHorizon = "24h";
  int64_t leaseMaxHosts = 0;
  allot::control::HostLifecycleOptions lifecycle;
  allot::control::ContourOptions contours;  // dev, test, prod unless [contours] says otherwise
  allot::auth::LoginConfig login;
  allot::control::UnixIdOptions unixIds;
  bool teamAdminsCreateUsers = false;
  std::string sessionSharedDir, sessionDomain = "localhost";
  allot::control::JobLimits jobLimits;
  allot::control::LogStoreOptions logLimits;
  std::vector<std::string> webhookAllow;
  allot::api::ConnectionLimits connectionLimits;
  int64_t writeReserveBytes = allot::api::ServerConfig{}.writeReserveBytes;
  if (!f.configFile.empty()) {
    try {
      auto tbl = toml::parse_file(f.configFile);
      listen = tbl["listen"].value_or(listen);
      dataDir = tbl["data_dir"].value_or(dataDir);
      logLevel = tbl["log_level"].value_or(logLevel);
      tlsCert = tbl["tls"]["cert"].value_or(tlsCert);
      tlsKey = tbl["tls"]["key"].value_or(tlsKey);
      heartbeat = tbl["agents"]["heartbeat"].value_or(heartbeat);
      lostAfter = tbl["agents"]["lost_after"].value_or(lostAfter);
      placement = tbl["scheduler"]["placement"].value_or(placement);
      preemptGrace = tbl["scheduler"]["preempt_grace"].value_or(preemptGrace);
      usageHalfLife = tbl["scheduler"]["usage_half_life"].value_or(usageHalfLife);
      rawRetention = tbl["telemetry"]["raw_retention"].value_or(rawRetention);
      minuteRetention = tbl["telemetry"]["minute_retention"].value_or(minuteRetention);
      hourRetention = tbl["telemetry"]["hour_retention"].value_or(hourRetention);
      idleBelowPct = tbl["idle"]["threshold_percent"].value_or(idleBelowPct);
      sessionSharedDir = tbl["sessions"]["shared_dir"].value_or(sessionSharedDir);
      sessionDomain = tbl["sessions"]["domain"].value_or(sessionDomain);
      // [prices] A100 = 2.5: the price of one GPU-hour by GPU model, for usage reports' cost.
      if (const toml::table* prices = tbl["prices"].as_table()) {
        for (const auto& [model, price] : *prices) {
          auto v = price.value<double>();
          if (!v || *v < 0)
            return fail("config " + f.configFile + ": prices." + std::string(model.str()) +
                        ": expected a price per GPU-hour (a number >= 0)");
          pricePerGpuHour[std::string(model.str())] = *v;
        }
      }
      // [idle] threshold_percent (above) is also the default policy's threshold.
      if (const toml::table* idle = tbl["idle"].as_table()) {
        idleAfter = (*idle)["after"].value_or(idleAfter);
        idleGrace = (*idle)["grace"].value_or(idleGrace);
        idleAction = (*idle)["action"].value_or(idleAction);
        idleDefault.webhook = (*idle)["webhook"].value_or(std::string());
      }
      // [hooks.profiles.NAME] playbook = "..." or script = "...": reprovisioning profiles.
      if (const toml::table* profiles = tbl["hooks"]["profiles"].as_table()) {
        for (const auto& [name, node] : *profiles) {
          const std::string key = "hooks.profiles." + std::string(name.str());
          const toml::table* p = node.as_table();
          if (!p) return fail("config: " + key + ": expected a table");
          auto playbook = (*p)["playbook"].value<std::string>();
          auto script = (*p)["script"].value<std::string>();
          if (playbook.has_value() == script.has_value())
            return fail("config: " + key + ": set exactly one of playbook or script");
          hookProfiles[std::string(name.str())] =
              playbook ? allot::control::HookProfile{"playbook", *playbook}
                       : allot::control::HookProfile{"script", *script};
        }
      }
      if (const toml::table* leases = tbl["leases"].as_table()) {
        leaseAutoApprove = (*leases)["auto_approve"].value_or(leaseAutoApprove);
        leaseMaxHosts = (*leases)["max_hosts"].value_or(leaseMaxHosts);
        leaseMaxDuration = (*leases)["max_duration"].value_or(leaseMaxDuration);
        leaseNotice = (*leases)["notice"].value_or(leaseNotice);
        leaseHoldHorizon = (*leases)["hold_horizon"].value_or(leaseHoldHorizon);
      }
      // [identity]: the Unix id ranges allotd allocates from (docs/access.md).
      if (const toml::table* id = tbl["identity"].as_table()) {
        unixIds.uidMin = (*id)["uid_min"].value_or(unixIds.uidMin);
        unixIds.uidMax = (*id)["uid_max"].value_or(unixIds.uidMax);
        unixIds.gidMin = (*id)["gid_min"].value_or(unixIds.gidMin);
        unixIds.gidMax = (*id)["gid_max"].value_or(unixIds.gidMax);
      }
      // [access]: what team-admins may do beyond their teams' members (docs/access.md).
      if (const toml::table* access = tbl["access"].as_table()) {
        if (const toml::node* v = access->get("team_admins_create_users")) {
          if (!v->is_boolean())
            return fail("config " + f.configFile +
                        ": access.team_admins_create_users must be true or false");
          teamAdminsCreateUsers = v->as_boolean()->get();
        }
      }
      if (allot::Status st = allot::readLifecycleConfig(tbl, hookProfiles, lifecycle); !st.ok())
        return fail("config " + f.configFile + ": " + st.message());
      if (allot::Status st = allot::readContourConfig(tbl, contours); !st.ok())
        return fail("config " + f.configFile + ": " + st.message());
      if (allot::Status st = allot::readLoginConfig(tbl, login); !st.ok())
        return fail("config " + f.configFile + ": " + st.message());
      // With a directory, people come from it: a local account a team-admin made under a
      // directory name nobody has logged in with yet would lock that person out for good.
      if (teamAdminsCreateUsers && !login.ldap.url.empty())
        return fail("config " + f.configFile +
                    ": access.team_admins_create_users cannot be true with [ldap]: people come "
                    "from the directory there (docs/access.md)");
      if (allot::Status st = allot::readLimitsConfig(tbl, jobLimits, logLimits, webhookAllow,
                                                     connectionLimits, writeReserveBytes);
          !st.ok())
        return fail("config " + f.configFile + ": " + st.message());
    } catch (const toml::parse_error& e) {
      return fail("config " + f.configFile + ": " + std::string(e.description()));
    }
  }
  if (!f.listen.empty()) listen = f.listen;
  if (!f.dataDir.empty()) dataDir = f.dataDir;
  if (!f.logLevel.empty()) logLevel = f.logLevel;
  if (!f.heartbeat.empty()) heartbeat = f.heartbeat;
  if (!f.lostAfter.empty()) lostAfter = f.lostAfter;
  if (!f.placement.empty()) placement = f.placement;
  if (!f.preemptGrace.empty()) preemptGrace = f.preemptGrace;
  if (!f.usageHalfLife.empty()) usageHalfLife = f.usageHalfLife;
  if (!f.tlsCert.empty()) tlsCert = f.tlsCert;
  if (!f.tlsKey.empty()) tlsKey = f.tlsKey;
  if (tlsCert.empty() != tlsKey.empty())
    return fail("--tls-cert and --tls-key: give both (HTTPS) or neither (plain HTTP)");

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
  cfg.tlsCertFile = tlsCert;
  cfg.tlsKeyFile = tlsKey;
  auto hb = allot::parseDurationMs(heartbeat);
  if (!hb.ok() || *hb <= 0) return fail("--heartbeat: " + hb.status().message());
  auto lost = allot::parseDurationMs(lostAfter);
  if (!lost.ok() || *lost <= 0) return fail("--lost-after: " + lost.status().message());
  cfg.cluster.heartbeatMs = *hb;
  cfg.cluster.lostAfterMs = *lost;
  if (placement != "fgd" && placement != "bestfit" && placement != "firstfit" &&
      placement != "random")
    return fail("--placement: expected fgd, bestfit, firstfit or random, got '" + placement + "'");
  cfg.cluster.scheduling.placement = placement;
  auto grace = allot::parseDurationMs(preemptGrace);
  if (!grace.ok() || *grace < 0) return fail("--preempt-grace: " + grace.status().message());
  cfg.cluster.preemptGraceMs = *grace;
  auto halfLife = allot::parseDurationMs(usageHalfLife);
  if (!halfLife.ok() || *halfLife <= 0)
    return fail("--usage-half-life: " + halfLife.status().message());
  cfg.cluster.usageHalfLifeMs = *halfLife;
  cfg.cluster.pricePerGpuHour = std::move(pricePerGpuHour);
  cfg.cluster.hookProfiles = std::move(hookProfiles);
  cfg.cluster.lifecycle = std::move(lifecycle);
  cfg.cluster.contours = std::move(contours);
  cfg.login = std::move(login);
  // The session cookie is Secure whenever browsers reach allotd over HTTPS.
  if (!tlsCert.empty()) cfg.login.secureCookies = true;
  // Ids below 1000 are the system's; above 2^31-2 some tools misbehave (and 65534, nobody, and
  // 4294967295, -1, lie outside). The two ranges must be disjoint: a user's private group must
  // never be a team's.
  if (unixIds.uidMin < 1000 || unixIds.uidMax < unixIds.uidMin || unixIds.gidMin < 1000 ||
      unixIds.gidMax < unixIds.gidMin || unixIds.uidMax > 2147483646 || unixIds.gidMax > 2147483646)
    return fail(
        "identity: expected 1000 <= uid_min <= uid_max and 1000 <= gid_min <= gid_max, "
        "all below 2147483647");
  if (unixIds.uidMin <= unixIds.gidMax && unixIds.gidMin <= unixIds.uidMax)
    return fail(
        "identity: the uid range (uid_min..uid_max) and the team gid range "
        "(gid_min..gid_max) overlap");
  if ((unixIds.uidMin <= 65534 && 65534 <= unixIds.uidMax) ||
      (unixIds.gidMin <= 65534 && 65534 <= unixIds.gidMax))
    return fail("identity: the ranges must leave out 65534 (nobody, nogroup)");
  cfg.cluster.unixIds = unixIds;
  cfg.cluster.teamAdminsCreateUsers = teamAdminsCreateUsers;
  if (!f.sessionSharedDir.empty()) sessionSharedDir = f.sessionSharedDir;
  if (!sessionSharedDir.empty() && sessionSharedDir.front() != '/')
    return fail("sessions.shared_dir: must be an absolute path (the same on every host), not '" +
                sessionSharedDir + "'");
  cfg.cluster.sessionSharedDir = sessionSharedDir;
  if (!f.sessionDomain.empty()) sessionDomain = f.sessionDomain;
  if (sessionDomain.empty() ||
      sessionDomain.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") !=
          std::string::npos ||
      sessionDomain.front() == '.' || sessionDomain.back() == '.')
    return fail(
        "sessions.domain: expected a lower-case DNS name such as sessions.example.com, "
        "not '" +
        sessionDomain + "'");
  cfg.sessionDomain = sessionDomain;
  if (!(idleBelowPct >= 0 && idleBelowPct <= 100))
    return fail("idle.threshold_percent: expected 0 to 100");
  cfg.cluster.idleBelowPct = idleBelowPct;
  for (auto [key, text, into] :
       {std::tuple{"telemetry.raw_retention", &rawRetention, &cfg.telemetryRetention.rawMs},
        {"telemetry.minute_retention", &minuteRetention, &cfg.telemetryRetention.minutesMs},
        {"telemetry.hour_retention", &hourRetention, &cfg.telemetryRetention.hoursMs}}) {
    auto ms = allot::parseDurationMs(*text);
    if (!ms.ok() || *ms < 0)
      return fail(std::string(key) + ": expected a duration such as 30d, or 0 to keep for ever");
    *into = *ms;
  }
  // One idle threshold: the report's, and the default policy's unless [idle] says otherwise.
  idleDefault.thresholdPct = idleBelowPct;
  auto after = allot::parseDurationMs(idleAfter);
  if (!after.ok()) return fail("config: idle.after: " + after.status().message());
  idleDefault.afterMs = *after;
  auto idleGraceMs = allot::parseDurationMs(idleGrace);
  if (!idleGraceMs.ok()) return fail("config: idle.grace: " + idleGraceMs.status().message());
  idleDefault.graceMs = *idleGraceMs;
  auto action = allot::model::parseIdleAction(idleAction);
  if (!action)
    return fail("config: idle.action: expected notify or reclaim, got '" + idleAction + "'");
  idleDefault.action = *action;
  if (auto st = allot::control::validateIdlePolicy(idleDefault); !st.ok())
    return fail("config: idle." + st.message());
  cfg.cluster.idleDefault = idleDefault;
  if (f.maxLogBytes >= 0) logLimits.maxBytes = f.maxLogBytes;
  if (logLimits.maxBytes > 0 && logLimits.maxBytes < 4096)
    return fail("--max-log-bytes: at least 4096, or 0 for no cap");
  cfg.logs = logLimits;
  cfg.cluster.limits = jobLimits;
  cfg.connections = connectionLimits;
  cfg.writeReserveBytes = writeReserveBytes;
  cfg.cluster.webhookAllow = std::move(webhookAllow);
  if (leaseAutoApprove != "never" && leaseAutoApprove != "always")
    return fail("config: leases.auto_approve: expected \"never\" or \"always\", got \"" +
                leaseAutoApprove + "\"");
  cfg.cluster.leases.autoApprove = leaseAutoApprove == "always";
  if (leaseMaxHosts < 0 || leaseMaxHosts > 100'000)
    return fail("config: leases.max_hosts: expected 0 (no limit) or a number of hosts");
  cfg.cluster.leases.maxHosts = static_cast<int>(leaseMaxHosts);
  for (auto [key, text, target] :
       {std::tuple{"max_duration", &leaseMaxDuration, &cfg.cluster.leases.maxDurationMs},
        {"notice", &leaseNotice, &cfg.cluster.leases.noticeMs},
        {"hold_horizon", &leaseHoldHorizon, &cfg.cluster.leases.holdHorizonMs}}) {
    auto ms = allot::parseDurationMs(*text);
    if (!ms.ok()) return fail("config: leases." + std::string(key) + ": " + ms.status().message());
    *target = *ms;
  }

  if (!f.streamKeepalive.empty()) {
    auto ms = allot::parseDurationMs(f.streamKeepalive);
    if (!ms.ok() || *ms < 100)
      return fail("--stream-keepalive: expected a duration of at least 100ms");
    cfg.streamKeepaliveMs = *ms;
  }
  if (!f.webDir.empty()) {
    std::error_code dirEc;
    if (!std::filesystem::is_directory(f.webDir, dirEc))
      return fail("--web-dir: no such directory '" + f.webDir + "'");
    cfg.webDir = f.webDir;
  } else {
    std::error_code exeEc;
    cfg.webDir = allot::api::defaultWebDir(std::filesystem::read_symlink("/proc/self/exe", exeEc));
  }

  std::error_code ec;
  // The data directory holds job environments (users' secrets), token hashes and logs: allotd's
  // alone, whatever the umask it was started with, and so is everything it makes there.
  ::umask(077);
  std::filesystem::create_directories(dataDir, ec);
  if (ec) return fail("cannot create data dir " + dataDir + ": " + ec.message());
  ::chmod(dataDir.c_str(), 0700);
  // Beside the database, never in it: what seals teams' registry passwords.
  auto sealKey = allot::loadOrCreateSealKey(dataDir + "/seal.key");
  if (!sealKey.ok()) return fail(sealKey.status().message());
  cfg.cluster.sealKey = *sealKey;
  auto store = allot::store::SqliteStore::open(dataDir + "/allot.db");
  if (!store.ok()) return fail(store.status().message());

  allot::SystemClock clock;
  auto server = allot::api::Server::create(cfg, clock, std::move(store).value());
  if (!server.ok()) return fail(server.status().message());
  raiseDescriptorLimit();
  auto port = (*server)->listen();
  if (!port.ok()) return fail(port.status().message());

  const char* scheme = tlsCert.empty() ? "http" : "https";
  spdlog::info("allotd listening on {}://{}:{} data_dir={}", scheme, cfg.listenAddress, *port,
               dataDir);
  // One machine-readable line on stdout, so scripts and tests learn the port chosen for port 0.
  std::cout << "listening " << scheme << "://" << cfg.listenAddress << ":" << *port << std::endl;
  if (const auto& token = (*server)->newAdminToken()) {
    std::cout << "admin token (shown once; also in " << dataDir << "/admin.token): " << *token
              << std::endl;
  }
  (*server)->run(true);
  spdlog::info("allotd stopped");
  return 0;
}
