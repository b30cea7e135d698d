#include "api/server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <filesystem>
#include <tuple>

#include "api/agent_stream.h"
#include "api/audit_capture.h"
#include "api/directory_recheck.h"
#include "api/event_stream.h"
#include "api/http_pipeline.h"
#include "api/session_proxy.h"
#include "common/log.h"
#include "common/tls.h"
#include "model/json.h"

namespace allot::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(120);
// A request's header may be this large. A connection's read buffer holds at most that and one
// read more: Beast checks a chunk's extensions and a body's trailer only once their line has
// ended, so without a bound a client that never ends one grew the buffer without limit.
constexpr size_t kHeaderLimit = 64 * 1024;
constexpr size_t kReadBufferLimit = kHeaderLimit + 64 * 1024;
// A client that connects and does not finish the TLS handshake is dropped after this long.
constexpr auto kHandshakeTimeout = std::chrono::seconds(15);
constexpr int kPassRestFactor = 4;
// A decision that took less CPU time than this is made on the I/O thread (schedulingLoop).
constexpr auto kInlineDecision = std::chrono::milliseconds(5);

// CPU time the calling thread has used.
std::chrono::nanoseconds threadCpuTime() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// The read stage of a request (api/http_pipeline.h).
struct RequestRead {
  std::optional<HttpRequest> request;  // empty: the connection ends (closed, timed out, bad)
  std::optional<size_t> tooLargeFor;   // set: the body is over this limit; answer 413 and close
  std::optional<Status> unreadable;    // set: the request is malformed; answer 400 and close
  // kSessionBodiesAtOnce large bodies are under way, or kSessionBodiesPerUser of the caller's:
  // answer 503 and close
  bool busy = false;
  std::shared_ptr<void> largeBody;  // one of those, given back when the request is done with
};

// The header first: a session's Jupyter takes larger bodies (saved notebooks) than the API, but
// only from a caller with a valid credential; anyone else is held to the API's limit, so no one
// unauthenticated makes allotd buffer 256 MiB.
template <typename Stream>
asio::awaitable<RequestRead> readRequest(Server& server, Stream& stream,
                                         beast::flat_buffer& buffer) {
  const size_t apiLimit = server.config().maxBodyBytes;
  http::request_parser<http::string_body> parser;
  // The largest any request may send (Beast checks a Content-Length against it as it reads the
  // header); narrowed below once the header says what the request is.
  parser.body_limit(std::max<size_t>(apiLimit, kSessionBodyLimit));
  parser.header_limit(kHeaderLimit);
  auto [hec, hn] =
      co_await http::async_read_header(stream, buffer, parser, asio::as_tuple(use_awaitable));
  boost::system::error_code ec = hec;
  size_t limit = apiLimit;
  RequestRead read;
  if (!ec) {
    // Asked only of a body that may be over the API's limit: most requests pay nothing.
    const bool large = parser.chunked() || parser.content_length().value_or(0) > limit;
    std::optional<std::string> caller;
    if (large && isSessionPath(parser.get().target()) &&
        (caller = sessionCaller(server, parser.get()))) {
      read.largeBody = server.holdSessionBody(*caller);
      if (!read.largeBody) {
        read.busy = true;
        co_return read;
      }
      limit = kSessionBodyLimit;
    }
    if (parser.content_length() && *parser.content_length() > limit) {
      ec = http::error::body_limit;
    } else {
      // A client that waits for leave to send its body (curl does past 1 MiB) has it now, not
      // after its own timeout of a second.
      if (parser.get().version() == 11 &&
          beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        co_await asio::async_write(stream, asio::buffer(kContinue), asio::as_tuple(use_awaitable));
      }
      parser.body_limit(limit);  // what a chunked body may add up to
      auto [bec, bn] =
          co_await http::async_read(stream, buffer, parser, asio::as_tuple(use_awaitable));
      ec = bec;
    }
  }
  if (ec == http::error::body_limit) {
    read.tooLargeFor = limit;
  } else if (!ec) {
    read.request = parser.release();
  } else if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
             ec != http::error::end_of_stream && ec != http::error::partial_message) {
    // What the client sent is not HTTP this reads (a bad line, a header or a chunk's line too
    // long): said, naming the part, rather than a silent close. A closed or timed-out connection
    // is not answered.
    const char* part = parser.is_header_done() ? "body" : "header";
    read.unreadable = Status::InvalidArgument(
        std::string("the request's ") + part + " cannot be read: " + ec.message(), part);
  }
  co_return read;
}

