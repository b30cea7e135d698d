#include "agent/exec/seccomp_bpf.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sodium.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "agent/exec/container_config.h"

namespace allot::agent {
namespace {

// Loads the compiled program in a child (no_new_privs, then seccomp) and says what getpid and
// getppid returned there: the filter does what the profile says, as the kernel runs it.
std::pair<long, long> runUnder(const std::string& b64) {
  std::string bpf(b64.size(), '\0');
  size_t len = 0;
  EXPECT_EQ(sodium_base642bin(reinterpret_cast<unsigned char*>(bpf.data()), bpf.size(), b64.data(),
                              b64.size(), nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL),
            0);
  bpf.resize(len);
  int pipefd[2];
  EXPECT_EQ(::pipe(pipefd), 0);
  pid_t child = ::fork();
  if (child == 0) {
    sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                    reinterpret_cast<sock_filter*>(bpf.data())};
    long out[2] = {-1000, -1000};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0) {
      long a = ::syscall(SYS_getpid);
      out[0] = a < 0 ? -errno : 0;
      long b = ::syscall(SYS_getppid);
      out[1] = b < 0 ? -errno : 0;
    }
    (void)!::write(pipefd[1], out, sizeof out);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  long got[2] = {-2000, -2000};
  (void)!::read(pipefd[0], got, sizeof got);
  ::close(pipefd[0]);
  ::waitpid(child, nullptr, 0);
  return {got[0], got[1]};
}

TEST(SeccompBpfTest, TheCompiledProgramDeniesWhatTheProfileDeniesWithItsErrno) {
  // Everything allowed but getpid (errno 42); getppid only with an argument rule that never holds.
  const std::string profile = R"({
    "defaultAction": "SCMP_ACT_ALLOW",
    "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "syscalls": [
      {"names": ["getpid", "no_such_syscall_xyz"], "action": "SCMP_ACT_ERRNO", "errnoRet": 42},
      {"names": ["getppid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 43,
       "args": [{"index": 0, "value": 12345, "op": "SCMP_CMP_EQ"}]}
    ]})";
  auto b64 = compileSeccomp(profile);
  ASSERT_TRUE(b64.ok()) << b64.status().message();
  auto [pid, ppid] = runUnder(*b64);
  EXPECT_EQ(pid, -42);
  EXPECT_EQ(ppid, 0);
}

TEST(SeccompBpfTest, ADefaultDenyKeepsOnlyWhatIsAllowed) {
  const std::string profile = R"({
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
    "architectures": ["SCMP_ARCH_X86_64"],
    "syscalls": [{"names": ["getpid", "write", "exit_group", "exit"], "action": "SCMP_ACT_ALLOW"}]})";
  auto b64 = compileSeccomp(profile);
  ASSERT_TRUE(b64.ok()) << b64.status().message();
  auto [pid, ppid] = runUnder(*b64);
  EXPECT_EQ(pid, 0);
  EXPECT_EQ(ppid, -38);
}

TEST(SeccompBpfTest, WhatLibseccompCannotExpressIsAnError) {
  for (
      const char* bad :
      {R"({"defaultAction": "SCMP_ACT_NOPE", "syscalls": []})",
       R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}]})",
       R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_WAT"}]}]})",
       "not json"})
    EXPECT_FALSE(compileSeccomp(bad).ok()) << bad;
}

TEST(SeccompBpfTest, ThePodmanProfileContainersGetCompilesAndKeepsAProcessRunning) {
  const std::string profile = hostContainerSeccomp();
  ASSERT_FALSE(profile.empty()) << "no " << kContainerSeccompProfile << " (containers-common)";
  auto b64 = compileSeccomp(profile);
  ASSERT_TRUE(b64.ok()) << b64.status().message();
  auto [pid, ppid] = runUnder(*b64);
  EXPECT_EQ(pid, 0);
  EXPECT_EQ(ppid, 0);
}

}  // namespace
}  // namespace allot::agent
