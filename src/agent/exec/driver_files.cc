#include "agent/exec/driver_files.h"

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <set>
#include <sstream>

namespace allot::agent {
namespace {

// The libraries of NVIDIA's driver a CUDA, NVML or OpenCL program loads (the container
// toolkit's compute and utility set), by the start of their names.
constexpr std::array kLibraryPrefixes = {"libcuda.so",
                                         "libcudadebugger.so",
                                         "libnvidia-ml.so",
                                         "libnvidia-ptxjitcompiler.so",
                                         "libnvidia-nvvm.so",
                                         "libnvidia-opencl.so",
                                         "libnvidia-cfg.so",
                                         "libnvidia-allocator.so",
                                         "libnvidia-gpucomp.so",
                                         "libnvidia-fatbinaryloader.so",
                                         "libnvidia-compiler.so",
                                         "libnvidia-pkcs11.so",
                                         "libnvidia-nscq.so"};
constexpr std::array kTools = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                               "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"};

bool isDriverLibrary(const std::string& name) {
  for (const char* prefix : kLibraryPrefixes) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::vector<DriverFile> driverLibraries(const std::string& ldconfigOutput) {
  // Lines: "\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1".
  std::vector<DriverFile> out;
  std::set<std::string> seen;
  std::istringstream lines(ldconfigOutput);
  std::string line;
  while (std::getline(lines, line)) {
    const auto arrow = line.find(" => ");
    const auto open = line.find(" (");
    if (arrow == std::string::npos || open == std::string::npos || open > arrow) continue;
    const auto start = line.find_first_not_of(" \t");
    const std::string name = line.substr(start, open - start);
    const std::string flags = line.substr(open, arrow - open);
    const std::string path = line.substr(arrow + 4);
    // 64-bit only: a 32-bit copy of the same name would shadow it.
    if (flags.find("x86-64") == std::string::npos && flags.find("AArch64") == std::string::npos)
      continue;
    if (!isDriverLibrary(name) || name.find('/') != std::string::npos || path.empty() ||
        path[0] != '/' || !seen.insert(name).second)
      continue;
    out.push_back({path, std::string(kDriverLibDir) + "/" + name});
  }
  return out;
}

std::vector<DriverFile> driverTools(const std::vector<std::string>& binDirs) {
  std::vector<DriverFile> out;
  for (const char* tool : kTools) {
    for (const std::string& dir : binDirs) {
      const std::string path = dir + "/" + tool;
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        out.push_back({path, std::string(kDriverBinDir) + "/" + tool});
        break;
      }
    }
  }
  return out;
}

std::vector<DriverFile> hostDriverFiles() {
  std::string text;
  if (FILE* p = ::popen("/sbin/ldconfig -p 2>/dev/null", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    ::pclose(p);
  }
  std::vector<DriverFile> out = driverLibraries(text);
  // Tools without the libraries would only fail inside.
  if (out.empty()) return out;
  auto tools = driverTools();
  out.insert(out.end(), tools.begin(), tools.end());
  return out;
}

}  // namespace allot::agent
