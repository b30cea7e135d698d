#pragma once
// For the tests of jobs and sessions in images: a TestCluster whose one agent runs images as
// their owners (root) and reaches a registry on loopback that the suite starts once
// (agent/image/test_registry.h). `Suite` (the fixture itself, CRTP) gets a registry of its own.
// Teams ml (alice) and cv (bob) exist; ml may use the registry's test/ images; host h1 has two
// simulated A100s.

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/image/test_registry.h"
#include "harness.h"

namespace allot::it {

template <class Suite>
class ImageCluster : public TestCluster {
 protected:
  // Starts the suite's registry (with `login`, "USER:PASSWORD", it serves that account only);
  // nothing when not root. The fixture's SetUpTestSuite calls it.
  static void startRegistry(const std::string& login = "") {
    if (::geteuid() != 0) return;
    char tmpl[] = "/tmp/allot-image-it-XXXXXX";
    registryDir_ = ::mkdtemp(tmpl);
    registry_ = std::make_unique<testsupport::TestRegistry>(registryDir_, login);
  }
  static void TearDownTestSuite() {
    registry_.reset();
    if (!registryDir_.empty()) std::filesystem::remove_all(registryDir_);
  }

  std::vector<std::string> agentFlags() const override {
    return {"--run-as-owner", "required", "--insecure-registry", registry_->address()};
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "containers and switching users need root";
    ASSERT_TRUE(registry_) << "the test registry did not start";
    TestCluster::SetUp();
    // Jobs of other users reach their own directories under the test's (mkdtemp: 0700).
    namespace fs = std::filesystem;
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    std::tie(alice_, bob_) = createTwoTeams("ml", "alice", "cv", "bob");
    usersCreated();
    auto set = cli({"team", "image-allow", "set", "ml", registry_->address() + "/test/"});
    ASSERT_EQ(set.code, 0) << set.describe();
    startAgent("h1", "sim:2xA100");
  }

  // Between the users' creation and the agent's start (a fixture writes files for the agent).
  virtual void usersCreated() {}

  static std::string image(const std::string& name) {
    return registry_->address() + "/test/" + name;
  }

  static inline std::string registryDir_;
  static inline std::unique_ptr<testsupport::TestRegistry> registry_;
  std::string alice_, bob_;
};

}  // namespace allot::it