Status writeSecretFile(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot write " + path + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  std::string line = content + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = ::fsync(fd) == 0 && ok;
  ::close(fd);
  return ok ? Status::Ok() : Status::Unavailable("cannot write " + path);
}

}  // namespace

Server::Server(ServerConfig config, const Clock& clock, std::unique_ptr<store::Store> store)
    : config_(std::move(config)), clock_(clock), store_(std::move(store)) {
  writes_ =
      std::make_unique<WritePipeline>(io_, *store_, [this](const Status& st, uint32_t topics) {
        if (!st.ok()) {
          // Memory already holds the change; serving it without the disk would break the promise
          // that an acknowledged write is durable. Crash, and let the restart reload from disk.
          spdlog::critical("durable write failed, exiting: {}", st.toString());
          std::abort();
        }
        // Durable now: consoles may refetch and will see it.
        events_.publish(topics);
      });
}

Server::~Server() {
  // Readings not yet handed over go to telemetry.db before its writer stops.
  if (telemetry_ && cluster_) telemetry_->submit(cluster_->accounting().drainTelemetry());
  telemetry_.reset();
  // The store's writer thread finishes in-flight commits and posts their completions to io_;
  // stop it while io_ still exists (members are destroyed in reverse order, io_ before store_).
  store_.reset();
}

Result<std::unique_ptr<Server>> Server::create(ServerConfig config, const Clock& clock,
                                               std::unique_ptr<store::Store> store) {
  std::unique_ptr<Server> s(new Server(std::move(config), clock, std::move(store)));
  s->logs_ = std::make_unique<control::LogStore>(s->config_.dataDir + "/logs", s->config_.logs);
  ALLOT_RETURN_IF_ERROR(s->logs_->init());
  s->cluster_ = std::make_unique<control::Cluster>(clock, *s->logs_, s->config_.cluster);
  s->controllers_ = std::make_unique<control::Controllers>(*s->cluster_);
  auto contents = s->store_->loadAll();
  if (!contents.ok()) return contents.status().withContext("failed to load the store");
  s->cluster_->load(*contents);
  auto telemetry = telemetry::TelemetryStore::open(s->config_.dataDir + "/telemetry.db",
                                                   s->config_.telemetryRetention, clock);
  if (!telemetry.ok()) return telemetry.status();
  s->telemetry_ = std::move(telemetry).value();
  auto totals = s->telemetry_->loadTotals();
  if (!totals.ok()) return totals.status();
  s->cluster_->accounting().loadUsageTotals(*totals);
  s->cluster_->accounting().setUsageHistory(
      [raw = s->telemetry_.get()](int64_t seq, TimeMs from, TimeMs to) {
        return raw->usageWithin(seq, from, to);
      });
  if (auto adopted = s->cluster_->accounting().adoptUnledgeredJobs(); !adopted.batch.empty()) {
    ALLOT_RETURN_IF_ERROR(s->store_->commit(adopted.batch));
    spdlog::info("ledger: opened entries for {} jobs placed before it existed", adopted.value);
  }
  if (auto admin = s->cluster_->access().bootstrapAdmin()) {
    ALLOT_RETURN_IF_ERROR(s->store_->commit(admin->batch));
    std::string path = s->config_.dataDir + "/admin.token";
    ALLOT_RETURN_IF_ERROR(writeSecretFile(path, admin->value));
    s->newAdminToken_ = admin->value;
  }
  s->login_ = std::make_unique<LoginService>(s->config_.login, clock);
  // Users and teams stored before allotd handed out Unix ids get theirs now, once.
  if (auto ids = s->cluster_->access().assignMissingUnixIds()) {
    ALLOT_RETURN_IF_ERROR(s->store_->commit(ids->batch));
    spdlog::info("identity: gave Unix ids to {} users and teams stored without them", ids->value);
  }
  s->console_ = StaticFiles(s->config_.webDir);
  if (s->console_.enabled())
    spdlog::info("web console: serving {}", s->console_.root());
  else
    spdlog::info("web console: none (not built, and no --web-dir)");
  s->cluster_->setOnQueueChanged([raw = s.get()] { raw->wakeScheduler(); });
  registerRoutes(s->router_, *s);
  spdlog::info("loaded state: teams={} users={} hosts={} jobs={} schema_version={}",
               s->cluster_->world().teams.size(), s->cluster_->world().users.size(),
               s->cluster_->world().hosts.size(), s->cluster_->world().jobs.size(),
               s->store_->schemaVersion());
  return s;
}

