#include "agent/image/test_registry.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace allot::testsupport {
namespace {

int freePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

bool answers(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

void sh(const std::string& what, const std::string& script) {
  if (std::system(("set -e\n" + script).c_str()) != 0)
    throw std::runtime_error("test registry: " + what + " failed");
}

}  // namespace

TestRegistry::TestRegistry(const std::string& dir, const std::string& login)
    : dir_(dir), storage_(dir + "/registry"), login_(login), port_(freePort()) {
  std::ofstream config(dir_ + "/registry.yml");
  config << "version: 0.1\nlog: {level: error}\nstorage:\n  filesystem: {rootdirectory: "
         << storage_ << "}\nhttp:\n  addr: 127.0.0.1:" << port_ << "\n";
  if (!login_.empty()) {
    const size_t colon = login_.find(':');
    if (colon == std::string::npos)
      throw std::runtime_error("test registry: login is USER:PASSWORD");
    const char* salt = ::crypt_gensalt("$2b$", 4, nullptr, 0);
    const char* hash = salt ? ::crypt(login_.substr(colon + 1).c_str(), salt) : nullptr;
    if (!hash || hash[0] != '$') throw std::runtime_error("test registry: crypt() has no bcrypt");
    std::ofstream(dir_ + "/htpasswd") << login_.substr(0, colon) << ":" << hash << "\n";
    config << "auth:\n  htpasswd: {realm: allot-test, path: " << dir_ << "/htpasswd}\n";
  }
  config.close();
  start();
  const std::string l = dir_ + "/layout", b = dir_ + "/bundle";
  sh("building the test images",
     "umoci init --layout " + l + "\numoci new --image " + l + ":base\n" + "umoci unpack --image " +
         l + ":base " + b + "\nmkdir -p " + b + "/rootfs/bin " + b +
         "/rootfs/etc\ncp /bin/busybox " + b + "/rootfs/bin/busybox\n" +
         "for a in sh cat ls wc true id sleep; do ln -s busybox " + b + "/rootfs/bin/$a; done\n" +
         "echo base > " + b + "/rootfs/etc/allot-test-image\n" + "umoci repack --image " + l +
         ":base " + b + "\numoci config --image " + l +
         ":base --config.cmd /bin/sh --config.env ALLOT_IMAGE=base --config.workingdir /etc\n" +
         "umoci config --image " + l +
         ":base --tag cuda --config.env 'NVIDIA_REQUIRE_CUDA=cuda>=99.0 "
         "brand=tesla,driver>=470'\n" +
         "rm -rf " + b + "\numoci unpack --image " + l + ":base " + b + "\necho app > " + b +
         "/rootfs/etc/allot-app\nrm " + b + "/rootfs/bin/wc\numoci repack --image " + l + ":app " +
         b + "\numoci gc --layout " + l + "\n");
  for (const char* tag : {"base", "app", "cuda"}) {
    sh(std::string("pushing test/") + tag,
       "skopeo --insecure-policy copy --quiet --dest-tls-verify=false " +
           (login_.empty() ? "" : "--dest-creds '" + login_ + "' ") + "oci:" + l + ":" + tag +
           " docker://" + address() + "/test/" + tag + ":1");
  }
}

TestRegistry::~TestRegistry() { stop(); }

std::string TestRegistry::pushHostPackages(const std::string& sourceDir,
                                           const std::string& repository,
                                           const std::vector<std::string>& packages,
                                           const std::string& cmd) {
  const std::string l = dir_ + "/layout", b = dir_ + "/bundle-" + std::to_string(port_),
                    tar = dir_ + "/rootfs.tar", tag = "pkgs";
  std::string list;
  for (const auto& p : packages) list += " " + p;
  sh("building " + repository,
     "rm -rf " + b + "\n" + sourceDir + "/tests/images/host_packages_rootfs.py " + tar + list +
         "\numoci new --image " + l + ":" + tag + "\numoci unpack --image " + l + ":" + tag + " " +
         b + "\ntar -C " + b + "/rootfs -xf " + tar +
         "\nfor d in bin lib lib64 sbin; do ln -s usr/$d " + b +
         "/rootfs/$d; done\nmkdir -m 1777 " + b + "/rootfs/tmp\nrm " + tar +
         "\numoci repack --image " + l + ":" + tag + " " + b + "\numoci config --image " + l + ":" +
         tag + " --config.cmd " + cmd + "\nrm -rf " + b + "\n");
  const std::string ref = address() + "/" + repository + ":1";
  sh("pushing " + repository, "skopeo --insecure-policy copy --quiet --dest-tls-verify=false " +
                                  (login_.empty() ? "" : "--dest-creds '" + login_ + "' ") +
                                  "oci:" + l + ":" + tag + " docker://" + ref);
  return ref;
}

std::string TestRegistry::address() const { return "127.0.0.1:" + std::to_string(port_); }

void TestRegistry::start() {
  if (pid_ > 0) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    if (!::freopen((dir_ + "/registry.log").c_str(), "a", stderr)) ::_exit(127);
    ::dup2(2, 1);  // its access log
    ::execl("/usr/bin/docker-registry", "docker-registry", "serve",
            (dir_ + "/registry.yml").c_str(), nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 500 && !answers(port_); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!answers(port_)) throw std::runtime_error("test registry: docker-registry did not start");
}

void TestRegistry::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace allot::testsupport
