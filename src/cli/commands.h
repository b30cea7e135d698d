#pragma once
// The CLI's commands, one file per noun. Each function adds its subcommands to the root app; a
// chosen command records its action on the Context, and cli.cc runs it after parsing succeeds.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/context.h"

namespace allot::cli {

// A noun's command (`allot token`): it does nothing itself, so one of its subcommands must follow.
inline CLI::App* addGroup(CLI::App& parent, const std::string& name, const std::string& help) {
  auto* group = parent.add_subcommand(name, help);
  group->require_subcommand(1);
  return group;
}

void addAuthCommands(CLI::App& app, Context& ctx);    // login, whoami
void addOrgCommands(CLI::App& app, Context& ctx);     // team, user, project
void addTokenCommands(CLI::App& app, Context& ctx);   // token
void addSshKeyCommands(CLI::App& app, Context& ctx);  // ssh-key
void addSshCommands(CLI::App& app, Context& ctx);     // ssh, ssh-config
void addHostCommands(CLI::App& app, Context& ctx);    // host
// host drain, resume, fail, retire, log; called by addHostCommands on its `host` command.
void addHostLifecycleCommands(CLI::App* host, Context& ctx);
void addHostHandoverCommands(CLI::App* host, Context& ctx);
// host join-token, join-tokens, revoke-join-token, reset-credential; called by addHostCommands.
void addHostJoinCommands(CLI::App* host, Context& ctx);
// host upgrade, upgrades (rolling upgrades of a pool); called by addHostCommands.
void addHostUpgradeCommands(CLI::App* host, Context& ctx);
void addRunCommand(CLI::App& app, Context& ctx);   // run
void addJobCommands(CLI::App& app, Context& ctx);  // job
// team quota, project quota; after addOrgCommands, whose team and project commands it extends.
void addQuotaCommands(CLI::App& app, Context& ctx);
// team idle-policy (after addOrgCommands), events.
void addIdleCommands(CLI::App& app, Context& ctx);
void addImageCommands(CLI::App& app, Context& ctx);       // team image-allow
void addTeamImageCommands(CLI::App& app, Context& ctx);   // team default-image, registry-login
void addImageCacheCommands(CLI::App& app, Context& ctx);  // image list, prune, prepull
void addReportCommands(CLI::App& app, Context& ctx);      // report usage
void addLeaseCommands(CLI::App& app, Context& ctx);       // lease
void addAuditCommands(CLI::App& app, Context& ctx);       // audit, audit export
void addDocCommands(CLI::App& app, Context& ctx);         // completion, man
void addConfigCommands(CLI::App& app, Context& ctx);      // config show, set, unset
void addProfileCommands(CLI::App& app, Context& ctx);     // profile
void addSessionCommands(CLI::App& app, Context& ctx);     // session

// Which of the functions above a command word needs, in the order the whole tree is built:
// `allot run` builds only run's command, so that a CLI process starts in a
// fraction of the time a tree of every command takes (docs/benchmarks.md, CLI start-up). Null
// for a word that needs every command (completion, man, a misspelling to hint at).
using CommandAdder = void (*)(CLI::App&, Context&);
const std::vector<CommandAdder>* addersFor(const std::string& word);
// Every adder, in order: the whole tree.
const std::vector<CommandAdder>& allAdders();

}  // namespace allot::cli
