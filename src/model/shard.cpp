#include "model/shard.h"

#include <algorithm>
#include <string>

namespace frugal::model {
namespace {

std::string tp_name(int world) { return "tensor parallel size " + std::to_string(world); }

bool is_slot(const ArchInfo& a, const TensorSpec& s, TensorSlot slot) {
  return s.layer >= 0 ? tensor_name(a, slot, s.layer) == s.name : tensor_name(a, slot) == s.name;
}

}  // namespace

Range split_range(int64_t n, int world, int rank, int64_t unit) {
  const int64_t units = n / unit;
  const int64_t b = units * rank / world, e = units * (rank + 1) / world;
  return Range{.begin = b * unit, .count = (e - b) * unit};
}

Result<RankLayout> rank_layout(const ModelConfig& c, int rank, int world, int64_t inter_unit) {
  if (world < 1 || rank < 0 || rank >= world)
    return invalid_argument("rank " + std::to_string(rank) + " of " + tp_name(world));
  RankLayout l{.rank = rank, .world = world};
  const int64_t H = c.num_attention_heads, K = c.num_key_value_heads;
  if (H < world)
    return invalid_argument(tp_name(world) + " exceeds num_attention_heads " + std::to_string(H) +
                            " (every rank needs at least one query head)");
  if (K < 1 || H % K != 0)
    return invalid_argument("num_attention_heads " + std::to_string(H) + " is not a multiple of num_key_value_heads " +
                            std::to_string(K));
  const int64_t g = H / K;  // query heads per KV head
  l.heads = split_range(H, world, rank);
  const int64_t h0 = l.heads.begin, h1 = l.heads.begin + l.heads.count;
  if (h0 / g == (h1 - 1) / g) {
    l.kv_heads = Range{.begin = h0 / g, .count = 1};  // one group: its KV head (replicated if shared)
  } else if (h0 % g == 0 && h1 % g == 0) {
    l.kv_heads = Range{.begin = h0 / g, .count = (h1 - h0) / g};
  } else {
    return invalid_argument(tp_name(world) + ": rank " + std::to_string(rank) + "'s query heads [" + std::to_string(h0) +
                            ", " + std::to_string(h1) + ") straddle GQA groups of " + std::to_string(g) +
                            " heads (num_attention_heads " + std::to_string(H) + ", num_key_value_heads " +
                            std::to_string(K) + ")");
  }
  if (inter_unit < 1 || c.intermediate_size % inter_unit != 0)
    return invalid_argument("intermediate_size " + std::to_string(c.intermediate_size) +
                            " does not split at the quantization group size " + std::to_string(inter_unit));
  if (c.intermediate_size / inter_unit < world)
    return invalid_argument(tp_name(world) + " exceeds intermediate_size " + std::to_string(c.intermediate_size) +
                            (inter_unit > 1 ? " in groups of " + std::to_string(inter_unit) : std::string()));
  l.inter = split_range(c.intermediate_size, world, rank, inter_unit);
  if (c.vocab_size < world) return invalid_argument(tp_name(world) + " exceeds vocab_size");
  l.vocab = split_range(c.vocab_size, world, rank);
  l.vocab_pad = (c.vocab_size + world - 1) / world;
  return l;
}

ModelConfig local_config(const ModelConfig& c, const RankLayout& l) {
  ModelConfig out = c;
  out.num_attention_heads = l.heads.count;
  out.num_key_value_heads = l.kv_heads.count;
  out.intermediate_size = l.inter.count;
  return out;
}

Shape shard_shape(const Shape& full, const TensorShard& s) {
  Shape out = full;
  if (s.axis >= 0) out.dims[s.axis] = s.count;
  return out;
}

Result<std::vector<TensorShard>> shard_tensors(const ModelConfig& c, std::span<const TensorSpec> specs,
                                               const RankLayout& l) {
  std::vector<TensorShard> out(specs.size());
  if (l.world == 1) return out;
  FRUGAL_ASSIGN_OR_RETURN(const ArchInfo* a, arch_for(c, "config.json"));
  if (a->family != Family::kLlama)
    return unsupported(std::string(a->hf_class) + ": tensor parallelism covers the Llama family (Llama, Qwen2) so far; "
                       "MLA attention and MoE experts are not sharded yet");
  using T = TensorSlot;
  const int64_t hd = c.head_dim;
  const TensorShard q{.axis = 0, .begin = l.heads.begin * hd, .count = l.heads.count * hd};
  const TensorShard kv{.axis = 0, .begin = l.kv_heads.begin * hd, .count = l.kv_heads.count * hd};
  const TensorShard inter{.axis = 0, .begin = l.inter.begin, .count = l.inter.count};
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    TensorShard& d = out[i];
    if (is_slot(*a, s, T::kAttnQ) || is_slot(*a, s, T::kAttnQBias)) d = q;
    else if (is_slot(*a, s, T::kAttnK) || is_slot(*a, s, T::kAttnKBias) || is_slot(*a, s, T::kAttnV) ||
             is_slot(*a, s, T::kAttnVBias)) d = kv;
    else if (is_slot(*a, s, T::kAttnO)) d = TensorShard{.axis = 1, .begin = q.begin, .count = q.count};
    else if (is_slot(*a, s, T::kFfnGate) || is_slot(*a, s, T::kFfnGateBias) || is_slot(*a, s, T::kFfnUp) ||
             is_slot(*a, s, T::kFfnUpBias)) d = inter;
    else if (is_slot(*a, s, T::kFfnDown)) d = TensorShard{.axis = 1, .begin = inter.begin, .count = inter.count};
    else if (is_slot(*a, s, T::kOutput) || is_slot(*a, s, T::kTokenEmbd))
      d = TensorShard{.axis = 0, .begin = l.vocab.begin, .count = l.vocab.count};  // vocab-parallel
    // Everything else (norms, o / down biases) is replicated.
  }
  return out;
}

}  // namespace frugal::model
