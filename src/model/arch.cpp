#include "model/arch.h"

#include <array>

namespace frugal::model {
namespace {

using R = TensorRole;
using S = Scope;
using C = Cond;
using D = Dim;
using T = TensorSlot;

// Llama and Qwen2 (HF LlamaForCausalLM / Qwen2ForCausalLM) share one tensor layout; only the
// bias rules differ (flags in ArchInfo).
constexpr TensorPattern kLlamaPatterns[] = {
    {T::kTokenEmbd, "model.embed_tokens.weight", R::kEmbedding, S::kGlobal, C::kAlways, D::kVocab, D::kHidden},
    {T::kAttnNorm, "model.layers.{i}.input_layernorm.weight", R::kNorm, S::kLayer, C::kAlways, D::kHidden},
    {T::kAttnQ, "model.layers.{i}.self_attn.q_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kQ, D::kHidden},
    {T::kAttnQBias, "model.layers.{i}.self_attn.q_proj.bias", R::kBias, S::kLayer, C::kQkvBias, D::kQ},
    {T::kAttnK, "model.layers.{i}.self_attn.k_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kKv, D::kHidden},
    {T::kAttnKBias, "model.layers.{i}.self_attn.k_proj.bias", R::kBias, S::kLayer, C::kQkvBias, D::kKv},
    {T::kAttnV, "model.layers.{i}.self_attn.v_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kKv, D::kHidden},
    {T::kAttnVBias, "model.layers.{i}.self_attn.v_proj.bias", R::kBias, S::kLayer, C::kQkvBias, D::kKv},
    {T::kAttnO, "model.layers.{i}.self_attn.o_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kHidden, D::kQ},
    {T::kAttnOBias, "model.layers.{i}.self_attn.o_proj.bias", R::kBias, S::kLayer, C::kOBias, D::kHidden},
    {T::kFfnNorm, "model.layers.{i}.post_attention_layernorm.weight", R::kNorm, S::kLayer, C::kAlways, D::kHidden},
    {T::kFfnGate, "model.layers.{i}.mlp.gate_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kInter, D::kHidden},
    {T::kFfnGateBias, "model.layers.{i}.mlp.gate_proj.bias", R::kBias, S::kLayer, C::kMlpBias, D::kInter},
    {T::kFfnUp, "model.layers.{i}.mlp.up_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kInter, D::kHidden},
    {T::kFfnUpBias, "model.layers.{i}.mlp.up_proj.bias", R::kBias, S::kLayer, C::kMlpBias, D::kInter},
    {T::kFfnDown, "model.layers.{i}.mlp.down_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kHidden, D::kInter},
    {T::kFfnDownBias, "model.layers.{i}.mlp.down_proj.bias", R::kBias, S::kLayer, C::kMlpBias, D::kHidden},
    {T::kOutputNorm, "model.norm.weight", R::kNorm, S::kGlobal, C::kAlways, D::kHidden},
    {T::kOutput, "lm_head.weight", R::kLmHead, S::kGlobal, C::kUntied, D::kVocab, D::kHidden},
};

// DeepSeek-V2/V3 as in HF's modeling_deepseek.py: MLA attention and (per layer) dense MLP or
// MoE with routed + shared experts.
constexpr TensorPattern kDeepseekPatterns[] = {
    {T::kTokenEmbd, "model.embed_tokens.weight", R::kEmbedding, S::kGlobal, C::kAlways, D::kVocab, D::kHidden},
    {T::kAttnNorm, "model.layers.{i}.input_layernorm.weight", R::kNorm, S::kLayer, C::kAlways, D::kHidden},
    {T::kAttnQ, "model.layers.{i}.self_attn.q_proj.weight", R::kLinear, S::kLayer, C::kNoQLora, D::kMlaQ, D::kHidden},
    {T::kAttnQA, "model.layers.{i}.self_attn.q_a_proj.weight", R::kLinear, S::kLayer, C::kQLora, D::kQLora, D::kHidden},
    {T::kAttnQABias, "model.layers.{i}.self_attn.q_a_proj.bias", R::kBias, S::kLayer, C::kQLoraBias, D::kQLora},
    {T::kAttnQANorm, "model.layers.{i}.self_attn.q_a_layernorm.weight", R::kNorm, S::kLayer, C::kQLora, D::kQLora},
    {T::kAttnQB, "model.layers.{i}.self_attn.q_b_proj.weight", R::kLinear, S::kLayer, C::kQLora, D::kMlaQ, D::kQLora},
    {T::kAttnKvA, "model.layers.{i}.self_attn.kv_a_proj_with_mqa.weight", R::kLinear, S::kLayer, C::kAlways, D::kKvA, D::kHidden},
    {T::kAttnKvABias, "model.layers.{i}.self_attn.kv_a_proj_with_mqa.bias", R::kBias, S::kLayer, C::kAttnBias, D::kKvA},
    {T::kAttnKvANorm, "model.layers.{i}.self_attn.kv_a_layernorm.weight", R::kNorm, S::kLayer, C::kAlways, D::kKvLora},
    {T::kAttnKvB, "model.layers.{i}.self_attn.kv_b_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kKvB, D::kKvLora},
    {T::kAttnO, "model.layers.{i}.self_attn.o_proj.weight", R::kLinear, S::kLayer, C::kAlways, D::kHidden, D::kMlaO},
    {T::kAttnOBias, "model.layers.{i}.self_attn.o_proj.bias", R::kBias, S::kLayer, C::kAttnBias, D::kHidden},
    {T::kFfnNorm, "model.layers.{i}.post_attention_layernorm.weight", R::kNorm, S::kLayer, C::kAlways, D::kHidden},
    {T::kFfnGate, "model.layers.{i}.mlp.gate_proj.weight", R::kLinear, S::kLayer, C::kDenseLayer, D::kInter, D::kHidden},
    {T::kFfnUp, "model.layers.{i}.mlp.up_proj.weight", R::kLinear, S::kLayer, C::kDenseLayer, D::kInter, D::kHidden},
    {T::kFfnDown, "model.layers.{i}.mlp.down_proj.weight", R::kLinear, S::kLayer, C::kDenseLayer, D::kHidden, D::kInter},
    {T::kFfnRouter, "model.layers.{i}.mlp.gate.weight", R::kRouter, S::kLayer, C::kMoeLayer, D::kExperts, D::kHidden},
    {T::kFfnRouterBias, "model.layers.{i}.mlp.gate.e_score_correction_bias", R::kRouterBias, S::kLayer, C::kScoreBias, D::kExperts},
    {T::kExpGate, "model.layers.{i}.mlp.experts.{e}.gate_proj.weight", R::kLinear, S::kExpert, C::kMoeLayer, D::kMoeInter, D::kHidden},
    {T::kExpUp, "model.layers.{i}.mlp.experts.{e}.up_proj.weight", R::kLinear, S::kExpert, C::kMoeLayer, D::kMoeInter, D::kHidden},
    {T::kExpDown, "model.layers.{i}.mlp.experts.{e}.down_proj.weight", R::kLinear, S::kExpert, C::kMoeLayer, D::kHidden, D::kMoeInter},
    {T::kShexpGate, "model.layers.{i}.mlp.shared_experts.gate_proj.weight", R::kLinear, S::kLayer, C::kSharedExperts, D::kSharedInter, D::kHidden},
    {T::kShexpUp, "model.layers.{i}.mlp.shared_experts.up_proj.weight", R::kLinear, S::kLayer, C::kSharedExperts, D::kSharedInter, D::kHidden},
    {T::kShexpDown, "model.layers.{i}.mlp.shared_experts.down_proj.weight", R::kLinear, S::kLayer, C::kSharedExperts, D::kHidden, D::kSharedInter},
    {T::kOutputNorm, "model.norm.weight", R::kNorm, S::kGlobal, C::kAlways, D::kHidden},
    {T::kOutput, "lm_head.weight", R::kLmHead, S::kGlobal, C::kUntied, D::kVocab, D::kHidden},
};

constexpr std::string_view kIgnoredSuffixes[] = {".rotary_emb.inv_freq"};

constexpr ArchInfo kArchs[] = {
    {.hf_class = "LlamaForCausalLM", .family = Family::kLlama, .runnable = true,
     .qkv_bias_always = false, .o_bias_with_attention_bias = true, .router_score_bias = false,
     .patterns = kLlamaPatterns, .ignored_suffixes = kIgnoredSuffixes},
    {.hf_class = "Qwen2ForCausalLM", .family = Family::kLlama, .runnable = true,
     .qkv_bias_always = true, .o_bias_with_attention_bias = false, .router_score_bias = false,
     .patterns = kLlamaPatterns, .ignored_suffixes = kIgnoredSuffixes},
    {.hf_class = "DeepseekV2ForCausalLM", .family = Family::kDeepseek, .runnable = true,
     .qkv_bias_always = false, .o_bias_with_attention_bias = false, .router_score_bias = false,
     .patterns = kDeepseekPatterns, .ignored_suffixes = kIgnoredSuffixes},
    {.hf_class = "DeepseekV3ForCausalLM", .family = Family::kDeepseek, .runnable = true,
     .qkv_bias_always = false, .o_bias_with_attention_bias = false, .router_score_bias = true,
     .patterns = kDeepseekPatterns, .ignored_suffixes = kIgnoredSuffixes},
};

bool cond_holds(Cond cond, const ArchInfo& a, const ModelConfig& c, int64_t layer) {
  switch (cond) {
    case Cond::kAlways: return true;
    case Cond::kUntied: return !c.tie_word_embeddings;
    case Cond::kQkvBias: return a.qkv_bias_always || c.attention_bias;
    case Cond::kOBias: return a.o_bias_with_attention_bias && c.attention_bias;
    case Cond::kAttnBias: return c.attention_bias;
    case Cond::kMlpBias: return c.mlp_bias;
    case Cond::kQLora: return c.mla.q_lora_rank > 0;
    case Cond::kQLoraBias: return c.mla.q_lora_rank > 0 && c.attention_bias;
    case Cond::kNoQLora: return c.mla.q_lora_rank == 0;
    case Cond::kDenseLayer: return !is_moe_layer(c, layer);
    case Cond::kMoeLayer: return is_moe_layer(c, layer);
    case Cond::kSharedExperts: return is_moe_layer(c, layer) && c.moe.n_shared_experts > 0;
    case Cond::kScoreBias: return is_moe_layer(c, layer) && a.router_score_bias;
  }
  return false;
}

std::string expand(std::string_view pattern, int64_t layer, int64_t expert) {
  std::string out;
  out.reserve(pattern.size() + 8);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 3, "{i}") == 0) {
      out += std::to_string(layer);
      i += 2;
    } else if (pattern.compare(i, 3, "{e}") == 0) {
      out += std::to_string(expert);
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

void emit(const TensorPattern& p, const ModelConfig& c, int64_t layer, int64_t expert,
          std::vector<TensorSpec>* out) {
  TensorSpec s{.name = expand(p.name, layer, expert), .shape = {}, .role = p.role,
               .layer = layer, .expert = expert};
  s.shape = p.d1 == Dim::kNone ? Shape{dim_value(p.d0, c)}
                               : Shape{dim_value(p.d0, c), dim_value(p.d1, c)};
  out->push_back(std::move(s));
}

// Emits one layer's tensors: layer-scoped patterns in order; a run of expert-scoped patterns
// is expanded expert-major (experts.0.gate, experts.0.up, experts.0.down, experts.1...).
void emit_layer(const ArchInfo& a, std::span<const TensorPattern> run, const ModelConfig& c,
                int64_t layer, std::vector<TensorSpec>* out) {
  for (size_t i = 0; i < run.size();) {
    if (run[i].scope == Scope::kLayer) {
      if (cond_holds(run[i].cond, a, c, layer)) emit(run[i], c, layer, -1, out);
      ++i;
      continue;
    }
    size_t j = i;
    while (j < run.size() && run[j].scope == Scope::kExpert) ++j;
    for (int64_t e = 0; e < c.moe.n_routed_experts; ++e)
      for (size_t k = i; k < j; ++k)
        if (cond_holds(run[k].cond, a, c, layer)) emit(run[k], c, layer, e, out);
    i = j;
  }
}

}  // namespace

const char* tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::kEmbedding: return "embedding";
    case TensorRole::kLmHead: return "lm_head";
    case TensorRole::kLinear: return "linear";
    case TensorRole::kNorm: return "norm";
    case TensorRole::kBias: return "bias";
    case TensorRole::kRouter: return "router";
    case TensorRole::kRouterBias: return "router_bias";
  }
  return "?";
}

int64_t dim_value(Dim d, const ModelConfig& c) {
  const auto& m = c.mla;
  switch (d) {
    case Dim::kNone: return 1;
    case Dim::kVocab: return c.vocab_size;
    case Dim::kHidden: return c.hidden_size;
    case Dim::kInter: return c.intermediate_size;
    case Dim::kQ: return c.num_attention_heads * c.head_dim;
    case Dim::kKv: return c.num_key_value_heads * c.head_dim;
    case Dim::kMlaQ: return c.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    case Dim::kQLora: return m.q_lora_rank;
    case Dim::kKvLora: return m.kv_lora_rank;
    case Dim::kKvA: return m.kv_lora_rank + m.qk_rope_head_dim;
    case Dim::kKvB: return c.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim);
    case Dim::kMlaO: return c.num_attention_heads * m.v_head_dim;
    case Dim::kExperts: return c.moe.n_routed_experts;
    case Dim::kMoeInter: return c.moe.moe_intermediate_size;
    case Dim::kSharedInter: return c.moe.moe_intermediate_size * c.moe.n_shared_experts;
  }
  return 0;
}

std::span<const ArchInfo> all_archs() { return kArchs; }

const ArchInfo* find_arch(std::string_view hf_class) {
  for (const auto& a : kArchs)
    if (a.hf_class == hf_class) return &a;
  return nullptr;
}

Result<const ArchInfo*> arch_for(const ModelConfig& c, const std::string& source) {
  if (const ArchInfo* a = find_arch(c.architecture)) return a;
  std::string known;
  for (const auto& a : kArchs) known += (known.empty() ? "" : ", ") + std::string(a.hf_class);
  return unsupported(source + ": field 'architectures': unknown architecture '" + c.architecture +
                     "' (known: " + known + ")");
}

bool is_moe_layer(const ModelConfig& c, int64_t layer) {
  if (c.moe.n_routed_experts <= 0) return false;
  const int64_t freq = c.moe.moe_layer_freq > 0 ? c.moe.moe_layer_freq : 1;
  return layer >= c.moe.first_k_dense_replace && layer % freq == 0;
}

std::vector<TensorSpec> tensor_specs(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  const ArchInfo* a = find_arch(c.architecture);
  if (!a) return out;
  const auto pats = a->patterns;
  for (size_t i = 0; i < pats.size();) {
    if (pats[i].scope == Scope::kGlobal) {
      if (cond_holds(pats[i].cond, *a, c, -1)) emit(pats[i], c, -1, -1, &out);
      ++i;
      continue;
    }
    size_t j = i;
    while (j < pats.size() && pats[j].scope != Scope::kGlobal) ++j;
    for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer)
      emit_layer(*a, pats.subspan(i, j - i), c, layer, &out);
    i = j;
  }
  return out;
}

std::string tensor_name(const ArchInfo& a, TensorSlot slot, int64_t layer, int64_t expert) {
  for (const auto& p : a.patterns)
    if (p.slot == slot) return expand(p.name, layer, expert);
  return {};
}

int64_t total_params(const std::vector<TensorSpec>& specs) {
  int64_t n = 0;
  for (const auto& s : specs) n += s.shape.numel();
  return n;
}

}  // namespace frugal::model
