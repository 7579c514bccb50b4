// Typed model configuration parsed from HF config.json. Field names follow HF's where they
// exist. Parsing validates and names the offending field in every error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace frugal::model {

enum class RopeScalingType { kNone, kLinear, kDynamic, kLlama3, kYarn };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn (every family: DeepSeek-V2/V3, Qwen2.5 long-context configs). mscale and
  // mscale_all_dim are 0 when absent; attention_factor 0 means "derive it" (rope.h).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  double attention_factor = 0.0;
  bool truncate = true;

  bool operator==(const RopeScaling&) const = default;
};

// Mixture-of-experts fields (DeepSeek-V2/V3); n_routed_experts == 0 means dense.
struct MoeConfig {
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t first_k_dense_replace = 0;  // layers [0, k) use the dense MLP
  int64_t moe_layer_freq = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  std::string scoring_func = "softmax";  // "softmax" (V2) or "sigmoid" (V3)
  std::string topk_method = "greedy";
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  // DeepSeek-V3/R1 checkpoints ship one multi-token-prediction layer beyond num_hidden_layers.
  int64_t num_nextn_predict_layers = 0;

  bool operator==(const MoeConfig&) const = default;
};

// Multi-head latent attention fields (DeepSeek-V2/V3); kv_lora_rank == 0 means not MLA.
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0: q_proj is a plain linear (V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool operator==(const MlaConfig&) const = default;
};

// Pre-quantized checkpoints (quantization_config), e.g. DeepSeek-V3's fp8 with 128x128 blocks.
// quant_method empty means the checkpoint is stored in torch_dtype.
struct QuantizationConfig {
  std::string quant_method;  // "fp8", "awq", "gptq", ...
  std::string fmt;           // "e4m3" for fp8
  std::vector<int64_t> weight_block_size;  // fp8 block scales, e.g. {128, 128}
  int64_t bits = 0;          // awq/gptq
  int64_t group_size = 0;    // awq/gptq

  bool operator==(const QuantizationConfig&) const = default;
};

struct ModelConfig {
  std::string architecture;  // HF class name, e.g. "Qwen2ForCausalLM"
  std::string model_type;    // "llama", "qwen2", "deepseek_v2", "deepseek_v3"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  // hidden_size / heads unless given. For MLA models: qk_nope_head_dim + qk_rope_head_dim,
  // the query/key head size that sets the softmax scale.
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (always true for Qwen2)
  bool mlp_bias = false;
  std::string hidden_act = "silu";
  // Sliding window attention (Qwen2): used only when use_sliding_window is true.
  bool use_sliding_window = false;
  int64_t sliding_window = 0;
  // Attention sinks with the sliding window (frugal's --kv-sinks; not read from config.json).
  int64_t attention_sink_tokens = 0;
  int64_t max_window_layers = 0;
  DType torch_dtype = DType::kBF16;
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  MoeConfig moe;
  MlaConfig mla;
  // DeepSeek-V3: rope on interleaved pairs (2i, 2i + 1) (transformers' default true); V2 always.
  bool rope_interleave = true;
  QuantizationConfig quantization;

  bool is_moe() const { return moe.n_routed_experts > 0; }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  bool operator==(const ModelConfig&) const = default;
};

// Parses and validates config.json contents. `source` names the file in errors. Rope settings
// come from rope_theta / rope_scaling, or transformers 5's rope_parameters where those are absent.
Result<ModelConfig> parse_model_config(const nlohmann::json& j, const std::string& source);
// The one config.json reader every verb uses (engine, run, plan, bench): `path` is a config.json
// file or a model directory holding one.
Result<ModelConfig> load_model_config(const std::string& path);

// HF class names parse_model_config accepts, e.g. "Qwen2ForCausalLM".
const std::vector<std::string>& supported_architectures();
const char* rope_scaling_type_name(RopeScalingType t);

}  // namespace frugal::model
