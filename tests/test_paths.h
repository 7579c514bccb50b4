// Paths tests use: the source tree, ../shared, and the build tree.
#pragma once

#include <string>

namespace frugal::testing {
inline std::string source_root() { return FRUGAL_SOURCE_ROOT; }
inline std::string shared_dir() { return FRUGAL_SHARED_DIR; }
inline std::string binary_dir() { return FRUGAL_BINARY_DIR; }
inline std::string frugal_binary() { return std::string(FRUGAL_BINARY_DIR) + "/src/cli/frugal"; }
}  // namespace frugal::testing
