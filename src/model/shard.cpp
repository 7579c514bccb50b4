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
  if (c.is_moe()) {
    const int64_t E = c.moe.n_routed_experts, sh = c.moe.n_shared_experts * c.moe.moe_intermediate_size;
    if (E < world)
      return invalid_argument(tp_name(world) + " exceeds n_routed_experts " + std::to_string(E) +
                              " (every rank holds at least one routed expert)");
    l.experts = split_range(E, world, rank);
    if (sh > 0) {
      if (sh % inter_unit != 0 || sh / inter_unit < world)
        return invalid_argument("the shared experts' " + std::to_string(sh) + " channels do not split over " + tp_name(world) +
                                (inter_unit > 1 ? " in groups of " + std::to_string(inter_unit) : std::string()));
      l.shared = split_range(sh, world, rank, inter_unit);
    }
  }
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
  using T = TensorSlot;
  if (a->family == Family::kDeepseek) {
    const MlaConfig& m = c.mla;
    const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim, hb = l.heads.begin, hc = l.heads.count;
    const TensorShard inter{.axis = 0, .begin = l.inter.begin, .count = l.inter.count};
    const TensorShard shared{.axis = 0, .begin = l.shared.begin, .count = l.shared.count};
    for (size_t i = 0; i < specs.size(); ++i) {
      const TensorSpec& s = specs[i];
      TensorShard& d = out[i];
      if (is_slot(*a, s, T::kAttnQ) || is_slot(*a, s, T::kAttnQB)) d = TensorShard{.axis = 0, .begin = hb * qk, .count = hc * qk};
      else if (is_slot(*a, s, T::kAttnKvB))
        d = TensorShard{.axis = 0, .begin = hb * (m.qk_nope_head_dim + m.v_head_dim), .count = hc * (m.qk_nope_head_dim + m.v_head_dim)};
      else if (is_slot(*a, s, T::kAttnO)) d = TensorShard{.axis = 1, .begin = hb * m.v_head_dim, .count = hc * m.v_head_dim};
      else if (is_slot(*a, s, T::kFfnGate) || is_slot(*a, s, T::kFfnUp)) d = inter;
      else if (is_slot(*a, s, T::kFfnDown)) d = TensorShard{.axis = 1, .begin = inter.begin, .count = inter.count};
      else if (is_slot(*a, s, T::kShexpGate) || is_slot(*a, s, T::kShexpUp)) d = shared;
      else if (is_slot(*a, s, T::kShexpDown)) d = TensorShard{.axis = 1, .begin = shared.begin, .count = shared.count};
      else if (s.expert >= 0 && (s.expert < l.experts.begin || s.expert >= l.experts.begin + l.experts.count)) d.skip = true;
      else if (is_slot(*a, s, T::kOutput) || is_slot(*a, s, T::kTokenEmbd))
        d = TensorShard{.axis = 0, .begin = l.vocab.begin, .count = l.vocab.count};
      // Everything else (norms, q_a, kv_a, routers and their biases, this rank's experts) whole.
    }
    return out;
  }
  if (a->family != Family::kLlama)
    return unsupported(std::string(a->hf_class) + ": tensor parallelism covers the Llama and DeepSeek families so far");
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
