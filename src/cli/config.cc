#include "cli/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace allot::cli {
namespace {

using nlohmann::json;

std::string errnoText() { return std::strerror(errno); }

std::string parentDir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// mkdir -p, new directories with mode 0700.
Status makeDirs(const std::string& dir) {
  if (dir.empty() || dir == "/" || dir == ".") return Status::Ok();
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return Status::FailedPrecondition("'" + dir + "' exists and is not a directory");
  }
  ALLOT_RETURN_IF_ERROR(makeDirs(parentDir(dir)));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable("cannot create directory '" + dir + "': " + errnoText());
  }
  return Status::Ok();
}

Status writeAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Unavailable(errnoText());
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

EnvLookup processEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

Result<std::string> configPath(const EnvLookup& env) {
  if (auto p = env("ALLOT_CONFIG")) return *p;
  if (auto xdg = env("XDG_CONFIG_HOME")) return *xdg + "/allot/config.json";
  if (auto home = env("HOME")) return *home + "/.config/allot/config.json";
  return Status::FailedPrecondition(
      "cannot tell where the config file lives: none of ALLOT_CONFIG, XDG_CONFIG_HOME, HOME is "
      "set");
}

Result<ConfigFile> loadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return ConfigFile{};
    return Status::Unavailable("cannot read config file '" + path + "': " + errnoText());
  }
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return Status::InvalidArgument("config file '" + path +
                                   "' is not a JSON object; fix it or run `allot login` again");
  }
  ConfigFile out;
  auto str = [&](const char* key) -> std::string {
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  out.server = str("server");
  out.token = str("token");
  out.caFile = str("ca_file");
  out.team = str("team");
  return out;
}

Status saveConfig(const std::string& path, const ConfigFile& config) {
  auto context = [&](const std::string& why) {
    return Status::Unavailable("cannot write config file '" + path + "': " + why);
  };
  Status dirs = makeDirs(parentDir(path));
  if (!dirs.ok()) return context(dirs.message());
  json doc = json::object();
  if (!config.server.empty()) doc["server"] = config.server;
  if (!config.token.empty()) doc["token"] = config.token;
  if (!config.caFile.empty()) doc["ca_file"] = config.caFile;
  if (!config.team.empty()) doc["team"] = config.team;
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // A new file of our own, never one planted there (a link to elsewhere, in a shared directory).
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return context(errnoText());
  // open()'s mode is filtered by the umask and ignored for an existing file; make sure.
  Status st =
      ::fchmod(fd, 0600) == 0 ? writeAll(fd, doc.dump(2) + "\n") : Status::Unavailable(errnoText());
  if (st.ok() && ::fsync(fd) != 0) st = Status::Unavailable(errnoText());
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = Status::Unavailable(errnoText());
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return context(st.message());
  }
  return Status::Ok();
}

bool sameServer(std::string_view a, std::string_view b) {
  while (a.ends_with('/')) a.remove_suffix(1);
  while (b.ends_with('/')) b.remove_suffix(1);
  return a == b;
}

Result<Settings> resolveSettings(const std::string& flagServer, const std::string& flagToken,
                                 const EnvLookup& env, const std::string& flagCaFile) {
  Settings s;
  s.server = flagServer;
  s.token = flagToken;
  s.caFile = flagCaFile;
  if (s.server.empty()) s.server = env("ALLOT_SERVER").value_or("");
  if (s.token.empty()) s.token = env("ALLOT_TOKEN").value_or("");
  if (s.caFile.empty()) s.caFile = env("ALLOT_CA_FILE").value_or("");
  s.team = env("ALLOT_TEAM").value_or("");
  // A broken config file stops a command only when it needed the server or token from it; a CA
  // file and a team are merely looked for there.
  const bool needed = s.server.empty() || s.token.empty();
  if (needed || s.caFile.empty() || s.team.empty()) {
    auto path = configPath(env);
    if (path.ok()) {
      auto file = loadConfig(*path);
      if (!file.ok() && needed) return file.status();
      if (file.ok()) {
        if (s.server.empty()) s.server = file->server;
        // The saved token belongs to the saved server. Sent wherever --server or ALLOT_SERVER
        // point (a repository's .envrc, say), it would hand the account to whoever runs that.
        const std::string savedFor = file->server.empty() ? kDefaultServer : file->server;
        if (s.token.empty() && !file->token.empty()) {
          if (sameServer(s.server.empty() ? savedFor : s.server, savedFor))
            s.token = file->token;
          else
            s.tokenWithheldFrom = s.server;
        }
        if (s.caFile.empty()) s.caFile = file->caFile;
        if (s.team.empty()) s.team = file->team;
      }
    }
  }
  if (s.server.empty()) s.server = kDefaultServer;
  return s;
}

}  // namespace allot::cli
