#include "agent/exec/seccomp_bpf.h"

#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/secrets.h"

namespace allot::agent {
namespace {

using nlohmann::json;

struct CtxCloser {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

// libseccomp's action for an OCI action name; false when it has none.
bool actionOf(const std::string& name, uint32_t errnoRet, uint32_t* out) {
  if (name == "SCMP_ACT_ALLOW")
    *out = SCMP_ACT_ALLOW;
  else if (name == "SCMP_ACT_ERRNO")
    *out = SCMP_ACT_ERRNO(errnoRet);
  else if (name == "SCMP_ACT_KILL" || name == "SCMP_ACT_KILL_THREAD")
    *out = SCMP_ACT_KILL_THREAD;
  else if (name == "SCMP_ACT_KILL_PROCESS")
    *out = SCMP_ACT_KILL_PROCESS;
  else if (name == "SCMP_ACT_TRAP")
    *out = SCMP_ACT_TRAP;
  else if (name == "SCMP_ACT_LOG")
    *out = SCMP_ACT_LOG;
  else if (name == "SCMP_ACT_TRACE")
    *out = SCMP_ACT_TRACE(errnoRet);
  else
    return false;
  return true;
}

bool opOf(const std::string& name, scmp_compare* out) {
  if (name == "SCMP_CMP_NE")
    *out = SCMP_CMP_NE;
  else if (name == "SCMP_CMP_LT")
    *out = SCMP_CMP_LT;
  else if (name == "SCMP_CMP_LE")
    *out = SCMP_CMP_LE;
  else if (name == "SCMP_CMP_EQ")
    *out = SCMP_CMP_EQ;
  else if (name == "SCMP_CMP_GE")
    *out = SCMP_CMP_GE;
  else if (name == "SCMP_CMP_GT")
    *out = SCMP_CMP_GT;
  else if (name == "SCMP_CMP_MASKED_EQ")
    *out = SCMP_CMP_MASKED_EQ;
  else
    return false;
  return true;
}

}  // namespace

Result<std::string> compileSeccomp(const std::string& ociSeccompJson) {
  try {
    const json p = json::parse(ociSeccompJson);
    const uint32_t defaultErrno = p.value("defaultErrnoRet", EPERM);
    uint32_t defaultAction;
    if (!actionOf(p.at("defaultAction").get<std::string>(), defaultErrno, &defaultAction))
      return Status::InvalidArgument("seccomp: unknown default action");
    std::unique_ptr<void, CtxCloser> ctx(seccomp_init(defaultAction));
    if (!ctx) return Status::Internal("seccomp_init failed");
    // crun sets no_new_privs itself; the program exported is the same either way.
    seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);
    for (const auto& a : p.value("architectures", json::array())) {
      std::string arch = a.get<std::string>();
      if (arch.rfind("SCMP_ARCH_", 0) == 0) arch = arch.substr(10);
      for (char& c : arch) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const uint32_t token = seccomp_arch_resolve_name(arch.c_str());
      if (token == 0) continue;
      const int r = seccomp_arch_add(ctx.get(), token);
      if (r != 0 && r != -EEXIST) return Status::Internal("seccomp: cannot add " + arch);
    }
    for (const auto& rule : p.at("syscalls")) {
      uint32_t action;
      const uint32_t errnoRet = rule.value("errnoRet", EPERM);
      if (!actionOf(rule.at("action").get<std::string>(), errnoRet, &action))
        return Status::InvalidArgument("seccomp: unknown action " + rule.at("action").dump());
      if (action == defaultAction) continue;  // libseccomp refuses a rule that is the default
      std::vector<scmp_arg_cmp> args;
      for (const auto& arg : rule.value("args", json::array())) {
        scmp_compare op;
        if (!opOf(arg.at("op").get<std::string>(), &op))
          return Status::InvalidArgument("seccomp: unknown operator " + arg.at("op").dump());
        args.push_back({arg.at("index").get<unsigned>(), op, arg.value("value", uint64_t{0}),
                        arg.value("valueTwo", uint64_t{0})});
      }
      for (const auto& name : rule.at("names")) {
        const int nr = seccomp_syscall_resolve_name(name.get<std::string>().c_str());
        if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp: crun skips it too
        const int r = seccomp_rule_add_array(ctx.get(), action, nr,
                                             static_cast<unsigned>(args.size()), args.data());
        if (r != 0 && r != -EEXIST)
          return Status::Internal("seccomp: cannot add a rule for " + name.get<std::string>());
      }
    }
    int fd = ::memfd_create("allot-seccomp", MFD_CLOEXEC);
    if (fd < 0) return Status::Internal("memfd_create failed");
    if (seccomp_export_bpf(ctx.get(), fd) != 0) {
      ::close(fd);
      return Status::Internal("seccomp_export_bpf failed");
    }
    std::string bpf;
    char buf[4096];
    ::lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) bpf.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return toBase64(bpf);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("seccomp: ") + e.what());
  }
}

}  // namespace allot::agent
