// allot ssh, allot ssh-config: OpenSSH into sessions through allotd (docs/sessions.md, "SSH").
//
// `allot ssh N` runs the system's ssh with allotd as the way in: its ProxyCommand is
// `allot ssh N --stdio` (the bytes of the SSH connection over an upgraded HTTPS request), and its
// KnownHostsCommand `allot ssh N --known-hosts` (the session's host key, as its agent reported
// it), so the host key is pinned without a trust-on-first-use prompt. `allot ssh-config` writes
// the same as Host entries, for VS Code Remote-SSH and plain ssh.

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/session_lookup.h"

namespace allot::cli {
namespace {

struct SshOpts {
  std::string session;  // id or name
  bool stdio = false;
  bool knownHosts = false;
  std::string identity;
  std::vector<std::string> command;
  bool install = false;
  bool viaAllotd = false;
};

// "host:port" of the session's direct port; empty when it has none (or we are told not to).
std::pair<std::string, std::string> directOf(const json& session, bool viaAllotd) {
  const json direct = session["ssh"].value("direct", json());
  if (viaAllotd || !direct.is_string()) return {};
  const std::string text = direct.get<std::string>();
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return {};
  return {text.substr(0, colon), text.substr(colon + 1)};
}

// This program's own path, for the commands ssh runs back into it.
std::string selfPath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("allot");
}

// One word for the shell that runs ssh's ProxyCommand and KnownHostsCommand.
std::string shellWord(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789@%+=:,./_-") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `allot [--server URL] [--ca-file F] ssh SESSION` as a command line: the token is not on it
// (every user of the machine can read command lines); it comes from ALLOT_TOKEN or the config.
std::string selfCommand(const Settings& s, const std::string& session) {
  std::string cmd = shellWord(selfPath()) + " --server " + shellWord(s.server);
  if (!s.caFile.empty()) cmd += " --ca-file " + shellWord(s.caFile);
  return cmd + " ssh " + shellWord(session);
}

// The session, running and offering SSH; else why not.
Result<json> sshSession(ApiClient& api, const std::string& idOrName) {
  auto id = findSession(api, idOrName);
  if (!id.ok()) return id.status();
  auto s = api.get("/sessions/" + std::to_string(*id));
  if (!s.ok()) return s.status();
  const std::string state = s->value("state", "");
  if (state != "running")
    return Status::FailedPrecondition("session " + std::to_string(*id) + " is " + state +
                                      (state == "starting" ? "; try again in a moment" : ""));
  if (!s->contains("ssh") || !(*s)["ssh"].is_object())
    return Status::FailedPrecondition("session " + std::to_string(*id) + ": its host " +
                                      s->value("host", "") + " offers no SSH");
  return s;
}

int sshStdio(Context& ctx, const SshOpts& o) {
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  auto id = findSession(**api, o.session);
  if (!id.ok()) return ctx.fail(id.status());
  Status st = (*api)->relayUpgraded("/sessions/" + std::to_string(*id) + "/ssh", STDIN_FILENO,
                                    STDOUT_FILENO);
  return st.ok() ? 0 : ctx.fail(st);
}

int sshKnownHosts(Context& ctx, const SshOpts& o) {
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  auto s = sshSession(**api, o.session);
  if (!s.ok()) return ctx.fail(s.status());
  // Any name: ssh asks this command about this one host only.
  ctx.out() << "* " << (*s)["ssh"].value("host_key", "") << "\n";
  return 0;
}

int sshConnect(Context& ctx, const SshOpts& o) {
  auto settings = ctx.settings();
  if (!settings.ok()) return ctx.fail(settings.status());
  auto api = ctx.api();
  if (!api.ok()) return ctx.fail(api.status());
  auto s = sshSession(**api, o.session);
  if (!s.ok()) return ctx.fail(s.status());
  // A login is a shell as the owner: a session shared with us opens its Jupyter, not SSH, and
  // allotd's relay says it does not exist; so do we, before ssh adds its own noise.
  if (auto me = (*api)->get("/whoami"); me.ok() && me->value("name", "") != s->value("user", ""))
    return ctx.fail(Status::NotFound("no session " + std::to_string(s->value("id", int64_t{0})) +
                                     " of yours to log in to (SSH is for its owner only)"));
  // Said here, plainly, rather than as sshd's "Permission denied" after the fact.
  if (auto keys = (*api)->get("/ssh-keys"); keys.ok() && keys->empty())
    return ctx.fail(Status::FailedPrecondition(
        "you have no SSH key; add one with `allot ssh-key add ~/.ssh/id_ed25519.pub`"));
  const std::string id = std::to_string(s->value("id", int64_t{0}));
  const std::string self = selfCommand(*settings, id);
  const auto [directHost, directPort] = directOf(*s, o.viaAllotd);
  // Straight to the host's port where the session has one, else through allotd.
  std::vector<std::string> argv = {"ssh"};
  if (directHost.empty()) {
    argv.insert(argv.end(), {"-o", "ProxyCommand=" + self + " --stdio"});
  } else {
    argv.insert(argv.end(), {"-p", directPort, "-o", "HostKeyAlias=allot-session-" + id});
  }
  argv.insert(argv.end(), {"-o", "KnownHostsCommand=" + self + " --known-hosts", "-o",
                           "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/dev/null", "-o",
                           "GlobalKnownHostsFile=/dev/null"});
  if (!o.identity.empty()) {
    argv.insert(argv.end(), {"-i", o.identity, "-o", "IdentitiesOnly=yes"});
  }
  argv.insert(argv.end(), {"-l", (*s)["ssh"].value("user", ""),
                           directHost.empty() ? "allot-session-" + id : directHost});
  if (!o.command.empty()) {
    argv.push_back("--");
    argv.insert(argv.end(), o.command.begin(), o.command.end());
  }
  // ProxyCommand and KnownHostsCommand reach the same server with the same token.
  ::setenv("ALLOT_TOKEN", settings->token.c_str(), 1);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  ctx.out().flush();
  ctx.err().flush();
  ::execvp("ssh", args.data());
  return ctx.fail(Status::Unavailable(std::string("cannot run ssh: ") + std::strerror(errno) +
                                      " (install OpenSSH's client)"));
}

int ssh(Context& ctx, const SshOpts& o) {
  if (o.stdio && o.knownHosts)
    return ctx.usageError(Status::InvalidArgument("--stdio and --known-hosts: give one"));
  if ((o.stdio || o.knownHosts) && (!o.command.empty() || !o.identity.empty()))
    return ctx.usageError(Status::InvalidArgument(
        std::string(o.stdio ? "--stdio" : "--known-hosts") + " takes no command or identity"));
  if (o.stdio) return sshStdio(ctx, o);
  if (o.knownHosts) return sshKnownHosts(ctx, o);
  return sshConnect(ctx, o);
}

// The Host entries: one per running session of the caller that offers SSH, named allot-<name>.
Result<std::string> sshConfigText(Context& ctx, int* entries) {
  auto settings = ctx.settings();
  if (!settings.ok()) return settings.status();
  auto api = ctx.api();
  if (!api.ok()) return api.status();
  auto sessions = (*api)->get("/sessions");
  if (!sessions.ok()) return sessions.status();
  std::ostringstream out;
  out << "# Written by `allot ssh-config` for " << settings->server
      << "; run it again after starting sessions.\n"
      << "# The token comes from ALLOT_TOKEN or allot's config file (allot login).\n";
  *entries = 0;
  for (const auto& s : *sessions) {
    if (s.value("state", "") != "running" || !s.contains("ssh") || !s["ssh"].is_object()) continue;
    const std::string name = s.value("name", "");
    const std::string self = selfCommand(*settings, name);
    const auto [directHost, directPort] = directOf(s, false);
    out << "\nHost allot-" << name << "\n"
        << "  User " << s["ssh"].value("user", "") << "\n";
    if (directHost.empty())
      out << "  ProxyCommand " << self << " --stdio\n";
    else
      out << "  HostName " << directHost << "\n"
          << "  Port " << directPort << "\n";
    out << "  KnownHostsCommand " << self << " --known-hosts\n"
        << "  StrictHostKeyChecking yes\n"
        << "  UserKnownHostsFile /dev/null\n"
        << "  GlobalKnownHostsFile /dev/null\n";
    ++*entries;
  }
  return out.str();
}

// ~/.ssh of the user running us, as ssh itself finds it (from the password database).
std::string sshDir() {
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr)
    return std::string(pw->pw_dir) + "/.ssh";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.ssh";
}

int sshConfig(Context& ctx, const SshOpts& o) {
  int entries = 0;
  auto text = sshConfigText(ctx, &entries);
  if (!text.ok()) return ctx.fail(text.status());
  if (!o.install) {
    ctx.out() << *text;
    return 0;
  }
  const std::string dir = sshDir();
  ::mkdir(dir.c_str(), 0700);
  const std::string ours = dir + "/allot_config";
  {
    std::ofstream f(ours, std::ios::trunc);
    f << *text;
    if (!f.flush()) return ctx.fail(Status::Unavailable("cannot write " + ours));
  }
  ::chmod(ours.c_str(), 0600);
  // ssh reads an Include only before the first Host line: it goes at the top, once.
  const std::string main = dir + "/config";
  std::string existing;
  {
    std::ifstream in(main);
    std::stringstream buf;
    buf << in.rdbuf();
    existing = buf.str();
  }
  if (existing.find("Include allot_config") == std::string::npos) {
    std::ofstream f(main, std::ios::trunc);
    f << "Include allot_config\n" << existing;
    if (!f.flush()) return ctx.fail(Status::Unavailable("cannot write " + main));
    ::chmod(main.c_str(), 0600);
  }
  ctx.out() << "wrote " << entries << " host entr" << (entries == 1 ? "y" : "ies") << " to " << ours
            << " (ssh allot-NAME, or pick it in VS Code's Remote-SSH)\n";
  return 0;
}

}  // namespace

void addSshCommands(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<SshOpts>();
  auto* ssh_ = app.add_subcommand(
      "ssh", "Log in to a running session over SSH, through allotd (needs an `allot ssh-key`)");
  ssh_->add_option("session", o->session, "session id or name")->required();
  ssh_->add_flag("--stdio", o->stdio,
                 "carry one SSH connection on stdin/stdout (ssh's ProxyCommand)");
  ssh_->add_flag("--known-hosts", o->knownHosts,
                 "print the session's host key as known_hosts lines (ssh's KnownHostsCommand)");
  ssh_->add_option("-i,--identity", o->identity, "private key file for ssh -i");
  ssh_->add_flag("--via-allotd", o->viaAllotd,
                 "go through allotd even where the session has a direct port");
  ssh_->add_option("command", o->command, "command to run instead of a login shell (after --)");
  onRun(ssh_, ctx, o, ssh);

  auto c = std::make_shared<SshOpts>();
  auto* config = app.add_subcommand(
      "ssh-config", "Print ssh Host entries (allot-NAME) for your running sessions");
  config->add_flag("--install", c->install,
                   "write them to ~/.ssh/allot_config and Include it from ~/.ssh/config");
  onRun(config, ctx, c, sshConfig);
}

}  // namespace allot::cli