// Ends a connection: a plain one by closing our side, a TLS one with its close_notify first.
static asio::awaitable<void> closeStream(beast::tcp_stream& stream) {
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  co_return;
}
static asio::awaitable<void> closeStream(beast::ssl_stream<beast::tcp_stream>& stream) {
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
  co_await stream.async_shutdown(asio::as_tuple(use_awaitable));
}

Result<uint16_t> Server::listen() {
  if (!config_.tlsCertFile.empty() || !config_.tlsKeyFile.empty()) {
    auto ctx = tls::serverContext(config_.tlsCertFile, config_.tlsKeyFile);
    if (!ctx.ok()) return ctx.status();
    tls_ = *ctx;
  }
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(config_.listenAddress, ec);
  if (ec) return Status::InvalidArgument("listen: bad address '" + config_.listenAddress + "'");
  tcp::endpoint ep(addr, config_.port);
  acceptor_.emplace(io_);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + config_.listenAddress + ":" +
                               std::to_string(config_.port) + ": " + ec.message());
  }
  ConnectionLimits limits = config_.connections;
  if (limits.total == 0) {
    rlimit files{};
    const bool known = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY;
    limits.total = connectionsForDescriptors(known ? files.rlim_cur : SIZE_MAX);
  }
  connectionLimiter_ = ConnectionLimiter::create(limits);
  return acceptor_->local_endpoint().port();
}

void Server::run(bool handleSignals) {
  asio::signal_set signals(io_);
  if (handleSignals) {
    signals.add(SIGINT);
    signals.add(SIGTERM);
    signals.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (!ec) {
        spdlog::info("signal {}: shutting down", sig);
        io_.stop();
      }
    });
  }
  asio::co_spawn(io_, acceptLoop(), asio::detached);
  asio::co_spawn(io_, schedulingLoop(), asio::detached);
  asio::co_spawn(io_, livenessLoop(), asio::detached);
  if (login_->directoryEnabled()) asio::co_spawn(io_, recheckDirectoryUsers(*this), asio::detached);
  io_.run();
}

void Server::stop() {
  asio::post(io_, [this] { io_.stop(); });
}

asio::awaitable<void> Server::commit(store::WriteBatch batch) {
  co_await writes_->commit(std::move(batch));
}

asio::awaitable<void> Server::commitAndPush(store::WriteBatch batch,
                                            const std::set<std::string>& pushHosts) {
  if (!batch.empty()) co_await commit(std::move(batch));
  cluster_->push(pushHosts);
}

asio::awaitable<void> Server::applyToRequest(ApiRequest& r, store::WriteBatch batch,
                                             const std::set<std::string>& pushHosts) {
  if (!r.write) {
    co_await commitAndPush(std::move(batch), pushHosts);
    co_return;
  }
  if (!batch.empty()) {
    if (!r.write->slot) r.write->slot = writes_->reserve();
    WritePipeline::add(r.write->slot, std::move(batch));
  }
  r.write->pushHosts.insert(pushHosts.begin(), pushHosts.end());
}

void Server::wakeScheduler() {
  scheduleNeeded_ = true;
  schedulerWake_.cancel();
}

