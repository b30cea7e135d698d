#include "agent/exec/driver_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace allot::agent {
namespace {

TEST(DriverFilesTest, TheDriversSixtyFourBitLibrariesFromTheLoadersCacheOncePerName) {
  const std::string ldconfig =
      "1234 libs found in cache `/etc/ld.so.cache'\n"
      "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n"
      "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n"
      "\tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/libcuda.so.1\n"
      "\tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so\n"
      "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
      "\tlibcuda.so.1 (libc6,x86-64) => /opt/other/libcuda.so.1\n"
      "\tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => relative/path.so\n"
      "garbage without an arrow\n";
  auto files = driverLibraries(ldconfig);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].host, "/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_EQ(files[0].container, "/usr/local/nvidia/lib64/libcuda.so.1");
  EXPECT_EQ(files[1].container, "/usr/local/nvidia/lib64/libcuda.so");
  EXPECT_EQ(files[2].host, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
}

TEST(DriverFilesTest, TheDriversToolsWhereTheHostHasThem) {
  char tmpl[] = "/tmp/allot-driver-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/nvidia-smi") << "#!/bin/sh\n";
  auto tools = driverTools({dir});
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0].host, dir + "/nvidia-smi");
  EXPECT_EQ(tools[0].container, "/usr/local/nvidia/bin/nvidia-smi");
  std::filesystem::remove_all(dir);
}

TEST(DriverFilesTest, WhatThisHostOffersExists) {
  // This machine has no NVIDIA driver; a GPU host's list is checked on one (docs/agent.md).
  for (const auto& f : hostDriverFiles()) EXPECT_TRUE(std::filesystem::exists(f.host)) << f.host;
}

}  // namespace
}  // namespace allot::agent
