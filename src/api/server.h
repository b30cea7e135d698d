#pragma once
// Server: allotd's composition root below main(). Owns the I/O context (one thread runs every
// handler, the scheduling loop and the agents' streams), the store, the Cluster and the HTTP
// listener. Writes go through `commit`, which waits for the store's group commit.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/connection_limit.h"
#include "api/event_hub.h"
#include "api/login_service.h"
#include "api/metrics.h"
#include "api/router.h"
#include "api/session_origin.h"
#include "api/static_files.h"
#include "api/tunnel_hub.h"
#include "api/webhook.h"
#include "api/write_pipeline.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/cluster.h"
#include "control/log_store.h"
#include "control/loops/controllers.h"
#include "store/store.h"
#include "telemetry/telemetry_store.h"

namespace allot::api {

struct ServerConfig {
  std::string listenAddress = "127.0.0.1";
  uint16_t port = 7070;  // 0: the OS chooses
  std::string dataDir = ".allot";
  size_t maxBodyBytes = 1 << 20;
  // Both set: the listener speaks only TLS (HTTPS, and WSS for agents); both empty: plain HTTP.
  std::string tlsCertFile;  // PEM certificate chain, the server's certificate first
  std::string tlsKeyFile;   // PEM private key
  control::ClusterOptions cluster;
  // Each job's stored output and the disk reserve below which output is refused.
  control::LogStoreOptions logs;
  // How long telemetry.db keeps samples and rollups (see telemetry/telemetry_store.h).
  telemetry::TelemetryRetention telemetryRetention;
  // Passwords, logins, console sessions, LDAP (docs/login.md).
  auth::LoginConfig login;
  // The web console's built files, served at "/" (api/static_files.h); "" = none.
  std::string webDir;
  // How often a live stream (GET /api/v1/stream) sends a keepalive and re-checks its credential.
  int64_t streamKeepaliveMs = 15'000;
  // Sessions are served at s<id>.<sessionDomain> only (api/session_origin.h). The default,
  // localhost, serves only a browser on this machine.
  std::string sessionDomain = std::string(kDefaultSessionDomain);
  // Connections held at once, in all and per client (api/connection_limit.h).
  ConnectionLimits connections;
  // Free disk under dataDir below which changes through the API are refused (503): the database
  // keeps that room for what hosts report and allotd itself records, and a failed commit, which
  // allotd cannot serve past, never comes of what a tenant sends. 0 = none.
  int64_t writeReserveBytes = 256LL << 20;
};

// What an audited request's handler changed (docs/architecture.md, "An acknowledged write is
// durable"): one write, with the request's audit entry, committed after the handler returns;
// agents are told and watchers woken only once it is durable.
struct RequestWrite {
  WritePipeline::Slot slot;  // reserved at the handler's first change to memory
  std::set<std::string> pushHosts;
  std::vector<int64_t> notifyJobs;
};

class Server {
 public:
  // Opens nothing itself: the store comes in opened. Loads state and creates the first admin.
  static Result<std::unique_ptr<Server>> create(ServerConfig config, const Clock& clock,
                                                std::unique_ptr<store::Store> store);
  ~Server();

  // Binds the listener (loading the TLS certificate and key when configured); returns the port
  // actually bound.
  Result<uint16_t> listen();
  // The admin token, when this start created the admin (first start only).
  const std::optional<std::string>& newAdminToken() const { return newAdminToken_; }
  // Runs until stop() (from any thread) or SIGINT/SIGTERM when handleSignals is set.
  void run(bool handleSignals);
  void stop();

