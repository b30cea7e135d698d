#include "agent/exec/bpf_device_filter.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>

namespace allot::agent {
namespace {

constexpr int32_t kNvidiaMajor = 195;
constexpr int32_t kLastGpuMinor = 254;  // 255 is nvidiactl, which every CUDA process needs

// The few instruction forms the program uses, encoded as the kernel's BPF_* macros would.
bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst;
  i.src_reg = src;
  i.off = off;
  i.imm = imm;
  return i;
}
bpf_insn loadCtxWord(uint8_t dst, int16_t offset) {
  return insn(BPF_LDX | BPF_MEM | BPF_W, dst, BPF_REG_1, offset, 0);
}
bpf_insn andImm(uint8_t dst, int32_t imm) {
  return insn(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm);
}
bpf_insn movImm(uint8_t dst, int32_t imm) {
  return insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}
bpf_insn jumpImm(uint8_t op, uint8_t dst, int32_t imm, int16_t off) {
  return insn(BPF_JMP | op | BPF_K, dst, 0, off, imm);
}
bpf_insn exitInsn() { return insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }

long bpf(int cmd, bpf_attr* attr) { return ::syscall(SYS_bpf, cmd, attr, sizeof(*attr)); }

}  // namespace

std::vector<bpf_insn> gpuDeviceFilterProgram(const std::vector<int>& gpuMinors) {
  std::set<int32_t> allowed;
  for (int m : gpuMinors) {
    if (m >= 0 && m <= kLastGpuMinor) allowed.insert(m);
  }
  // r1 is the context (struct bpf_cgroup_dev_ctx); r0 is the verdict: 1 allows, 0 denies.
  // Layout, with n allowed minors:
  //   0-3      r2 = device type, r4 = major, r5 = minor
  //   4-6      not a char device, not major 195, or minor > 254: goto allow
  //   7..6+n   minor == allowed[i]: goto allow
  //   7+n,8+n  deny: r0 = 0; exit
  //   9+n,10+n allow: r0 = 1; exit
  const int n = static_cast<int>(allowed.size());
  const int allowAt = 9 + n;
  std::vector<bpf_insn> p;
  p.reserve(kGpuFilterFixedInsns + n);
  // Jump offsets count from the instruction after the jump.
  auto toAllow = [&] { return static_cast<int16_t>(allowAt - (static_cast<int>(p.size()) + 1)); };
  // access_type is (access << 16) | type.
  p.push_back(loadCtxWord(BPF_REG_2, offsetof(bpf_cgroup_dev_ctx, access_type)));
  p.push_back(andImm(BPF_REG_2, 0xffff));
  p.push_back(loadCtxWord(BPF_REG_4, offsetof(bpf_cgroup_dev_ctx, major)));
  p.push_back(loadCtxWord(BPF_REG_5, offsetof(bpf_cgroup_dev_ctx, minor)));
  p.push_back(jumpImm(BPF_JNE, BPF_REG_2, BPF_DEVCG_DEV_CHAR, toAllow()));
  p.push_back(jumpImm(BPF_JNE, BPF_REG_4, kNvidiaMajor, toAllow()));
  p.push_back(jumpImm(BPF_JGT, BPF_REG_5, kLastGpuMinor, toAllow()));
  for (int32_t m : allowed) p.push_back(jumpImm(BPF_JEQ, BPF_REG_5, m, toAllow()));
  p.push_back(movImm(BPF_REG_0, 0));
  p.push_back(exitInsn());
  p.push_back(movImm(BPF_REG_0, 1));
  p.push_back(exitInsn());
  return p;
}

bpf_attr deviceProgramLoadAttr(const std::vector<bpf_insn>& prog) {
  static const char kLicense[] = "GPL";
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(prog.data());
  load.insn_cnt = static_cast<uint32_t>(prog.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  return load;
}

Status attachGpuDeviceFilter(const std::string& cgroupDir, const std::vector<int>& gpuMinors) {
  const std::string what = "failed to attach GPU device filter to " + cgroupDir + ": ";
  std::vector<bpf_insn> prog = gpuDeviceFilterProgram(gpuMinors);
  bpf_attr load = deviceProgramLoadAttr(prog);
  int progFd = static_cast<int>(bpf(BPF_PROG_LOAD, &load));
  if (progFd < 0 && (errno == EINVAL || errno == EACCES)) {
    // The verifier refused it: load again with its log, which says why.
    int err = errno;
    std::string log(16 * 1024, '\0');
    load.log_level = 1;
    load.log_buf = reinterpret_cast<uint64_t>(log.data());
    load.log_size = static_cast<uint32_t>(log.size());
    progFd = static_cast<int>(bpf(BPF_PROG_LOAD, &load));
    if (progFd < 0) {
      log.resize(std::strlen(log.c_str()));
      return Status::Unavailable(what + "loading the program: " + std::strerror(err) +
                                 (log.empty() ? "" : " (verifier: " + log + ")"));
    }
  }
  if (progFd < 0) {
    return Status::Unavailable(what + "loading the program: " + std::strerror(errno));
  }

  int dirFd = ::open(cgroupDir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0) {
    int err = errno;
    ::close(progFd);
    return Status::Unavailable(what + std::strerror(err));
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(dirFd);
  attach.attach_bpf_fd = static_cast<uint32_t>(progFd);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  long rc = bpf(BPF_PROG_ATTACH, &attach);
  int err = errno;
  // The attachment holds its own reference to the program.
  ::close(dirFd);
  ::close(progFd);
  if (rc != 0) return Status::Unavailable(what + std::strerror(err));
  return Status::Ok();
}

}  // namespace allot::agent
