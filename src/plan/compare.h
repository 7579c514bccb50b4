// `frugal plan --compare`: every (catalog GPU, count, precision) that fits the model, ranked by
// USD per 1M output tokens, rented or owned (docs/plan.md, "Comparing platforms").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "plan/ownership.h"
#include "plan/planner.h"

namespace frugal::plan {

enum class RankBy { kRent, kOwn };
Result<RankBy> parse_rank_by(const std::string& s);
const char* rank_by_name(RankBy r);

struct CompareRequest {
  ModelEntry model;
  std::vector<GpuSpec> gpus;                 // the catalog
  std::vector<WeightPrecision> precisions = {WeightPrecision::kBf16, WeightPrecision::kFp8,
                                             WeightPrecision::kInt8, WeightPrecision::kInt4};
  QuantOptions quant;                        // group size etc.; precision is set per row
  int gpus_max = 8;                          // counts tried: 1, 2, 4, 8 up to this
  DType kv_dtype = DType::kBF16;
  int64_t context = 0;                       // 0: min(4096, max_position_embeddings)
  int64_t concurrency = 0;                   // 0: each configuration at its max batch
  OwnershipInputs own;                       // purchase_usd / power_w < 0: each GPU's catalog figure
  RankBy rank_by = RankBy::kRent;
  Efficiency eff;
  Overheads over;
};

struct CompareRow {
  std::string gpu, gpu_display;
  int n_gpus = 1;
  std::string precision;
  double weights_gib_per_gpu = 0;
  int64_t max_batch = 0;             // max concurrency at the context
  int64_t batch = 0;                 // the batch the speed and cost are evaluated at
  double tok_per_s = 0;              // decode, all GPUs, every sequence at the full context
  double tok_per_s_per_gpu = 0;
  double decode_b1_tok_per_s = 0;
  double rent_per_gpu_hour = 0;
  double usd_per_m_rent = 0;
  OwnershipCost own;
};

struct Comparison {
  CompareRequest req;  // context resolved
  std::vector<CompareRow> rows;  // fitting configurations only, best first
  int64_t n_tried = 0;           // configurations whose heads split over the GPU count
  int64_t n_not_fitting = 0;
  int64_t n_not_splitting = 0;   // GPU counts the model's heads do not split over
  std::vector<std::string> notes;
  double value(const CompareRow& r) const {
    return req.rank_by == RankBy::kOwn ? r.own.usd_per_m_tokens : r.usd_per_m_rent;
  }
};

Result<Comparison> compare_platforms(CompareRequest req);
std::string format_comparison_text(const Comparison& c);
nlohmann::json comparison_to_json(const Comparison& c);

}  // namespace frugal::plan