  // For handlers, on the I/O thread.
  control::Cluster& cluster() { return *cluster_; }
  control::LogStore& logs() { return *logs_; }
  const Clock& clock() const { return clock_; }
  const ServerConfig& config() const { return config_; }
  const Router& router() const { return router_; }
  const ServerMetrics& metrics() const { return metrics_; }
  ServerMetrics& metrics() { return metrics_; }
  // One of the kSessionBodiesAtOnce large bodies sessions may be sent, for `user`, held until the
  // result is released; null when all are taken, or the user holds kSessionBodiesPerUser.
  std::shared_ptr<void> holdSessionBody(const std::string& user);
  telemetry::TelemetryStore& telemetry() { return *telemetry_; }
  // Reads of what loadAll leaves in the store (the audit log); blocks the caller briefly.
  store::Store& store() { return *store_; }
  LoginService& login() { return *login_; }
  // The live streams' notices: commit publishes to it, as does telemetry ingestion.
  EventHub& events() { return events_; }
  boost::asio::io_context& io() { return io_; }
  // Byte streams to agents' hosts (sessions' Jupyter and SSH), one mux per connected agent.
  TunnelHub& tunnels() { return tunnels_; }
  SessionOriginAccess& sessionAccess() { return sessionAccess_; }
  SessionOrigins sessionOrigins() const {
    return {config_.sessionDomain, !config_.tlsCertFile.empty(),
            config_.sessionDomain != kDefaultSessionDomain};
  }
  // Returns once the batch is durable. A failed durable write is fatal (see server.cc).
  boost::asio::awaitable<void> commit(store::WriteBatch batch);
  template <typename T>
  boost::asio::awaitable<void> apply(const control::Change<T>& change) {
    co_await commitAndPush(change.batch, change.pushHosts);
  }
  // A handler's change: in an audited request it joins the request's write, which the session
  // commits with the audit entry once the handler has returned (it holds its place in the order
  // of writes from now on); otherwise as apply(change).
  template <typename T>
  boost::asio::awaitable<void> apply(ApiRequest& r, const control::Change<T>& change) {
    co_await applyToRequest(r, change.batch, change.pushHosts);
  }
  // The same for a change the caller is done with: its batch is moved into the write, not copied
  // (a submission's holds the whole job, its command and environment included).
  template <typename T>
  boost::asio::awaitable<void> apply(ApiRequest& r, control::Change<T>&& change) {
    co_await applyToRequest(r, std::move(change.batch), change.pushHosts);
  }
  // The handle stage of the request pipeline (api/http_pipeline.h): an authorized request's
  // handler, with its audit entry and its one write (RequestWrite).
  boost::asio::awaitable<ApiResponse> runHandler(const Route& route, ApiRequest& areq,
                                                 std::string_view path, std::string peerAddress);
  // The web console's built files (ServerConfig::webDir).
  const StaticFiles& console() const { return console_; }
  // Job watchers: a logs request with `wait` sleeps until its job has news or the time is up.
  boost::asio::awaitable<void> waitForJobNews(int64_t job, std::chrono::milliseconds timeout);
  void notifyJob(int64_t job);
  // In a handler: once the request's write is durable.
  void notifyJob(ApiRequest& r, int64_t job);
  // Scheduling passes run and durable so far. Before anyone has its id, only a pass changes a job
  // just created: a reply built when this read the same needs no refresh.
  uint64_t passesRun() const { return passesRun_; }

 private:
  // apply(change) with the change's batch and hosts: commits the batch, then pushes the hosts.
  boost::asio::awaitable<void> commitAndPush(store::WriteBatch batch,
                                             const std::set<std::string>& pushHosts);
  // What both apply(ApiRequest&, change) do, with the change's batch and hosts.
  boost::asio::awaitable<void> applyToRequest(ApiRequest& r, store::WriteBatch batch,
                                              const std::set<std::string>& pushHosts);
  Server(ServerConfig config, const Clock& clock, std::unique_ptr<store::Store> store);
  boost::asio::awaitable<void> acceptLoop();
  // One connection: the TLS handshake first when tls_ is set, then serveHttp on the stream.
  // `slot`: the connection's place under the connection limits, given back when it ends.
  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket,
                                       ConnectionLimiter::Slot slot);
  // Requests on one connection, plain or TLS alike (instantiated in server.cc for both), until
  // it closes or a handler takes it over; runs the stages of api/http_pipeline.h.
  template <typename Stream>
  boost::asio::awaitable<void> serveHttp(Stream& stream, ConnectionLimiter::Slot& slot);
  boost::asio::awaitable<void> schedulingLoop();
  // Every second: the controllers' tick, each step committed before the next runs.
  boost::asio::awaitable<void> livenessLoop();
  // Commits a controller's step, then lets out what it holds back until then
  // (docs/architecture.md).
  boost::asio::awaitable<void> commitStep(control::Step step);
  void wakeScheduler();
  // Unavailable while dataDir's disk has less free than config_.writeReserveBytes.
  Status diskHasRoomForWrites();