asio::awaitable<void> Server::schedulingLoop() {
  asio::steady_timer rest(io_);
  for (;;) {
    if (!scheduleNeeded_) {
      schedulerWake_.expires_at(asio::steady_timer::time_point::max());
      co_await schedulerWake_.async_wait(asio::as_tuple(use_awaitable));
      continue;
    }
    scheduleNeeded_ = false;
    auto started = std::chrono::steady_clock::now();
    const auto startCpu = threadCpuTime();
    std::optional<sched::Snapshot> taken;
    control::Step start = controllers_->passStart(taken);
    auto onThisThread = std::chrono::steady_clock::now() - started;
    // What the pass costs, as CPU time: its wall time includes waiting for a core on a busy
    // machine, and rests measured from that left GPUs idle (see below).
    std::chrono::nanoseconds cpu = threadCpuTime() - startCpu;
    const bool cancelled = !start.batch.empty();
    passUnsettled_ = cancelled;
    co_await commitStep(std::move(start));
    passUnsettled_ = false;
    // Counted once durable: a reply that shows what a pass did must not show it before the disk
    // holds it (routes.cc's refresh after a submission).
    if (cancelled) ++passesRun_;
    if (!taken) continue;
    // The decision, the long part with a deep queue, runs on the scheduler's thread, so that the
    // API answers meanwhile; the snapshot travels with it and comes back for finishPass. A short
    // one (the last took under kInlineDecision of CPU) is made here: handing it over costs two
    // thread wake-ups, more than it takes, and with a stream of submissions that is most passes.
    auto snapshot = std::make_shared<const sched::Snapshot>(std::move(*taken));
    taken.reset();
    auto decided = std::make_shared<std::optional<Result<sched::Decisions>>>();
    auto decisionCpu = std::make_shared<std::chrono::nanoseconds>(0);
    const bool inline_ = lastDecision_ < kInlineDecision;
    if (inline_) {
      const auto deciding = std::chrono::steady_clock::now();
      const auto decidingCpu = threadCpuTime();
      *decided = cluster_->decider()(*snapshot);
      *decisionCpu = threadCpuTime() - decidingCpu;
      onThisThread += std::chrono::steady_clock::now() - deciding;
    } else {
      auto done = std::make_shared<asio::steady_timer>(io_, asio::steady_timer::time_point::max());
      asio::post(schedulerThread_, [decide = cluster_->decider(), snapshot, decided, decisionCpu,
                                    done, io = io_.get_executor()] {
        const auto decidingCpu = threadCpuTime();
        *decided = decide(*snapshot);
        *decisionCpu = threadCpuTime() - decidingCpu;
        asio::post(io, [done] { done->cancel(); });
      });
      // Nothing else runs on this thread in between, so the cancel cannot come before the wait.
      // (A co_spawn of a lambda coroutine onto the pool instead read freed memory when built by
      // GCC 12.)
      co_await done->async_wait(asio::as_tuple(use_awaitable));
    }
    lastDecision_ = *decisionCpu;
    cpu += *decisionCpu;
    const auto finishing = std::chrono::steady_clock::now();
    const auto finishingCpu = threadCpuTime();
    control::Step pass = controllers_->passFinish(*snapshot, std::move(**decided));
    passUnsettled_ = true;
    cpu += threadCpuTime() - finishingCpu;
    onThisThread += std::chrono::steady_clock::now() - finishing;
    auto took = std::chrono::steady_clock::now() - started;
    metrics_.schedulingPass(std::chrono::duration<double>(took).count(),
                            std::chrono::duration<double>(onThisThread).count(), pass.placed);
    const size_t placed = pass.placed;
    co_await commitStep(std::move(pass));
    passUnsettled_ = false;
    ++passesRun_;  // once durable, as above
    // A deep snapshot's memory is given back on the scheduler's thread too.
    if (!inline_) asio::post(schedulerThread_, [snapshot = std::move(snapshot)] {});
    // A pass walks the whole queue. With a long queue and a stream of submissions, or jobs that
    // end one at a time, passes back to back would keep a core busy deciding, each placing a job
    // or none. So a pass that cost more than a millisecond of CPU rests kPassRestFactor times that,
    // divided by the jobs it placed: a pass that placed nothing rests four times its cost (a fifth
    // of a core at most goes to scheduling), one that filled many GPUs hardly rests (work waits
    // and GPUs come free), and in between the rest lets more GPUs come free for the next pass to
    // fill at once. CPU time, not wall time: on a machine busy with the jobs' own processes a pass
    // of 3 ms of CPU took 15 ms, and rests measured from that left GPUs idle (docs/benchmarks.md,
    // section 2c, for both figures).
    if (cpu > std::chrono::milliseconds(1)) {
      rest.expires_after(cpu * kPassRestFactor / std::max<size_t>(1, placed));
      co_await rest.async_wait(asio::as_tuple(use_awaitable));
    }
  }
}

