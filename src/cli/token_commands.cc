// allot token: a user's named API tokens (and a service account's, for those who run it).

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

struct TokenOpts {
  std::string id;
  std::string name;
  std::string expires = "90d";
  std::string user;
};

int tokenCreate(Context& ctx, const TokenOpts& o) {
  json body = {{"expires_in", o.expires}};
  if (!o.name.empty()) body["name"] = o.name;
  if (!o.user.empty()) body["user"] = o.user;
  // Showing the secret is this command's purpose: it exists nowhere else.
  return ctx.printReply(ctx.post("/tokens", body), [&](const json& made) {
    std::string expires = text(made, "expires_at", "");
    ctx.out() << "Created token " << text(made, "id") << " for " << text(made, "user")
              << (expires.empty() || expires == "-" ? ", no expiry" : ", expires " + expires)
              << ".\n"
              << "Token: " << text(made, "token") << "\n"
              << "Keep it now: it will not be shown again.\n";
  });
}

int tokenList(Context& ctx, const TokenOpts& o) {
  auto list = ctx.get("/tokens" + (o.user.empty() ? "" : "?user=" + urlEncode(o.user)));
  return ctx.printReply(list, [&](const json& tokens) {
    Table table({"ID", "NAME", "KIND", "CREATED", "EXPIRES"});
    for (const auto& t : tokens) {
      std::string expires = text(t, "expires_at", "");
      table.addRow({text(t, "id"), text(t, "name"), text(t, "kind"),
                    relativeTime(text(t, "created_at", ""), ctx.now()),
                    expires.empty() ? "never" : expires});
    }
    ctx.out() << table.render();
  });
}

int tokenRevoke(Context& ctx, const TokenOpts& o) {
  return ctx.printReplyLine(ctx.del("/tokens/" + urlEncode(o.id)),
                            [&](const json&) { return "Revoked token " + o.id; });
}

}  // namespace

void addTokenCommands(CLI::App& app, Context& ctx) {
  auto* token = addGroup(app, "token", "Your API tokens: create, list, revoke");
  auto o = std::make_shared<TokenOpts>();

  auto* create = token->add_subcommand("create", "Create an API token and print it, once");
  create->add_option("--name", o->name, "A label for it (laptop, ci)");
  create->add_option("--expires", o->expires, "How long it is valid: 30d, 12h, or never")
      ->capture_default_str();
  create->add_option("--user", o->user,
                     "A service account you run (team-admin of its team, or platform admin)");
  onRun(create, ctx, o, tokenCreate);

  auto* list = token->add_subcommand("list", "List tokens (never their secrets)");
  list->add_option("--user", o->user, "A service account you run, or anyone (platform admin)");
  onRun(list, ctx, o, tokenList);

  auto* revoke = token->add_subcommand("revoke", "Revoke a token at once");
  revoke->add_option("ID", o->id, "Token id (tok-N)")->required();
  onRun(revoke, ctx, o, tokenRevoke);
}

}  // namespace allot::cli
