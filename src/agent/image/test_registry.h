#pragma once
// For tests: a real registry (Debian's docker-registry) on loopback in a directory of the test's,
// holding images the test builds itself from files on this machine, never downloaded:
//
//   test/base:1  busybox (sh, cat, ls, wc, true, id, sleep) and /etc/allot-test-image ("base");
//                its config runs /bin/sh in /etc with ALLOT_IMAGE=base
//   test/app:1   base plus /etc/allot-app ("app"), less bin/wc (an overlay whiteout)
//
// Building the images (umoci) and pushing them (skopeo) takes a few seconds: make one registry
// per test suite.

#include <sys/types.h>

#include <string>

namespace allot::testsupport {

class TestRegistry {
 public:
  // Starts the registry under `dir` (which must exist) and pushes the images; throws
  // std::runtime_error, with the step that failed, when it cannot.
  explicit TestRegistry(const std::string& dir);
  ~TestRegistry();  // stops it
  TestRegistry(const TestRegistry&) = delete;
  TestRegistry& operator=(const TestRegistry&) = delete;

  // 127.0.0.1:PORT, as references name it.
  std::string address() const;
  // Where the registry keeps blobs, to corrupt one: <storage>/docker/registry/v2/blobs/...
  const std::string& storage() const { return storage_; }
  // Stops it (a registry that does not answer) and starts it again on the same port and data.
  void stop();
  void start();

 private:
  std::string dir_, storage_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace allot::testsupport
