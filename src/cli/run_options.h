#pragma once
// What `allot run` submits: its flags, or the same fields from a job spec file (run -f).

#include <string>
#include <vector>

namespace allot::cli {

struct RunOpts {
  std::string gpus;      // "2", or a fraction of one shared GPU: "0.5"
  std::string gpuModel;  // "A100" or "A100,H100"
  std::string gpuMemory;
  int priority = 0;
  bool preemptible = false;
  bool wholeHost = false;
  int hosts = 1;
  std::string maxRuntime;
  std::string minDriver;
  std::string minCuda;
  std::string contour;
  std::string project;
  std::string name;
  std::string team;
  std::string cpus;
  std::string memory;
  std::vector<std::string> env;
  bool wait = false;
  bool queueAnyway = false;
  std::string dependency;  // "afterok:12,13" or "afterok:12:13,afterany:14"
  std::string array;       // "0-99%10", sent as is; allotd parses it
  std::string workdir;     // as given; made absolute against the CLI's directory when sent
  std::string image;       // an OCI reference to run the command in; allotd parses it
  std::string file;        // -f: a job spec (YAML), "-" for stdin
  std::vector<std::string> command;
};

}  // namespace allot::cli
