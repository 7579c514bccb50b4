// Helpers for the quantize tests: temporary directories, reading a written directory back with
// the layout readers, and fixture paths.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace frugal::testing {

inline std::string quant_temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("frugal_quantize_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

inline std::string golden_dir(const std::string& name) { return source_root() + "/tests/data/golden/" + name; }
inline std::string quant_fixture_dir(const std::string& name) { return source_root() + "/tests/data/quant/" + name; }
inline std::string reference_model_dir() { return source_root() + "/models/reference-qwen2-20m"; }

}  // namespace frugal::testing
