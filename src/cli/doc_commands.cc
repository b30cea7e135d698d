// allot completion bash|zsh, allot man: written from the CLI's own command tree
// (cli/command_docs.h), so they always match what --help says.

#include "cli/command_docs.h"
#include "cli/commands.h"
#include "common/build_info.h"

namespace allot::cli {

void addDocCommands(CLI::App& app, Context& ctx) {
  auto shell = std::make_shared<std::string>();
  auto* completion = app.add_subcommand(
      "completion", "Print a shell completion script: source <(allot completion bash)");
  completion->add_option("SHELL", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  completion->footer(
      "Installed for you by `make run` (bash: ~/.local/share/bash-completion/completions/allot).");
  completion->callback([&app, &ctx, shell] {
    ctx.setAction([&app, &ctx, shell] {
      ctx.out() << (*shell == "zsh" ? zshCompletion(app) : bashCompletion(app));
      return 0;
    });
  });
  auto* man = app.add_subcommand("man", "Print the allot(1) manual page: allot man | man -l -");
  man->footer("Installed for you by `make run` (~/.local/share/man/man1/allot.1).");
  man->callback([&app, &ctx] {
    ctx.setAction([&app, &ctx] {
      ctx.out() << manPage(app, allotVersion());
      return 0;
    });
  });
}

}  // namespace allot::cli
