#include "common/build_info.h"

// Defined for this file alone (src/common/CMakeLists.txt), so that a new version rebuilds one
// file, not every file of the tree.
#ifndef ALLOT_VERSION
#error "ALLOT_VERSION is set by CMake from project(... VERSION ...)"
#endif

namespace allot {

const char* allotVersion() { return ALLOT_VERSION; }

}  // namespace allot
