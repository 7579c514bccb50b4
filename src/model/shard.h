// Tensor-parallel sharding of the Llama family (Llama, Qwen2): which slice of each checkpoint
// tensor rank r of N holds, as data the loader, the forward and the planner share.
//
//   q, k, v (+ biases), gate, up (+ biases): column-parallel, rows of W split (outputs)
//   o, down:                                 row-parallel, columns of W split (inputs); their
//                                            biases are replicated and added by rank 0 only
//   lm_head (or the tied embedding's rows):  vocab-parallel, logits all-gathered
//   embedding:                               vocab-parallel (a rank's rows; others' ids give zero
//                                            rows, summed by one all-reduce after the lookup)
//   norms:                                   replicated
// Query heads are split into contiguous ranges (balanced: rank r gets heads
// [r H / N, (r + 1) H / N)); a rank's KV heads are the groups its query heads read: one
// replicated KV head when its query heads lie in one GQA group (N > n_head_kv), else whole
// groups (an error when a rank's heads straddle a group partly). The intermediate and vocab
// dimensions are split the same balanced way, in units (a quantized down_proj's group size).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "model/config.h"

namespace frugal::model {

// [begin, begin + count) of a dimension.
struct Range {
  int64_t begin = 0;
  int64_t count = 0;
};

// What rank `rank` of `world` holds of the model's split dimensions.
struct RankLayout {
  int rank = 0;
  int world = 1;
  Range heads;     // query heads
  Range kv_heads;  // KV heads
  Range inter;     // MLP intermediate channels
  Range vocab;     // lm_head rows (vocab-parallel)
  Range experts;   // MoE: the routed experts this rank holds (expert parallelism)
  Range shared;    // MoE: the shared experts' channels (n_shared x moe_intermediate_size, split)
  int64_t vocab_pad = 0;  // max vocab count over ranks (the all-gather's per-rank width)
};

// Balanced split of n over world ranks in multiples of unit (n % unit == 0): rank r's range.
Range split_range(int64_t n, int world, int rank, int64_t unit = 1);

// The layout of rank `rank`; errors say which dimension does not split and why. `inter_unit`:
// the intermediate dimension splits at multiples of it (a quantized down_proj's group size).
Result<RankLayout> rank_layout(const ModelConfig& c, int rank, int world, int64_t inter_unit = 1);

// A rank's config: num_attention_heads, num_key_value_heads and intermediate_size of its shard
// (everything else as in c). KV storage and the forward's shapes follow from it.
ModelConfig local_config(const ModelConfig& c, const RankLayout& l);

// How one tensor is cut: axis -1 whole, 0 rows [begin, begin + count), 1 columns.
struct TensorShard {
  int axis = -1;
  int64_t begin = 0;
  int64_t count = 0;
  bool skip = false;  // not held by this rank at all (another rank's routed expert)
};
// The shape rank holds of a tensor of shape `full` cut by s.
Shape shard_shape(const Shape& full, const TensorShard& s);

// One TensorShard per spec (same order). Llama family: heads, MLP and vocab. DeepSeek: MLA
// heads (q / q_b and kv_b rows, o columns; q_a, kv_a and the latent cache replicated), dense and
// shared-expert MLP channels, routed experts whole on the rank that holds them (expert
// parallelism; the others skip them), routers replicated.
Result<std::vector<TensorShard>> shard_tensors(const ModelConfig& c, std::span<const TensorSpec> specs,
                                               const RankLayout& l);

}  // namespace frugal::model
