// allot host join-token|join-tokens|revoke-join-token|reset-credential: the join tokens that let
// agents into the pool, and taking a host's identity back (docs/deploy.md). Added under
// `allot host` by addHostCommands.

#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"
#include "common/time_format.h"

namespace allot::cli {
namespace {

struct JoinOpts {
  std::string id;  // a join token's id, or a host's name for reset-credential
  std::string ttl;
  int uses = 1;
};

int createJoinToken(Context& ctx, const JoinOpts& o) {
  json body = {{"uses", o.uses}};
  if (!o.ttl.empty()) {
    auto ttl = parseDurationMs(o.ttl);
    if (!ttl.ok()) return ctx.usageError(ttl.status().withContext("--ttl"));
    body["ttl"] = o.ttl;
  }
  // Showing the token is this command's purpose: it is shown once.
  return ctx.printReply(ctx.post("/hosts/join-tokens", body), [&](const json& made) {
    std::string token = text(made, "token", "");
    std::string expires = text(made, "expires_at", "");
    const int uses = made.value("uses", 1);
    ctx.out() << "Join token: " << token << "\n";
    ctx.out() << "Uses:       " << uses << (uses == 1 ? " (single use)" : " joins") << "\n";
    if (!expires.empty()) {
      ctx.out() << "Expires:    " << expires << " (" << relativeTime(expires, ctx.now()) << ")\n";
    }
    ctx.out() << "It will not be shown again. On " << (uses == 1 ? "the" : "each")
              << " GPU host, run:\n"
              << "  ALLOT_JOIN_TOKEN=" << token << " allot-agent --server " << ctx.serverUrl()
              << "\n"
              << "(in the environment, not as --join-token: other users of the host can read a "
                 "command line)\n";
  });
}

int listJoinTokens(Context& ctx, const JoinOpts&) {
  return ctx.printReply(ctx.get("/hosts/join-tokens"), [&](const json& tokens) {
    Table table({"ID", "CREATED BY", "EXPIRES", "USES LEFT", "STATE"});
    for (const auto& t : tokens) {
      const std::string expires = text(t, "expires_at", "");
      table.addRow(
          {text(t, "id"), text(t, "created_by"),
           expires.empty() ? "-" : relativeTime(expires, ctx.now()),
           std::to_string(t.value("uses_left", 0)) + "/" + std::to_string(t.value("uses", 0)),
           text(t, "state")});
    }
    ctx.out() << (table.empty() ? "No join tokens\n" : table.render());
  });
}

int revokeJoinToken(Context& ctx, const JoinOpts& o) {
  return ctx.printReplyLine(ctx.del("/hosts/join-tokens/" + urlEncode(o.id)), [&](const json&) {
    return "Join token " + o.id + " revoked: no agent can join with it any more";
  });
}

int resetCredential(Context& ctx, const JoinOpts& o) {
  auto reply = ctx.post("/hosts/" + urlEncode(o.id) + "/reset-credential", json::object());
  return ctx.printReplyLine(reply, [&](const json&) {
    return "Host " + o.id +
           ": credential revoked; its agent is disconnected. The next agent to join as " + o.id +
           " (with a join token) takes the host over.";
  });
}

}  // namespace

void addHostJoinCommands(CLI::App* host, Context& ctx) {
  auto o = std::make_shared<JoinOpts>();

  auto* create = host->add_subcommand(
      "join-token", "Make a token that lets agents join the pool (platform-admin)");
  create->add_option("--ttl", o->ttl,
                     "How long the token stays valid, e.g. 24h, 7d "
                     "(default: the server's, 24h)");
  create->add_option("--uses", o->uses, "How many hosts may join with it (default 1)")
      ->check(CLI::Range(1, 10'000));
  onRun(create, ctx, o, createJoinToken);

  auto* list = host->add_subcommand(
      "join-tokens", "List join tokens: who made them, expiry, uses left (platform-admin)");
  onRun(list, ctx, o, listJoinTokens);

  auto* revoke = host->add_subcommand(
      "revoke-join-token", "Revoke a join token: no more joins with it (platform-admin)");
  revoke->add_option("ID", o->id, "The token's id, as `allot host join-tokens` lists it")
      ->required();
  onRun(revoke, ctx, o, revokeJoinToken);

  auto* reset = host->add_subcommand(
      "reset-credential",
      "Revoke a host's credential so that a reinstalled host can join under its name again "
      "(platform-admin)");
  reset->add_option("HOST", o->id, "Host name")->required();
  onRun(reset, ctx, o, resetCredential);
}

}  // namespace allot::cli
