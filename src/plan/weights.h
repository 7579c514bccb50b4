// Weight bytes by precision, summed over the exact tensors the engine loads
// (model::tensor_specs). Only linear projections are quantized; embeddings, norms, biases and
// MoE routers stay bf16; lm_head is bf16 or int8 per QuantOptions. Quantized linears count the
// bytes of the engine's own weight format (ops::quant_format / ops::weight_bytes: codes with
// rows padded to 32, f32 scales and offsets), which is what the loaded engine holds: with the
// default options these are the formats of `--dummy-weights --precision` (model/weights.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "model/config.h"

namespace frugal::plan {

enum class WeightPrecision { kBf16, kFp8, kInt8, kInt4, kNf4 };
const char* precision_name(WeightPrecision p);
Result<WeightPrecision> parse_precision(const std::string& s);

struct QuantOptions {
  WeightPrecision precision = WeightPrecision::kBf16;
  // int4: one f32 scale per group of group_size inputs, plus an f32 offset (the folded zero
  // point) per group when asymmetric (AWQ / GPTQ checkpoints load into this).
  int64_t group_size = 128;
  bool int4_zero_point = true;
  // fp8: float32 scales per block x block tile (DeepSeek-V3's weight_scale_inv) or, with
  // fp8_block == 0, one float32 scale per tensor. nf4: f32 absmax per 64 inputs.
  int64_t fp8_block = 128;
  bool lm_head_int8 = false;  // lm_head as int8 per-channel instead of bf16
};

// How one tensor is stored: label ("int4 g128 + zero", "bf16"), bytes.
struct StoredTensor {
  std::string format;
  int64_t bytes = 0;
};
StoredTensor stored_tensor(const model::TensorSpec& t, const QuantOptions& q);

// One row of the breakdown: tensors of one role stored in one format.
struct WeightGroup {
  std::string role;    // "linear", "embedding", "lm_head", "norm", "bias", "router", ...
  std::string format;  // "int4 g128 + zero", "bf16", ...
  int64_t n_tensors = 0;
  int64_t params = 0;
  int64_t bytes = 0;
};

struct WeightSummary {
  std::vector<WeightGroup> groups;
  int64_t total_params = 0;
  int64_t total_bytes = 0;
  int64_t embedding_params = 0;
  int64_t embedding_bytes = 0;
  int64_t lm_head_params = 0;
  // MoE: routed experts are the only tensors a token does not read in full.
  int64_t routed_expert_params = 0;
  int64_t routed_expert_bytes = 0;
  int64_t n_moe_layers = 0;
  int64_t n_routed_experts = 0;  // per MoE layer
  int64_t experts_per_token = 0;

  // Parameters one token multiplies with (all but the embedding table; k of n routed experts).
  double active_params_per_token() const;
  // Bytes one decode step of `batch` sequences reads, embedding table excluded: every
  // non-routed tensor, plus the expected number of distinct routed experts the batch touches
  // (uniform routing: n * (1 - (1 - k/n)^batch) per MoE layer).
  double step_weight_bytes(int64_t batch) const;
  double expected_distinct_experts(int64_t batch) const;
};

// Sums tensor_specs(c) stored as `q` says. Errors name the option when it cannot apply.
Result<WeightSummary> summarize_weights(const model::ModelConfig& c, const QuantOptions& q);

// Weight bytes tensor-parallel rank `rank` of `world` holds: the same tensors cut as the engine
// cuts them (model/shard.h: split heads, intermediate channels and lm_head vocab rows;
// replicated embedding, norms and row-parallel biases). Errors where the engine cannot shard
// (model/shard.h's reasons).
Result<int64_t> rank_weight_bytes(const model::ModelConfig& c, const QuantOptions& q, int rank, int world);
// The largest of those over the ranks: the per-GPU weight bytes of a tensor-parallel plan.
Result<int64_t> per_gpu_weight_bytes(const model::ModelConfig& c, const QuantOptions& q, int world);

}  // namespace frugal::plan
