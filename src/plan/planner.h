// `frugal plan`: does a model fit on a GPU, how fast is it, what does a million tokens cost.
// Every figure is computed once here and recorded with its formula (PlanStep), so the terminal
// output shows the arithmetic and --json carries the same numbers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/status.h"
#include "plan/calibration.h"
#include "plan/catalog.h"
#include "plan/ownership.h"
#include "plan/speed.h"
#include "plan/weights.h"

namespace frugal::plan {

// Memory the engine needs besides weights and KV (per GPU). The defaults mirror
// runtime::EngineOptions (0.90 utilization, 8192 batched tokens, 16-token blocks).
struct Overheads {
  double gpu_memory_utilization = 0.90;
  int64_t cuda_context_bytes = 512ll << 20;  // CUDA context + cuBLAS/cuBLASLt workspaces
  int64_t graphs_bytes = 256ll << 20;        // captured decode graphs, one per batch bucket
  int64_t max_batched_tokens = 8192;         // prefill chunk the activation buffers are sized for
  int block_size = 16;
};

struct PlanRequest {
  ModelEntry model;
  GpuSpec gpu;
  int n_gpus = 1;
  QuantOptions quant;
  DType kv_dtype = DType::kBF16;
  int64_t context = 0;      // 0: min(4096, max_position_embeddings)
  int64_t concurrency = 1;
  int64_t prompt_len = 0;   // 0: min(1024, context)
  // --kv-window W --kv-sinks S (docs/kv_cache.md): a sequence attends to, and keeps blocks of,
  // its first S and last W tokens only; 0 = the whole context.
  int64_t kv_window = 0;
  int64_t kv_sinks = 0;
  double price_per_hour = -1;  // per GPU; < 0: the catalog's
  Efficiency eff;
  Overheads over;
  std::string calibrate_path;  // `frugal bench` JSON; empty: none
  OwnershipInputs own;         // the owned-hardware cost beside the rent (ownership.h)
};

// One line of shown arithmetic: "label = formula = numbers = result".
// Tokens a decode step at context `context` reads (and keeps) per sequence: the whole context,
// or under a window its last W plus its first S.
inline int64_t attended_kv_tokens(const PlanRequest& r, int64_t context) {
  return r.kv_window > 0 ? std::min(context, r.kv_window + r.kv_sinks) : context;
}

struct PlanStep {
  std::string section;  // "memory", "speed", "cost"
  std::string label, formula, numbers, result;
  double value = 0;
};

struct MemoryPlan {
  int64_t usable_bytes = 0;          // per GPU
  int64_t weights_bytes = 0;         // per GPU
  int64_t workspace_bytes = 0;
  int64_t overhead_bytes = 0;        // CUDA context + graphs
  int64_t kv_budget_bytes = 0;
  int64_t kv_bytes_per_token = 0;       // per rank, kv_layout
  int64_t kv_bytes_per_token_model = 0; // whole model on one GPU (tp = 1)
  int32_t kv_blocks = 0;
  int64_t kv_tokens = 0;
  int64_t needed_blocks = 0;
  int64_t needed_kv_bytes = 0;
  int64_t total_needed_bytes = 0;   // weights + workspace + overhead + KV for context x concurrency
  bool fits = false;
  int64_t max_context_batch1 = 0;   // min(pool tokens, max_position_embeddings)
  bool max_context_limited_by_model = false;
  int64_t max_concurrency = 0;      // at the requested context
};

struct SpeedPlan {
  std::string compute_dtype, compute_note;
  double peak_tflops = 0;
  StepTime decode_b1;
  double decode_b1_bytes_per_token = 0;
  double prefill_flops_per_token = 0;
  double prefill_tok_per_s = 0;
  double ttft_s = 0;
  std::vector<StepTime> sweep;  // decode vs concurrency at the requested context
  int64_t crossover_batch = 0;  // first batch that is compute-bound; 0: none up to kMaxSweep
  StepTime at_concurrency;
};

struct CostPlan {
  double price_per_gpu_hour = 0;
  std::string price_source;
  double usd_per_m_tokens_b1 = 0;
  double usd_per_m_tokens_concurrency = 0;
  // Owned hardware (ownership.h); absent when the catalog has no list price and none was given.
  bool has_own = false;
  std::string own_missing;  // why not
  OwnershipCost own_b1, own_concurrency;
};

struct TpOption {
  int n_gpus = 1;
  bool possible = true;
  std::string why_not;
  bool fits = false;
  int64_t max_context_batch1 = 0;
  int64_t max_concurrency = 0;
  double decode_b1_tok_per_s = 0;
  double usd_per_m_tokens_b1 = 0;
};

struct Plan {
  PlanRequest req;  // with defaults resolved
  WeightSummary weights;
  MemoryPlan memory;
  SpeedPlan speed;
  CostPlan cost;
  std::vector<TpOption> tp_options;
  int smallest_fitting_gpus = 0;  // 0: none of 1, 2, 4, 8
  std::optional<CalibrationReport> calibration;
  std::vector<PlanStep> steps;
  std::vector<std::string> notes;
};

Result<Plan> make_plan(PlanRequest req);

// Terminal report (arithmetic shown) and JSON (every figure).
std::string format_plan_text(const Plan& p);
nlohmann::json plan_to_json(const Plan& p);

}  // namespace frugal::plan
