#pragma once
// What to say when a command line names no command CLI11 knows: `allot jbo list` or `allot job
// lsit` gets "did you mean `allot job list`?", and a group given alone (`allot job`) gets the
// list of its commands, instead of CLI11's "A subcommand is required".

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace allot::cli {

// The one-line hint for `args` (without the program name) under `app`, or "" when the words do
// name commands all the way down (the error is then about flags or arguments).
std::string commandHint(CLI::App& app, const std::vector<std::string>& args);

// Edits (insertions, deletions, substitutions, swaps of neighbours) from `a` to `b`.
size_t editDistance(const std::string& a, const std::string& b);

}  // namespace allot::cli
