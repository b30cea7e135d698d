#include "cli/job_file.h"

#include <yaml-cpp/yaml.h>

#include <map>

namespace allot::cli {
namespace {

using Setter = std::function<Status(const YAML::Node&, RunOpts*)>;

// A scalar as text: "2", "0.5", "A100", "2h". Numbers are kept as written.
Result<std::string> scalar(const YAML::Node& n) {
  if (!n.IsScalar()) return Status::InvalidArgument("expected a single value");
  return n.Scalar();
}

Setter text(std::string RunOpts::*field) {
  return [field](const YAML::Node& n, RunOpts* o) -> Status {
    auto v = scalar(n);
    if (!v.ok()) return v.status();
    o->*field = *v;
    return Status::Ok();
  };
}

// "A100,H100" or [A100, H100]: kept as the flag's comma-separated text.
Setter list(std::string RunOpts::*field) {
  return [field](const YAML::Node& n, RunOpts* o) -> Status {
    if (!n.IsSequence()) return text(field)(n, o);
    std::string joined;
    for (const auto& item : n) {
      if (!item.IsScalar()) return Status::InvalidArgument("expected a list of values");
      joined += (joined.empty() ? "" : ",") + item.Scalar();
    }
    o->*field = joined;
    return Status::Ok();
  };
}

Setter flag(bool RunOpts::*field) {
  return [field](const YAML::Node& n, RunOpts* o) -> Status {
    bool v = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
      return Status::InvalidArgument("expected true or false");
    o->*field = v;
    return Status::Ok();
  };
}

Setter number(int RunOpts::*field) {
  return [field](const YAML::Node& n, RunOpts* o) -> Status {
    int v = 0;
    if (!n.IsScalar() || !YAML::convert<int>::decode(n, v))
      return Status::InvalidArgument("expected a whole number");
    o->*field = v;
    return Status::Ok();
  };
}

Status setEnv(const YAML::Node& n, RunOpts* o) {
  o->env.clear();
  if (n.IsMap()) {
    for (const auto& kv : n) {
      if (!kv.second.IsScalar()) return Status::InvalidArgument("each value must be a string");
      o->env.push_back(kv.first.Scalar() + "=" + kv.second.Scalar());
    }
    return Status::Ok();
  }
  if (n.IsSequence()) {
    for (const auto& item : n) {
      if (!item.IsScalar()) return Status::InvalidArgument("expected KEY=VALUE entries");
      o->env.push_back(item.Scalar());
    }
    return Status::Ok();
  }
  return Status::InvalidArgument("expected a map (KEY: VALUE) or a list of KEY=VALUE");
}

Status setCommand(const YAML::Node& n, RunOpts* o) {
  o->command.clear();
  if (n.IsScalar()) {
    // A script, as in an sbatch file: run by the shell, on the host, as the job's owner.
    o->command = {"/bin/sh", "-c", n.Scalar()};
    return Status::Ok();
  }
  if (!n.IsSequence() || n.size() == 0)
    return Status::InvalidArgument("expected a list of arguments, or a script as one string");
  for (const auto& item : n) {
    if (!item.IsScalar()) return Status::InvalidArgument("each argument must be a string");
    o->command.push_back(item.Scalar());
  }
  return Status::Ok();
}

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> kSetters = {
      {"gpus", text(&RunOpts::gpus)},
      {"gpu-model", list(&RunOpts::gpuModel)},
      {"gpu-memory", text(&RunOpts::gpuMemory)},
      {"priority", number(&RunOpts::priority)},
      {"preemptible", flag(&RunOpts::preemptible)},
      {"whole-host", flag(&RunOpts::wholeHost)},
      {"hosts", number(&RunOpts::hosts)},
      {"max-runtime", text(&RunOpts::maxRuntime)},
      {"min-driver", text(&RunOpts::minDriver)},
      {"min-cuda", text(&RunOpts::minCuda)},
      {"contour", text(&RunOpts::contour)},
      {"project", text(&RunOpts::project)},
      {"name", text(&RunOpts::name)},
      {"team", text(&RunOpts::team)},
      {"cpus", text(&RunOpts::cpus)},
      {"memory", text(&RunOpts::memory)},
      {"env", setEnv},
      {"wait", flag(&RunOpts::wait)},
      {"queue-anyway", flag(&RunOpts::queueAnyway)},
      {"dependency", list(&RunOpts::dependency)},
      {"array", text(&RunOpts::array)},
      {"workdir", text(&RunOpts::workdir)},
      {"image", text(&RunOpts::image)},
      {"command", setCommand},
  };
  return kSetters;
}

std::string knownFields() {
  std::string out;
  for (const auto& [name, setter] : setters()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

Status applyJobFile(std::istream& in, const std::string& source, RunOpts* o,
                    const std::function<bool(const std::string& flag)>& givenOnCommandLine) {
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) +
                                   ": not YAML: " + e.msg);
  }
  if (root.IsNull()) return Status::InvalidArgument(source + ": the job spec is empty");
  if (!root.IsMap())
    return Status::InvalidArgument(source + ": a job spec is a map of fields (gpus: 2, ...)");
  for (const auto& kv : root) {
    const std::string at = source + ":" + std::to_string(kv.first.Mark().line + 1) + ": ";
    if (!kv.first.IsScalar()) return Status::InvalidArgument(at + "a field name must be text");
    std::string name = kv.first.Scalar();
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    auto setter = setters().find(name);
    if (setter == setters().end())
      return Status::InvalidArgument(at + "unknown field '" + kv.first.Scalar() +
                                     "' (fields: " + knownFields() + ")");
    if (givenOnCommandLine(name)) continue;
    try {
      if (Status st = setter->second(kv.second, o); !st.ok())
        return Status::InvalidArgument(at + name + ": " + st.message());
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(at + name + ": " + e.msg);
    }
  }
  return Status::Ok();
}

}  // namespace allot::cli
