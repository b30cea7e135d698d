#pragma once
// The `allot` command-line client: parses the command line, runs one command against the API and
// returns the process exit status (0 ok, 1 a failed command, 2 a usage error; `allot run --wait`
// returns the job's own status).

#include <iosfwd>
#include <string>
#include <vector>

#include "cli/config.h"
#include "common/clock.h"

namespace allot::cli {

int run(int argc, char** argv);

// run() with its seams exposed, for tests: `args` excludes the program name.
int runWith(const std::vector<std::string>& args, const EnvLookup& env, std::istream& in,
            std::ostream& out, std::ostream& err, const Clock& clock);

}  // namespace allot::cli