asio::awaitable<void> Server::livenessLoop() {
  asio::steady_timer timer(io_);
  for (;;) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(asio::as_tuple(use_awaitable));
    for (auto& step : controllers_->tick()) co_await commitStep(step());
    telemetry_->submit(controllers_->drainTelemetry());
  }
}

asio::awaitable<void> Server::commitStep(control::Step step) {
  if (!step.batch.empty()) co_await commit(std::move(step.batch));
  if (step.afterDurable) step.afterDurable();
  cluster_->push(step.pushHosts);
  for (int64_t id : step.notifyJobs) notifyJob(id);
  for (auto& [url, body] : step.webhooks) webhooks_.send(url, std::move(body));
  if (step.wakeScheduler) wakeScheduler();
}

std::shared_ptr<void> Server::holdSessionBody(const std::string& user) {
  auto mine = sessionBodiesOf_.find(user);
  const size_t held = mine == sessionBodiesOf_.end() ? 0 : mine->second;
  if (sessionBodies_ >= kSessionBodiesAtOnce || held >= kSessionBodiesPerUser) return nullptr;
  ++sessionBodies_;
  ++sessionBodiesOf_[user];
  return std::shared_ptr<void>(&sessionBodies_, [this, user](size_t* total) {
    --*total;
    if (auto it = sessionBodiesOf_.find(user); it != sessionBodiesOf_.end() && --it->second == 0)
      sessionBodiesOf_.erase(it);
  });
}

asio::awaitable<void> Server::waitForJobNews(int64_t job, std::chrono::milliseconds timeout) {
  asio::steady_timer timer(io_);
  timer.expires_after(timeout);
  auto it = jobWatchers_.emplace(job, &timer);
  co_await timer.async_wait(asio::as_tuple(use_awaitable));
  jobWatchers_.erase(it);
}

void Server::notifyJob(ApiRequest& r, int64_t job) {
  if (r.write) {
    r.write->notifyJobs.push_back(job);
  } else {
    notifyJob(job);
  }
}

void Server::notifyJob(int64_t job) {
  auto [b, e] = jobWatchers_.equal_range(job);
  for (auto it = b; it != e; ++it) it->second->cancel();
}

asio::awaitable<void> Server::acceptLoop() {
  // Once per episode, not per turn: a loop that logged every failed accept would fill the disk
  // for whoever caused it; refusals likewise, throttled.
  bool failing = false;
  ThrottledWarnings refusals("");
  for (;;) {
    auto [ec, socket] = co_await acceptor_->async_accept(asio::as_tuple(use_awaitable));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      // Out of descriptors or memory: the connection stays queued, and accepting again at once
      // would fail again at once, a busy loop on the I/O thread. Rest, then retry.
      if (!failing) spdlog::warn("accept failed: {}; retrying every 100 ms", ec.message());
      failing = true;
      asio::steady_timer rest(io_, std::chrono::milliseconds(100));
      co_await rest.async_wait(asio::as_tuple(use_awaitable));
      continue;
    }
    if (failing) spdlog::info("accepting connections again");
    failing = false;
    boost::system::error_code peerError;
    const auto peer = socket.remote_endpoint(peerError);
    const std::string address = peerError ? std::string() : peer.address().to_string();
    auto slot = connectionLimiter_->admit(address);
    if (!slot) {
      ++metrics_.connectionsRefused;
      refusals.warn("connection from {} refused: {} open, at most {} in all and {} per client",
                    address, connectionLimiter_->open(), connectionLimiter_->limits().total,
                    connectionLimiter_->limits().perClient);
      socket.close(ec);
      continue;
    }
    if (connectionLimiter_->closedForRoom() != metrics_.idleConnectionsClosed) {
      metrics_.idleConnectionsClosed = connectionLimiter_->closedForRoom();
      refusals.warn(
          "at the limit of {} connections: the one idle longest was closed for one from {}",
          connectionLimiter_->limits().total, address);
    }
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(io_, session(std::move(socket), std::move(*slot)), asio::detached);
  }
}

