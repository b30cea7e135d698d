#pragma once
// The version of this build of Allot, one number for allotd, allot-agent and allot (CMake's
// project version): what `--version` prints and what an agent reports in its hello.

namespace allot {

const char* allotVersion();

}  // namespace allot
