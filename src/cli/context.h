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
  // The API client for the resolved server and token, made on first use.
  Result<ApiClient*> api();

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

  // The command chosen on the command line; set by its CLI11 callback, run after parsing.
  void setAction(std::function<int()> action) { action_ = std::move(action); }
  // A command that writes CSV says so from its callback; -o csv elsewhere is a usage error.
  void allowCsv() { csvAllowed_ = true; }
  int runAction();

 private:
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
