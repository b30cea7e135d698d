// allot ssh-key: the SSH public keys a user reaches their sessions with (docs/access.md).

#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/table.h"

namespace allot::cli {
namespace {

// More than any public key file; a bound so a mistaken path (a disk image) is not read whole.
constexpr std::streamsize kMaxKeyFileBytes = 64 * 1024;

struct SshKeyOpts {
  std::string file;
  std::string fingerprint;
  std::string user;
};

std::string userQuery(const SshKeyOpts& o) {
  return o.user.empty() ? "" : "?user=" + urlEncode(o.user);
}

Result<std::string> readKeyFile(Context& ctx, const std::string& file) {
  std::ifstream f;
  std::istream* in = &ctx.in();
  if (file != "-") {
    f.open(file, std::ios::binary);
    if (!f) return Status::InvalidArgument("cannot read '" + file + "'", "FILE");
    in = &f;
  }
  std::string text(kMaxKeyFileBytes, '\0');
  in->read(text.data(), kMaxKeyFileBytes);
  text.resize(static_cast<size_t>(in->gcount()));
  return text;
}

int sshKeyAdd(Context& ctx, const SshKeyOpts& o) {
  auto line = readKeyFile(ctx, o.file);
  if (!line.ok()) return ctx.fail(line.status());
  // allotd refuses these too, but a private key must not even leave this machine.
  if (line->find("PRIVATE KEY") != std::string::npos)
    return ctx.fail(Status::InvalidArgument(
        "'" + o.file + "' is a PRIVATE key: never upload it; give the .pub file next to it"));
  auto reply = ctx.post("/ssh-keys" + userQuery(o), json{{"key", *line}});
  return ctx.printReply(reply, [&](const json& added) {
    const std::string comment = text(added, "comment", "");
    ctx.out() << "Added SSH key " << text(added, "fingerprint") << " (" << text(added, "type")
              << (comment.empty() ? "" : ", " + comment) << ")"
              << (o.user.empty() ? "" : " for " + o.user) << "\n";
  });
}

int sshKeyList(Context& ctx, const SshKeyOpts& o) {
  return ctx.printReply(ctx.get("/ssh-keys" + userQuery(o)), [&](const json& keys) {
    Table table({"FINGERPRINT", "TYPE", "COMMENT", "ADDED"});
    for (const auto& k : keys) {
      table.addRow({text(k, "fingerprint"), text(k, "type"), text(k, "comment", ""),
                    relativeTime(text(k, "added_at", ""), ctx.now())});
    }
    ctx.out() << table.render();
  });
}

int sshKeyRemove(Context& ctx, const SshKeyOpts& o) {
  // Fingerprints hold '/' and '+': encoded, they stay one path segment.
  return ctx.printReplyLine(
      ctx.del("/ssh-keys/" + urlEncode(o.fingerprint) + userQuery(o)),
      [](const json& removed) { return "Removed SSH key " + text(removed, "fingerprint"); });
}

}  // namespace

void addSshKeyCommands(CLI::App& app, Context& ctx) {
  auto* sshKey = addGroup(app, "ssh-key", "Your SSH public keys: add, list, remove");
  auto o = std::make_shared<SshKeyOpts>();
  const char* userHelp = "Another user's keys (platform admin)";

  auto* add = sshKey->add_subcommand("add", "Register a public key (a .pub file)");
  add->add_option("FILE", o->file, "The public key file (~/.ssh/id_ed25519.pub); - for stdin")
      ->required();
  add->add_option("--user", o->user, userHelp);
  onRun(add, ctx, o, sshKeyAdd);

  auto* list = sshKey->add_subcommand("list", "List registered keys");
  list->add_option("--user", o->user, userHelp);
  onRun(list, ctx, o, sshKeyList);

  auto* remove = sshKey->add_subcommand("remove", "Remove a key");
  remove->add_option("FINGERPRINT", o->fingerprint, "SHA256:... as `allot ssh-key list` shows it")
      ->required();
  remove->add_option("--user", o->user, userHelp);
  onRun(remove, ctx, o, sshKeyRemove);
}

}  // namespace allot::cli
