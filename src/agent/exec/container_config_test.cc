#include "agent/exec/container_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace allot::agent {
namespace {

using nlohmann::json;

TEST(ContainerSeccompTest, RulesForCapabilitiesTheContainerLacksAndForOtherArchitecturesGo) {
  const json profile = {
      {"defaultAction", "SCMP_ACT_ERRNO"},
      {"defaultErrnoRet", 38},
      {"archMap",
       {{{"architecture", "SCMP_ARCH_X86_64"}, {"subArchitectures", {"SCMP_ARCH_X86"}}},
        {{"architecture", "SCMP_ARCH_AARCH64"}, {"subArchitectures", {"SCMP_ARCH_ARM"}}}}},
      {"syscalls",
       {{{"names", {"read", "write"}}, {"action", "SCMP_ACT_ALLOW"}},
        {{"names", {"mount"}},
         {"action", "SCMP_ACT_ALLOW"},
         {"includes", {{"caps", {"CAP_SYS_ADMIN"}}}}},
        {{"names", {"bpf"}},
         {"action", "SCMP_ACT_ERRNO"},
         {"errnoRet", 1},
         {"excludes", {{"caps", {"CAP_SYS_ADMIN"}}}}},
        {{"names", {"s390_pci_mmio_read"}},
         {"action", "SCMP_ACT_ALLOW"},
         {"includes", {{"arches", {"s390x"}}}}},
        {{"names", {"arch_prctl"}},
         {"action", "SCMP_ACT_ALLOW"},
         {"includes", {{"arches", {"amd64", "x32"}}}}},
        {{"names", {"personality"}},
         {"action", "SCMP_ACT_ALLOW"},
         {"args", {{{"index", 0}, {"value", 0}, {"op", "SCMP_CMP_EQ"}}}}}}}};
  const json out = json::parse(ociSeccomp(profile.dump()));
  EXPECT_EQ(out["defaultAction"], "SCMP_ACT_ERRNO");
  EXPECT_EQ(out["defaultErrnoRet"], 38);
  std::vector<std::string> names;
  for (const auto& r : out["syscalls"]) names.push_back(r["names"][0]);
#if defined(__x86_64__)
  EXPECT_EQ(out["architectures"], json({"SCMP_ARCH_X86_64", "SCMP_ARCH_X86"}));
  EXPECT_EQ(names, (std::vector<std::string>{"read", "bpf", "arch_prctl", "personality"}));
#endif
  EXPECT_EQ(out["syscalls"][1]["errnoRet"], 1);
  EXPECT_EQ(out["syscalls"].back()["args"][0]["op"], "SCMP_CMP_EQ");
}

TEST(ContainerSeccompTest, WhatIsNotAProfileGivesNone) {
  for (const char* bad : {"", "not json", "[]", R"({"syscalls": []})", R"({"defaultAction": 1})",
                          R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"action": "x"}]})"})
    EXPECT_EQ(ociSeccomp(bad), "") << bad;
}

// A directory a container may bind-mount (a session's home): no one but root may swap any part of
// its path for a link before crun mounts it, or a workload could mount any directory of the host.
TEST(BindSourceTest, OnlyAPathNoOneButRootCanRedirectIsMounted) {
  if (::geteuid() != 0) GTEST_SKIP() << "the directories must be root's, as on an agent's host";
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/allot-bind-XXXXXX";  // under /tmp: sticky, and this directory root's
  const std::string root = ::mkdtemp(tmpl);
  auto dir = [&](const std::string& rel, mode_t mode, uid_t owner = 0) {
    const std::string path = root + "/" + rel;
    fs::create_directory(path);
    ::chmod(path.c_str(), mode);
    EXPECT_EQ(::chown(path.c_str(), owner, owner), 0);
    return path;
  };
  dir("homes", 0711);
  const std::string alice = dir("homes/alice", 0700, 12345);
  EXPECT_TRUE(checkBindSource(alice).ok()) << checkBindSource(alice).message();

  // Where its owner (or anyone) may rename it, or plant a link in its place: refused.
  dir("open", 0777);
  const std::string inOpen = dir("open/alice", 0700, 12345);
  dir("sticky", 01777);
  const std::string inSticky = dir("sticky/alice", 0700, 12345);
  const std::string stickyRoots = dir("sticky/roots", 0755);
  const std::string underRoots = dir("sticky/roots/alice", 0700, 12345);
  const std::string underAlice = dir("homes/alice/sub", 0700, 12345);
  ASSERT_EQ(::symlink((root + "/homes/alice").c_str(), (root + "/homes/link").c_str()), 0);
  for (const std::string& bad :
       {inOpen, inSticky, underAlice, root + "/homes/link", root + "/homes/../homes/alice",
        std::string("homes/alice"), root + "/homes/none", std::string("")}) {
    const Status st = checkBindSource(bad);
    EXPECT_EQ(st.code(), Code::kFailedPrecondition) << bad;
  }
  EXPECT_NE(checkBindSource(inOpen).message().find("others than root may write"),
            std::string::npos);
  EXPECT_NE(checkBindSource(root + "/homes/link").message().find("is a link"), std::string::npos);
  // A sticky directory is fine above a root-owned one that holds the home.
  EXPECT_TRUE(checkBindSource(underRoots).ok()) << checkBindSource(underRoots).message();
  EXPECT_TRUE(checkBindSource(stickyRoots).ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace allot::agent
