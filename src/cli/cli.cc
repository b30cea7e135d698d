#include "cli/cli.h"

#include <algorithm>
#include <iostream>

#include "cli/command_docs.h"
#include "cli/command_hint.h"
#include "cli/commands.h"
#include "cli/context.h"
#include "common/build_info.h"

namespace allot::cli {
namespace {

// The first word that is not a global flag or its value: `allot --server U run ...` -> "run";
// "" when there is none.
std::string commandWord(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a == "--server" || a == "--token" || a == "--ca-file" || a == "-o" || a == "--output") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    return a;
  }
  return "";
}

}  // namespace

int runWith(const std::vector<std::string>& args, const EnvLookup& env, std::istream& in,
            std::ostream& out, std::ostream& err, const Clock& clock) {
  Context ctx(env, in, out, err, clock);
  CLI::App app("allot: run jobs on a shared fleet of GPU hosts", "allot");
  // Global flags may come after the subcommand too: `allot job list -o json`.
  app.fallthrough();
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("allot ") + allotVersion());
  app.add_option("--server", ctx.flags.server,
                 "Server URL (default: $ALLOT_SERVER, the config file, http://127.0.0.1:7070)");
  app.add_option("--token", ctx.flags.token, "API token (default: $ALLOT_TOKEN, the config file)");
  app.add_option("--ca-file", ctx.flags.caFile,
                 "PEM CA certificate(s) to verify an https:// server with (default: "
                 "$ALLOT_CA_FILE, the config file's ca_file, the system's trusted CAs)");
  app.add_option("-o,--output", ctx.flags.output,
                 "Output format: table or json (and csv for `report usage`)")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  app.footer(
      "Config file: $ALLOT_CONFIG, $XDG_CONFIG_HOME/allot/config.json or "
      "~/.config/allot/config.json (written by `allot login`).");

  // Only the commands the command word needs: building the whole tree is most of what a CLI
  // process costs. `--help` alone, completion, man and misspellings get the whole tree.
  const std::string word = commandWord(args);
  static const std::vector<CommandAdder> kNone;
  const bool versionOnly =
      word.empty() && std::find(args.begin(), args.end(), "--version") != args.end();
  const std::vector<CommandAdder>* adders = versionOnly ? &kNone : addersFor(word);
  for (CommandAdder add : adders != nullptr ? *adders : allAdders()) add(app, ctx);

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants them reversed
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // `allot run python -c x` reads -c as a flag of `run`; say where the command belongs.
    // CLI11 has not marked the subcommand as parsed when it throws, so look at the words.
    auto dashes = std::find(args.begin(), args.end(), "--");
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr &&
        std::find(args.begin(), dashes, "run") != dashes) {
      err << "allot: " << e.what()
          << "; put the job's command after `--`: allot run [flags] -- CMD [ARGS...]\n";
      return kUsageExit;
    }
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      app.exit(e, out, err);  // --help and friends
      return 0;
    }
    // A misspelt or missing command: say which ones there are, not CLI11's "A subcommand is
    // required".
    if (auto hint = commandHint(app, args); !hint.empty()) {
      err << "allot: " << hint << "\n";
      return kUsageExit;
    }
    // Usage errors are one line, like every other error of the CLI.
    err << "allot: " << e.what() << " (see --help)\n";
    return kUsageExit;
  }
  return ctx.runAction();
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  SystemClock clock;
  return runWith(args, processEnv(), std::cin, std::cout, std::cerr, clock);
}

}  // namespace allot::cli
