// Paths tests use: the source tree, its copied test data and the build tree. Nothing outside the
// repository: tests/no_outside_paths.cmake fails the build's tests if a test source reaches out.
#pragma once

#include <string>

namespace frugal::testing {
inline std::string source_root() { return FRUGAL_SOURCE_ROOT; }
// Data copied from the project's shared data, with provenance in tests/data/shared/README.md.
inline std::string shared_data_dir() { return std::string(FRUGAL_SOURCE_ROOT) + "/tests/data/shared"; }
inline std::string binary_dir() { return FRUGAL_BINARY_DIR; }
inline std::string frugal_binary() { return std::string(FRUGAL_BINARY_DIR) + "/src/cli/frugal"; }
}  // namespace frugal::testing
