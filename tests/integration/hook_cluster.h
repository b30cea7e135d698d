#pragma once
// The fixture of the tests in which the real agent runs allotd's hooks (reprovisioning, rolling
// upgrades, handovers): hook scripts and allotd's config file in the test's temp dir, written
// when allotd's flags are asked for, and the shipped example playbook where ansible is there.

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "harness.h"

namespace allot::it {

// Whether ansible-playbook is installed, for the shipped example profile.
inline bool haveAnsible() {
  return ::access("/usr/bin/ansible-playbook", X_OK) == 0 ||
         ::access("/usr/local/bin/ansible-playbook", X_OK) == 0;
}

// The shipped example profile (a real playbook), as the tests' configs name it.
inline const std::string kExamplePlaybook = ALLOT_SOURCE_DIR "/deploy/ansible/profiles/default.yml";

class HookCluster : public TestCluster {
 protected:
  // Writes the executable script `name` in the test's temp dir; its path.
  std::string writeScript(const std::string& name, const std::string& text) const {
    writeFile(path(name), text);
    ::chmod(path(name).c_str(), 0755);
    return path(name);
  }
  // allotd's flags, with `toml` as its config file.
  std::vector<std::string> flagsWithConfig(const std::string& toml) const {
    writeFile(path("allotd.toml"), toml);
    return {"--heartbeat", "1s", "--config", path("allotd.toml")};
  }
  std::string adminState(const std::string& h) { return textOf(host(h), "admin_state"); }
};

}  // namespace allot::it
