#pragma once
// Shell completion and the manual page, both written from the CLI's own definitions (the same
// CLI11 tree that --help prints), so that neither can fall out of step with the commands:
// `allot completion bash|zsh` and `allot man` (make run installs both; docs/cli.md).

#include <CLI/CLI.hpp>
#include <string>

namespace allot::cli {

// A bash script defining _allot and `complete -F _allot allot`: commands at each level, then
// the flags of the command typed (its own and the global ones).
std::string bashCompletion(CLI::App& app);
// The same for zsh, through zsh's bashcompinit.
std::string zshCompletion(CLI::App& app);
// allot(1) in man(7) roff: every command with its description, arguments and flags.
std::string manPage(CLI::App& app, const std::string& version);

}  // namespace allot::cli
