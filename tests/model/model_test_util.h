// Helpers for model tests: temporary model directories with small synthetic configs and
// weights (values from fill_dummy; tests using them check structure and errors, not values).
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/arch.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace frugal::testing {

inline std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("frugal_model_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A tiny Llama: vocab 32, hidden 16, 2 layers, 4 heads of 4, 2 KV heads, inter 24.
inline nlohmann::json tiny_llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 32},
          {"hidden_size", 16}, {"intermediate_size", 24}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 64},
          {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"tie_word_embeddings", false},
          {"bos_token_id", 1}, {"eos_token_id", 2}, {"torch_dtype", "float32"}};
}

struct TensorEdit {
  // Return false to drop the tensor; may change dtype / shape.
  std::function<bool(model::TensorSpec&, DType&)> edit = {};
  std::vector<model::TensorSpec> extra = {};  // added tensors (f32)
};

// Writes config.json and model.safetensors for `cfg` into dir, applying `edit`.
inline void write_model_dir(const std::string& dir, const nlohmann::json& cfg, const TensorEdit& edit = {}) {
  write_text(dir + "/config.json", cfg.dump(2));
  auto parsed = model::load_model_config(dir + "/config.json");
  if (!parsed.is_ok()) throw std::runtime_error(parsed.status().to_string());
  auto specs = model::tensor_specs(*parsed);
  for (auto& e : edit.extra) specs.push_back(e);
  std::vector<std::vector<uint8_t>> data;
  std::vector<model::TensorToWrite> out;
  uint64_t stream = 0;
  for (auto s : specs) {
    DType dt = DType::kF32;
    if (edit.edit && !edit.edit(s, dt)) continue;
    const int64_t n = s.shape.numel();
    data.emplace_back(static_cast<size_t>(dtype_bytes(dt, n)));
    if (dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16)
      model::fill_dummy(s.role, dt, 7, stream++, data.back().data(), n);
    std::vector<int64_t> shape(s.shape.dims.begin(), s.shape.dims.begin() + s.shape.ndim);
    out.push_back({s.name, dt, shape, data.back().data()});
  }
  auto st = model::write_safetensors(dir + "/model.safetensors", out);
  if (!st.is_ok()) throw std::runtime_error(st.to_string());
}

// Relative error of a row: max |a - b| / max |b| (0 when both are zero).
inline double row_rel_error(const float* a, const float* b, int64_t n) {
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    ref = std::max(ref, std::abs(static_cast<double>(b[i])));
  }
  return ref == 0 ? diff : diff / ref;
}

}  // namespace frugal::testing
