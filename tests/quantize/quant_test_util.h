// Helpers for the quantize tests: temporary directories, reading a written directory back with
// the layout readers, and fixture paths.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/quant/quant_loader.h"
#include "model/safetensors.h"
#include "ops/quant/quant_weight.h"
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

// The dequantized weight of `prefix` as the engine's loader reads it (model/quant/quant_loader,
// issue 16's converters: code independent of src/quantize).
inline Result<std::vector<float>> engine_dequantized(const std::string& dir, const model::SafetensorsSet& st,
                                                     const std::string& prefix) {
  FRUGAL_ASSIGN_OR_RETURN(model::QuantConfig qc,
                          model::parse_quantization_config(read_json_file(dir + "/config.json")["quantization_config"], dir));
  FRUGAL_ASSIGN_OR_RETURN(quant::QuantWeight w, model::load_quant_linear(qc, st, prefix));
  return quant::dequantize(w);
}

}  // namespace frugal::testing