  ServerConfig config_;
  const Clock& clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<telemetry::TelemetryStore> telemetry_;
  std::unique_ptr<control::LogStore> logs_;
  std::unique_ptr<control::Cluster> cluster_;
  std::unique_ptr<control::Controllers> controllers_;  // the periodic work, on cluster_
  ServerMetrics metrics_;
  // Session bodies past the API's limit under way (holdSessionBody). Before io_: the requests
  // holding them live in coroutine frames, which go with io_.
  size_t sessionBodies_ = 0;
  std::map<std::string, size_t> sessionBodiesOf_;  // by user; users holding none are not here
  Router router_;
  // Before io_: streams' subscribers (in coroutine frames) leave it when io_ is destroyed.
  EventHub events_;
  StaticFiles console_{""};
  boost::asio::io_context io_{1};
  // After io_: joined first, so a decision still running posts its end to a live context.
  boost::asio::thread_pool schedulerThread_{1};
  // After io_: its queued writes' timers go before the context.
  std::unique_ptr<WritePipeline> writes_;
  TunnelHub tunnels_{io_.get_executor()};
  SessionOriginAccess sessionAccess_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  std::shared_ptr<ConnectionLimiter> connectionLimiter_;  // made by listen()
  std::shared_ptr<boost::asio::ssl::context> tls_;        // null: plain HTTP
  boost::asio::steady_timer schedulerWake_{io_};
  WebhookSender webhooks_{io_};
  bool scheduleNeeded_ = false;
  uint64_t passesRun_ = 0;  // counted once each pass's changes are durable
  bool passUnsettled_ = false;  // a pass's changes are in memory, their commit under way
  std::chrono::steady_clock::time_point diskCheckedAt_{};  // diskHasRoomForWrites's last look
  int64_t diskFreeBytes_ = 0;                               // and what it saw
  ThrottledWarnings diskWarnings_{""};
  // How long the last pass's decision took; unknown (the longest) before the first, which may
  // face a deep queue loaded from the store and so is made off the I/O thread.
  std::chrono::nanoseconds lastDecision_ = std::chrono::nanoseconds::max();  // CPU time
  std::multimap<int64_t, boost::asio::steady_timer*> jobWatchers_;
  std::optional<std::string> newAdminToken_;
  // After io_: destroyed first, so its worker threads stop before the context they post to.
  std::unique_ptr<LoginService> login_;
};

// Registers every route of the API on the router (routes.cc).
void registerRoutes(Router& router, Server& server);
// Who am I, accounts, team members, API tokens, SSH keys (routes_access.cc); called by
// registerRoutes.
void registerAccessRoutes(Router& router, Server& server);
// Login, logout, passwords (routes_login.cc); called by registerAccessRoutes.
void registerLoginRoutes(Router& router, Server& server);
// Quotas, host and GPU dedication, shared GPUs (routes_sharing.cc); called by registerRoutes.
void registerSharingRoutes(Router& router, Server& server);
// Host lifecycle: drain, resume, failed/retired, transitions (routes_hosts.cc).
void registerHostLifecycleRoutes(Router& router, Server& server);
// Assign, unassign and a host task's live output (routes_handover.cc); called by registerRoutes.
void registerHandoverRoutes(Router& router, Server& server);
// The usage report over the allocation ledger (routes_usage.cc); called by registerRoutes.
void registerUsageRoutes(Router& router, Server& server);
// A GPU's history from telemetry.db (routes_telemetry.cc); called by registerRoutes.
void registerTelemetryRoutes(Router& router, Server& server);
void registerImageRoutes(Router& router, Server& server);
// The cluster map the console draws (routes_map.cc); called by registerRoutes.
void registerMapRoutes(Router& router, Server& server);
// Idle-allocation policies and events (routes_idle.cc); called by registerRoutes.
void registerIdleRoutes(Router& router, Server& server);
// Rolling upgrades of a pool (routes_upgrades.cc); called by registerRoutes.
void registerUpgradeRoutes(Router& router, Server& server);
// The audit log and its JSON-lines export (routes_audit.cc); called by registerRoutes.
void registerAuditRoutes(Router& router, Server& server);
// Leases (routes_leases.cc); called by registerRoutes.
void registerLeaseRoutes(Router& router, Server& server);
// Session profiles (routes_profiles.cc); called by registerRoutes.
void registerProfileRoutes(Router& router, Server& server);
void registerSessionRoutes(Router& router, Server& server);
// The usage report over time (routes_usage_series.cc); called by registerRoutes.
void registerUsageSeriesRoutes(Router& router, Server& server);
// The lease a host is in now or held for next, as host views show it (null when none).
nlohmann::json hostLeaseJson(Server& server, const control::Principal& p, const std::string& host);
// The usage report's `idle_allocations`: flagged jobs `p` may see, of `team` ("" = all it sees).
Result<nlohmann::json> idleAllocationsJson(Server& server, const control::Principal& p,
                                           const std::string& team);
// The OpenAPI document served at /api/v1/openapi.json.
const std::string& openApiDocument();

}  // namespace allot::api
