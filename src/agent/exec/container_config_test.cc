#include "agent/exec/container_config.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace allot::agent