asio::awaitable<void> Server::session(tcp::socket socket, ConnectionLimiter::Slot slot) {
  if (!tls_) {
    beast::tcp_stream stream(std::move(socket));
    co_await serveHttp(stream, slot);
    co_return;
  }
  beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *tls_);
  beast::get_lowest_layer(stream).expires_after(kHandshakeTimeout);
  slot.idle([&stream] { beast::get_lowest_layer(stream).close(); });
  auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server,
                                              asio::as_tuple(use_awaitable));
  if (!slot.busy() || ec) {
    // Plain HTTP to the TLS port ends here, unanswered; so does a handshake closed to make room.
    spdlog::debug("TLS handshake failed: {}", ec.message());
    co_return;
  }
  co_await serveHttp(stream, slot);
}

Status Server::diskHasRoomForWrites() {
  if (config_.writeReserveBytes <= 0) return Status::Ok();
  // Looked at once every 100 ms at most: every change through the API asks.
  const auto now = std::chrono::steady_clock::now();
  if (now - diskCheckedAt_ >= std::chrono::milliseconds(100)) {
    diskCheckedAt_ = now;
    struct statvfs vfs {};
    // Cannot tell: the commit decides.
    diskFreeBytes_ = ::statvfs(config_.dataDir.c_str(), &vfs) == 0
                         ? static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize)
                         : INT64_MAX;
  }
  if (diskFreeBytes_ >= config_.writeReserveBytes) return Status::Ok();
  diskWarnings_.warn(
      "refusing changes through the API: {} MiB free under {}, under the reserve "
      "of {} MiB (limits.write_disk_reserve_mib); hosts' reports are still recorded",
      diskFreeBytes_ >> 20, config_.dataDir, config_.writeReserveBytes >> 20);
  return Status::Unavailable("allotd's disk is nearly full (" +
                             std::to_string(diskFreeBytes_ >> 20) +
                             " MiB free): changes are refused until an administrator frees space");
}

asio::awaitable<ApiResponse> Server::runHandler(const Route& route, ApiRequest& areq,
                                                std::string_view path, std::string peerAddress) {
  // Every change through the API leaves one audit entry, in the same commit, durable before the
  // reply. Plain statements around co_await: GCC 12 mishandles temporaries inside co_await
  // expressions.
  std::optional<AuditCapture> audit;
  if (AuditCapture::audited(route)) {
    if (Status room = diskHasRoomForWrites(); !room.ok()) co_return ApiResponse::error(room);
    AuditCapture started = co_await AuditCapture::begin(router_, route, areq, path,
                                                        std::move(peerAddress), clock_.nowMs());
    audit.emplace(std::move(started));
  }
  // The handler's changes and the audit entry are one write (RequestWrite), sealed here whatever
  // the handler did, so that no write queued behind it waits for ever.
  RequestWrite write;
  if (audit) areq.write = &write;
  ApiResponse res;
  std::exception_ptr failed;
  std::optional<model::AuditEntry> entry;
  try {
    res = co_await route.handler(areq);
    if (audit) {
      std::optional<model::AuditEntry> finished = co_await audit->finish(router_, res);
      entry = std::move(finished);
    }
    if (entry) {
      if (!write.slot) write.slot = writes_->reserve();
      store::WriteBatch audited;
      audited.add(store::AppendAudit{std::move(*entry)});
      WritePipeline::add(write.slot, std::move(audited));  // moved: before/after may be large
    }
  } catch (...) {
    failed = std::current_exception();
  }
  areq.write = nullptr;  // a local of this frame
  if (write.slot) {
    writes_->seal(write.slot);
    co_await writes_->wait(write.slot);
  } else {
    // A reply that only shows memory may show changes still on their way to disk (a job's end
    // that an agent reported a moment ago): it waits for them, so that nothing a client saw is
    // lost if allotd crashes now.
    co_await writes_->settled();
  }
  // The refresh shows memory as it is now, once a pass has run since the handler and made its
  // changes durable (passesRun() counts only those). Not while a later pass's changes are in
  // memory and their commit is under way: the reply would show a placement a crash could lose.
  // It then shows the job as the handler left it, which is on disk.
  if (!failed && res.refreshAfterWrite && !passUnsettled_) {
    auto refresh = std::move(res.refreshAfterWrite);
    refresh(res);
  }
  res.value.reset();  // the audit has read it: the body alone goes out
  cluster_->push(write.pushHosts);
  for (int64_t id : write.notifyJobs) notifyJob(id);
  if (failed) std::rethrow_exception(failed);
  co_return res;
}

