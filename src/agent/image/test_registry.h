#pragma once
// For tests: a real registry (Debian's docker-registry) on loopback in a directory of the test's,
// holding images the test builds itself from files on this machine, never downloaded:
//
//   test/base:1  busybox (sh, cat, ls, wc, true, id, sleep) and /etc/allot-test-image ("base");
//                its config runs /bin/sh in /etc with ALLOT_IMAGE=base
//   test/app:1   base plus /etc/allot-app ("app"), less bin/wc (an overlay whiteout)
//   test/cuda:1  base, declaring NVIDIA_REQUIRE_CUDA="cuda>=99.0 brand=..." (no driver has it)
//
// Building the images (umoci) and pushing them (skopeo) takes a few seconds: make one registry
// per test suite.

#include <sys/types.h>

#include <string>
#include <vector>

namespace allot::testsupport {

class TestRegistry {
 public:
  // Starts the registry under `dir` (which must exist) and pushes the images; throws
  // std::runtime_error, with the step that failed, when it cannot. With a `login`
  // ("USER:PASSWORD"), the registry serves only that account (htpasswd, bcrypt), and its images
  // are pushed with it.
  explicit TestRegistry(const std::string& dir, const std::string& login = "");
  ~TestRegistry();  // stops it
  TestRegistry(const TestRegistry&) = delete;
  TestRegistry& operator=(const TestRegistry&) = delete;

  // Builds and pushes `repository`:1, an image of this machine's Debian `packages` and what they
  // depend on (tests/images/host_packages_rootfs.py, under `sourceDir`), whose config runs
  // `cmd`; returns its reference. A 125 MB Jupyter takes a few seconds: build it once per suite.
  std::string pushHostPackages(const std::string& sourceDir, const std::string& repository,
                               const std::vector<std::string>& packages, const std::string& cmd);

  // 127.0.0.1:PORT, as references name it.
  std::string address() const;
  // Where the registry keeps blobs, to corrupt one: <storage>/docker/registry/v2/blobs/...
  const std::string& storage() const { return storage_; }
  // Stops it (a registry that does not answer) and starts it again on the same port and data.
  void stop();
  void start();

 private:
  std::string dir_, storage_, login_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace allot::testsupport
