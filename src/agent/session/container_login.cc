#include "agent/session/container_login.h"

#include <sodium.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/bounded_json.h"

namespace allot::agent {

using json = nlohmann::json;

namespace {

// A user or group id as config.json writes it: an unsigned integer below (uid_t)-1, which the
// kernel reserves. Anything else (a negative number, a fraction, one that a cast would wrap onto
// another id, root's among them) is refused, never converted.
uint32_t idOf(const json& v, const char* what) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() >= 0xFFFFFFFFu)
    throw std::invalid_argument(std::string(what) + " is not a user or group id");
  return static_cast<uint32_t>(v.get<uint64_t>());
}

}  // namespace

bool loginVariable(const std::string& name) {
  static const char* kept[] = {"TERM",
                               "LANG",
                               "LANGUAGE",
                               "COLORTERM",
                               "SSH_CLIENT",
                               "SSH_CONNECTION",
                               "SSH_ORIGINAL_COMMAND"};
  for (const char* k : kept) {
    if (name == k) return true;
  }
  return name.rfind("LC_", 0) == 0 && name.size() > 3 &&
         name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_", 3) == std::string::npos;
}

std::string encodeLoginRequest(const LoginRequest& request) {
  json env = json::object();
  for (const auto& [k, v] : request.env) {
    if (loginVariable(k)) env[k] = v;
  }
  // The command and values are the client's bytes: replaced, not refused, where not UTF-8.
  return json{{"command", request.command}, {"tty", request.tty}, {"env", env}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

Result<LoginRequest> decodeLoginRequest(const std::string& text) {
  if (text.size() > kMaxLoginRequest) return Status::InvalidArgument("login request too long");
  // Bounded nesting: what follows a parse (copies, comparisons) may recurse once per level, and
  // this runs as root on what the session's owner sent.
  const json j = parseBoundedJson(text);
  if (!j.is_object() || !j.contains("command") || !j["command"].is_string() || !j.contains("tty") ||
      !j["tty"].is_boolean() || !j.contains("env") || !j["env"].is_object())
    return Status::InvalidArgument("malformed login request");
  LoginRequest r;
  r.command = j["command"].get<std::string>();
  r.tty = j["tty"].get<bool>();
  for (const auto& [k, v] : j["env"].items()) {
    if (!v.is_string()) return Status::InvalidArgument("login variable " + k + " is not a string");
    if (!loginVariable(k)) return Status::InvalidArgument("a login may not set " + k);
    const std::string value = v.get<std::string>();
    if (value.find('\0') != std::string::npos)
      return Status::InvalidArgument("login variable " + k + " holds a NUL");
    r.env[k] = value;
  }
  if (r.command.find('\0') != std::string::npos)
    return Status::InvalidArgument("the command holds a NUL");
  return r;
}

Result<ContainerProcess> parseContainerProcess(const std::string& crunStatus,
                                               const std::string& configJson) {
  const json status = parseBoundedJson(crunStatus);
  const json config = parseBoundedJson(configJson);
  // The kernel's pids are at most 2^22 (pid_max); one past an int would wrap onto another.
  if (!status.is_object() || !status.contains("pid") || !status["pid"].is_number_integer() ||
      status["pid"].get<int64_t>() <= 1 || status["pid"].get<int64_t>() > (int64_t{1} << 22))
    return Status::FailedPrecondition("the container's state names no process");
  ContainerProcess p;
  p.pid = static_cast<pid_t>(status["pid"].get<int64_t>());
  if (status.contains("process-start-time") && status["process-start-time"].is_number_unsigned())
    p.startTime = status["process-start-time"].get<uint64_t>();
  if (!config.is_object() || !config.contains("process") || !config["process"].is_object())
    return Status::FailedPrecondition("the container's config.json has no process");
  const json& process = config["process"];
  try {
    const json& user = process.at("user");
    p.uid = idOf(user.at("uid"), "uid");
    p.gid = idOf(user.at("gid"), "gid");
    for (const auto& g : user.value("additionalGids", json::array()))
      p.groups.push_back(idOf(g, "an additional gid"));
    for (const auto& e : process.value("env", json::array())) p.env.push_back(e.get<std::string>());
    p.cwd = process.value("cwd", "/");
  } catch (const std::exception& e) {
    return Status::FailedPrecondition(std::string("the container's process is malformed: ") +
                                      e.what());
  }
  const json annotations = config.value("annotations", json::object());
  std::string bpf;
  if (annotations.is_object() && annotations.contains("run.oci.seccomp_bpf_data")) {
    const json& data = annotations["run.oci.seccomp_bpf_data"];
    if (!data.is_string())
      return Status::FailedPrecondition("the container's seccomp program is malformed");
    bpf = data.get<std::string>();
  }
  if (!bpf.empty()) {
    p.seccompBpf.resize(bpf.size());
    size_t length = 0;
    if (sodium_base642bin(reinterpret_cast<unsigned char*>(p.seccompBpf.data()),
                          p.seccompBpf.size(), bpf.data(), bpf.size(), nullptr, &length, nullptr,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        length == 0 || length % 8 != 0)  // sizeof(struct sock_filter)
      return Status::FailedPrecondition("the container's seccomp program is malformed");
    p.seccompBpf.resize(length);
  } else if (config.contains("linux") && config["linux"].is_object() &&
             config["linux"].contains("seccomp")) {
    return Status::FailedPrecondition(
        "the container's seccomp filter is not compiled, and a login gets no less than the "
        "session");
  }
  return p;
}

std::vector<std::string> loginEnvironment(const ContainerProcess& process,
                                          const LoginRequest& request, const std::string& user,
                                          const std::string& shell) {
  std::map<std::string, std::string> env;
  auto put = [&env](const std::string& entry) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && eq > 0) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  };
  for (const auto& e : process.env) put(e);
  env.erase("JUPYTER_TOKEN");  // the session's own secret; the login reaches the server directly
  for (const auto& [k, v] : request.env) {
    if (loginVariable(k)) env[k] = v;
  }
  env["USER"] = env["LOGNAME"] = user;
  env["SHELL"] = shell;
  if (!env.count("HOME")) env["HOME"] = process.cwd;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::string> loginArgv(const std::string& shell, const std::string& command) {
  const size_t slash = shell.rfind('/');
  const std::string name = slash == std::string::npos ? shell : shell.substr(slash + 1);
  if (command.empty()) return {"-" + name};
  return {name, "-c", command};
}

}  // namespace allot::agent
