#pragma once
// Where the CLI finds its server and token. Each comes from the first of: the --server/--token
// flag, the ALLOT_SERVER/ALLOT_TOKEN environment variable, the config file that `allot login`
// writes, and (server only) the default http://127.0.0.1:7070. The environment is passed in as a
// lookup function so tests need not touch the process's own.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace allot::cli {

inline constexpr const char* kDefaultServer = "http://127.0.0.1:7070";

// Returns the variable's value, or nullopt when it is unset or empty.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup processEnv();

// What the config file holds. Empty strings mean "not set".
struct ConfigFile {
  std::string server{};
  std::string token{};
  std::string caFile{};  // "ca_file": PEM CA to verify an https:// server with
  std::string team{};    // the team commands act for when they name none (`allot login --team`)
};

// $ALLOT_CONFIG, else $XDG_CONFIG_HOME/allot/config.json, else $HOME/.config/allot/config.json.
Result<std::string> configPath(const EnvLookup& env);
// A missing file is an empty ConfigFile, not an error; an unreadable or malformed one is.
Result<ConfigFile> loadConfig(const std::string& path);
// Writes atomically with mode 0600 (the file holds a secret), creating the directory (0700).
Status saveConfig(const std::string& path, const ConfigFile& config);

struct Settings {
  std::string server;
  std::string token;   // may be empty: commands then fail with the server's 401
  std::string caFile;  // "" = the system's trusted CAs (for https:// servers)
  // The default team of commands that act for one (run, session create, project create, report
  // usage) when they are given no --team: $ALLOT_TEAM, else the config file's "team"; "" = none
  // (the server then takes the caller's only team).
  std::string team;
  // Set when the config file's token was not sent because the server is not the one it was
  // saved for (the server then answers 401, which says so).
  std::string tokenWithheldFrom;
};

// Whether two server URLs name the same server (trailing slashes aside).
bool sameServer(std::string_view a, std::string_view b);

// `flagServer`/`flagToken`/`flagCaFile` are empty when the flag was not given. The CA file comes
// from --ca-file, ALLOT_CA_FILE, then the config file's ca_file; the team from ALLOT_TEAM, then
// the config file's team. The config file is read only when a flag and the environment leave
// something unset.
Result<Settings> resolveSettings(const std::string& flagServer, const std::string& flagToken,
                                 const EnvLookup& env, const std::string& flagCaFile = "");

}  // namespace allot::cli
