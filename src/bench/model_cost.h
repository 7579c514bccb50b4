// What one token of a model costs, from its config alone: the figures `bench offline` divides its
// timings by to report achieved bandwidth and FLOP rates (docs/bench_offline.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "runtime/engine.h"

namespace frugal::bench {

// Bytes of weights read per decode step (everything but an untied embedding table), FLOPs per
// token of the linear layers, and the KV bytes one token adds (kv::kv_geometry, one rank).
// MoE: a step reads only the routed experts its tokens chose and a token multiplies with only
// its top-k, so routed experts are counted apart and scaled as the planner does
// (plan::WeightSummary::step_weight_bytes: expected distinct experts under uniform routing).
struct ModelCost {
  int64_t step_weight_bytes = 0;   // every weight a step could read, all routed experts included
  int64_t linear_params = 0;       // params in matmuls (incl. lm_head), all routed experts included
  int64_t routed_expert_bytes = 0;   // of step_weight_bytes
  int64_t routed_expert_params = 0;  // of linear_params
  int64_t n_routed_experts = 0;      // 0: dense
  int64_t experts_per_token = 0;
  // Weight bytes one decode step of `batch` sequences reads.
  double step_bytes_at_batch(int64_t batch) const;
  // Matmul params one token multiplies with (FLOPs / 2).
  double active_linear_params() const;
  int64_t kv_bytes_per_token = 0;
  int64_t n_layers = 0;
  int64_t q_dim = 0;
  std::string name;  // the config.json read
};

// eo.model_dir is a model directory or a config.json; the KV cache holds kv_dtype elements in
// blocks of eo.block_size tokens.
Result<ModelCost> model_cost(const runtime::EngineOptions& eo, DType kv_dtype);

// A quantized checkpoint's weight bytes are those of its formats as loaded (int4 codes and their
// scales, not the config dtype's bytes per parameter): the step's bytes from the engine's
// memory report (runtime::MemoryReport::weights_by_role): every role but an untied embedding
// table, routed experts apart. Leaves mc as it is when no role is quantized.
void use_loaded_weight_bytes(ModelCost& mc, const std::vector<model::WeightRoleBytes>& roles);

}  // namespace frugal::bench
