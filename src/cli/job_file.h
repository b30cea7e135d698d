#pragma once
// `allot run -f job.yaml`: a job spec file holds the same fields as `allot run`'s flags, under
// the flags' names (gpus, gpu-model, max-runtime, env, array, workdir, command, ...; gpu_model
// is read as gpu-model). A flag given on the command line wins over the file. docs/cli.md.

#include <functional>
#include <istream>
#include <string>

#include "cli/run_options.h"
#include "common/status.h"

namespace allot::cli {

// Reads the spec in `in` (named `source` in errors, with the line) into `o`, skipping every
// field for which givenOnCommandLine(flag name) is true. `command` is a list of arguments, or a
// string run by /bin/sh -c (a script, as in an sbatch file); `env` a map or a list of KEY=VALUE.
Status applyJobFile(std::istream& in, const std::string& source, RunOpts* o,
                    const std::function<bool(const std::string& flag)>& givenOnCommandLine);

}  // namespace allot::cli
