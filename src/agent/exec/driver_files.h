#pragma once
// The host's NVIDIA driver files that a job in an image gets, as the NVIDIA container toolkit
// gives them (docs/environments.md, "GPUs"): the driver's user-space libraries found through the
// loader's cache (`ldconfig -p`) and its tools found on the host. Images carry no driver, so a
// driver upgrade on the host changes no image. They are bind-mounted read-only at
// /usr/local/nvidia/lib64/<name> and /usr/local/nvidia/bin/<name>, the directories NVIDIA's CUDA
// images already put on LD_LIBRARY_PATH and PATH (container_config adds them when an image does
// not).

#include <string>
#include <vector>

namespace allot::agent {

struct DriverFile {
  std::string host;       // the path on the host (a symlink is mounted as what it points at)
  std::string container;  // where the container sees it
};

// The driver's 64-bit libraries in `ldconfigOutput` (what `ldconfig -p` prints), one per name.
std::vector<DriverFile> driverLibraries(const std::string& ldconfigOutput);
// The driver's tools (nvidia-smi and the like) present in `binDirs`.
std::vector<DriverFile> driverTools(const std::vector<std::string>& binDirs = {"/usr/bin",
                                                                               "/usr/sbin"});
// Both, for this host: runs `/sbin/ldconfig -p` once; empty where no driver is installed.
std::vector<DriverFile> hostDriverFiles();

inline constexpr const char* kDriverLibDir = "/usr/local/nvidia/lib64";
inline constexpr const char* kDriverBinDir = "/usr/local/nvidia/bin";

}  // namespace allot::agent