namespace {

// One response in one write: its head (responseHead) and its body as two buffers.
template <typename Stream>
asio::awaitable<std::tuple<boost::system::error_code, size_t>> writeResponse(
    Stream& stream, const http::response<http::string_body>& out) {
  const std::string head = responseHead(out.base());
  const std::array<asio::const_buffer, 2> parts{asio::buffer(head), asio::buffer(out.body())};
  co_return co_await asio::async_write(stream, parts, asio::as_tuple(use_awaitable));
}

}  // namespace

template <typename Stream>
asio::awaitable<void> Server::serveHttp(Stream& stream, ConnectionLimiter::Slot& slot) {
  beast::flat_buffer buffer(kReadBufferLimit);
  boost::system::error_code peerError;
  const auto peer = beast::get_lowest_layer(stream).socket().remote_endpoint(peerError);
  const std::string peerAddress = peerError ? std::string() : peer.address().to_string();
  SessionProxyState proxy;  // this connection's tunnel to a session, kept between requests
  for (;;) {
    beast::get_lowest_layer(stream).expires_after(kIdleTimeout);
    // Until the whole request is in, the connection may be closed first when allotd has no place
    // left for a new one (api/connection_limit.h): a header followed by a body that trickles in
    // must not hold a place for the idle timeout. Closed, not only cancelled, so that its
    // descriptor is free at once (a TLS shutdown would wait for the peer). A request read whole
    // just as its connection was closed is dropped unanswered, as if it had come a moment later.
    slot.idle([&stream] { beast::get_lowest_layer(stream).close(); });
    RequestRead read = co_await readRequest(*this, stream, buffer);
    if (!slot.busy()) break;
    if (read.tooLargeFor) {
      auto out = encodeTooLarge(*read.tooLargeFor);
      co_await writeResponse(stream, out);
      break;
    }
    if (read.unreadable) {
      auto out = encodeUnreadable(*read.unreadable);
      co_await writeResponse(stream, out);
      break;
    }
    if (read.busy) {
      auto res = unavailableResponse(Status::Unavailable(
          "too many large uploads to sessions are under way (at most " +
          std::to_string(kSessionBodiesPerUser) + " of one user's, " +
          std::to_string(kSessionBodiesAtOnce) + " in all); try again in a moment"));
      auto out = encodeResponse(HttpRequest{}, std::move(res));
      out.keep_alive(false);
      co_await writeResponse(stream, out);
      break;
    }
    if (!read.request) break;
    HttpRequest req = std::move(*read.request);
    const bool onSessionOrigin = sessionOfHost(req[http::field::host], config_.sessionDomain) != 0;
    const RequestOwner owner = dispatch(req, onSessionOrigin);
    if (owner == RequestOwner::kSessionProxy) {
      // serveSessionRequest keeps a session's origin to its one session.
      const bool again = co_await serveSessionRequest(*this, stream, buffer, std::move(req), proxy);
      if (!again) break;
      continue;
    }
    if (owner == RequestOwner::kSessionSsh) {
      // Becomes one SSH connection's relay (or answers an error and closes).
      co_await serveSessionSsh(*this, stream, buffer, std::move(req));
      break;
    }
    if (owner == RequestOwner::kAgentStream) {
      beast::get_lowest_layer(stream).expires_never();
      co_await serveAgentStream(*this, std::move(stream), std::move(req));
      co_return;
    }
    ApiOutcome outcome = co_await serveApi(*this, req, onSessionOrigin, peerAddress);
    if (outcome.eventStream) {
      beast::get_lowest_layer(stream).expires_never();
      co_await serveEventStream(*this, stream, *outcome.eventStream);
      break;
    }
    auto out = encodeResponse(req, std::move(outcome.response));
    auto [wec, wn] = co_await writeResponse(stream, out);
    if (wec || !out.keep_alive()) break;
  }
  co_await closeStream(stream);
}

}  // namespace allot::api
