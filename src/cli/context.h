#pragma once
// Context: what every command needs: the global flags, the environment, where output goes, the
// clock, and a lazily-made ApiClient. Built once per run by cli.cc; commands borrow it. One thread.

#include <CLI/CLI.hpp>
#include <functional>
#include <istream>
#include <memory>
#include <ostream>
#include <string>

#include "cli/api_client.h"
#include "cli/config.h"
#include "cli/json.h"
#include "common/clock.h"
#include "common/status.h"

namespace allot::cli {

struct GlobalFlags {
  std::string server;
  std::string token;
  std::string caFile;
  std::string output = "table";  // "table", "json", or "csv" (only where allowCsv was called)
};

class Context {
 public:
  Context(EnvLookup env, std::istream& in, std::ostream& out, std::ostream& err, const Clock& clock)
      : env_(std::move(env)), in_(in), out_(out), err_(err), clock_(clock) {}

  GlobalFlags flags;

  // Settings from flags, environment and config file, resolved on first use.
  Result<Settings> settings();
  // `given` (a --team flag), else the default team (Settings::team), else "".
  std::string teamOr(const std::string& given);
  // The API client for the resolved server and token, made on first use.
  Result<ApiClient*> api();
  // One request through api(): settings that make no client fail it like a refused request, so
  // a command checks one Result.
  Result<json> get(const std::string& path);
  Result<json> post(const std::string& path, const json& body);
  Result<json> put(const std::string& path, const json& body);
  Result<json> patch(const std::string& path, const json& body);
  Result<json> del(const std::string& path);
  // The server's URL as the client reaches it; only once a request went through (the client
  // exists then).
  const std::string& serverUrl() const { return api_->serverUrl(); }

  std::istream& in() { return in_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  const EnvLookup& env() const { return env_; }
  TimeMs now() const { return clock_.nowMs(); }
  bool jsonOutput() const { return flags.output == "json"; }

  // Prints "allot: <message>" on stderr; returns the exit status for a failed command (1).
  int fail(const Status& status);
  // The same for a bad argument caught after parsing; returns kUsageExit (2), as CLI11 does.
  int usageError(const Status& status);
  // Prints `doc` as pretty JSON; returns 0.
  int printJson(const json& doc);
  // How most commands end: a failed request is fail()ed; under -o json the reply is printed as it
  // came; else `print(reply)` writes the human form to out(). Returns 0 when the request went
  // through. The human form is only made when it is shown.
  int printReply(const Result<json>& reply, const std::function<void(const json&)>& print);
  // The same for a human form of one line: `line(reply)`, to which the newline is added.
  int printReplyLine(const Result<json>& reply,
                     const std::function<std::string(const json&)>& line);

  // The command chosen on the command line; set by its CLI11 callback, run after parsing.
  void setAction(std::function<int()> action) { action_ = std::move(action); }
  // A command that writes CSV says so from its callback; -o csv elsewhere is a usage error.
  void allowCsv() { csvAllowed_ = true; }
  int runAction();

 private:
  Result<json> request(const std::function<Result<json>(ApiClient&)>& call);

  EnvLookup env_;
  std::istream& in_;
  std::ostream& out_;
  std::ostream& err_;
  const Clock& clock_;
  std::optional<Settings> settings_;
  std::unique_ptr<ApiClient> api_;
  std::function<int()> action_;
  bool csvAllowed_ = false;
};

// Makes `cmd` run fn(ctx, *opts) once the whole command line has parsed.
template <typename Opts, typename Fn>
void onRun(CLI::App* cmd, Context& ctx, std::shared_ptr<Opts> opts, Fn fn) {
  cmd->callback([&ctx, opts, fn] { ctx.setAction([&ctx, opts, fn] { return fn(ctx, *opts); }); });
}

// Exit status for a bad argument found after CLI11 parsed (same as CLI11's usage errors).
inline constexpr int kUsageExit = 2;

}  // namespace allot::cli
