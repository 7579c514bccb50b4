// The architecture table: HF class name -> family, feature flags and tensor name patterns, as
// data. tensor_specs() expands the table for one config into the exact list of tensors the
// engine loads: the loader checks checkpoints against it (missing / extra / mis-shaped),
// dummy weights are generated from it, and the planner sums weight bytes from it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"

namespace frugal::model {

enum class Family { kLlama, kDeepseek };

enum class TensorRole {
  kEmbedding,   // token embedding table [vocab, hidden]
  kLmHead,      // output projection [vocab, hidden] (absent when embeddings are tied)
  kLinear,      // a projection weight [out, in] (HF nn.Linear layout)
  kNorm,        // an RMSNorm weight [dim]
  kBias,        // a projection bias [out]
  kRouter,      // MoE router (gate) weight [n_experts, hidden]
  kRouterBias,  // DeepSeek-V3 e_score_correction_bias [n_experts]
};
const char* tensor_role_name(TensorRole r);

struct TensorSpec {
  std::string name;  // full checkpoint name, e.g. "model.layers.3.self_attn.q_proj.weight"
  Shape shape;
  TensorRole role;
  int64_t layer = -1;   // -1 for global tensors
  int64_t expert = -1;  // routed expert index, -1 otherwise
};

// Symbolic tensor dimensions resolved against a ModelConfig.
enum class Dim {
  kNone,        // unused trailing dimension
  kVocab,
  kHidden,
  kInter,       // dense MLP intermediate_size
  kQ,           // n_head * head_dim
  kKv,          // n_head_kv * head_dim
  kMlaQ,        // n_head * (qk_nope_head_dim + qk_rope_head_dim)
  kQLora,       // q_lora_rank
  kKvLora,      // kv_lora_rank
  kKvA,         // kv_lora_rank + qk_rope_head_dim
  kKvB,         // n_head * (qk_nope_head_dim + v_head_dim)
  kMlaO,        // n_head * v_head_dim
  kExperts,     // n_routed_experts
  kMoeInter,    // moe_intermediate_size
  kSharedInter, // moe_intermediate_size * n_shared_experts
};
int64_t dim_value(Dim d, const ModelConfig& c);

// When a pattern applies.
enum class Cond {
  kAlways,
  kUntied,       // tie_word_embeddings == false
  kQkvBias,      // arch always has q/k/v biases, or config.attention_bias
  kOBias,        // arch puts a bias on o_proj when config.attention_bias
  kAttnBias,     // config.attention_bias (DeepSeek's q_a / kv_a / o projections)
  kMlpBias,      // config.mlp_bias
  kQLora,        // MLA with q_lora_rank > 0
  kQLoraBias,    // kQLora and config.attention_bias (q_a_proj bias)
  kNoQLora,      // MLA with q_lora_rank == 0 (plain q_proj, V2-Lite)
  kDenseLayer,   // layer uses the dense MLP
  kMoeLayer,     // layer uses the MoE block
  kSharedExperts,// MoE layer with n_shared_experts > 0
  kScoreBias,    // MoE layer of an arch with a router score-correction bias (V3)
};

enum class Scope { kGlobal, kLayer, kExpert };

// What the forward pass uses a tensor for: a family binds its weights by slot (tensor_name),
// so checkpoint names live in this table only (llama.cpp's LLM_TENSOR_* idea).
enum class TensorSlot {
  kTokenEmbd, kOutputNorm, kOutput,
  kAttnNorm, kAttnQ, kAttnQBias, kAttnK, kAttnKBias, kAttnV, kAttnVBias, kAttnO, kAttnOBias,
  kAttnQA, kAttnQABias, kAttnQANorm, kAttnQB, kAttnKvA, kAttnKvABias, kAttnKvANorm, kAttnKvB,  // MLA
  kFfnNorm, kFfnGate, kFfnGateBias, kFfnUp, kFfnUpBias, kFfnDown, kFfnDownBias,
  kFfnRouter, kFfnRouterBias, kExpGate, kExpUp, kExpDown, kShexpGate, kShexpUp, kShexpDown,  // MoE
};

struct TensorPattern {
  TensorSlot slot;
  std::string_view name;  // "{i}" = layer index, "{e}" = expert index
  TensorRole role;
  Scope scope;
  Cond cond;
  Dim d0;
  Dim d1 = Dim::kNone;
};

struct ArchInfo {
  std::string_view hf_class;     // "LlamaForCausalLM"
  Family family;
  bool runnable;                 // the engine has a forward pass for it
  bool qkv_bias_always;          // Qwen2: q/k/v biases whatever config.attention_bias says
  bool o_bias_with_attention_bias;  // Llama: attention_bias also biases o_proj
  bool router_score_bias;        // DeepSeek-V3: mlp.gate.e_score_correction_bias
  std::span<const TensorPattern> patterns;
  // Checkpoint tensors that are allowed and ignored (e.g. stale rotary_emb.inv_freq buffers).
  std::span<const std::string_view> ignored_suffixes;
};

// Every known architecture (the one registration point; tests walk it).
std::span<const ArchInfo> all_archs();
// nullptr when unknown.
const ArchInfo* find_arch(std::string_view hf_class);
// The arch of a config; errors name `source` and the architectures field when unknown.
Result<const ArchInfo*> arch_for(const ModelConfig& c, const std::string& source);
// Whether layer `layer` of a MoE config uses the MoE block (DeepSeek's first_k_dense_replace /
// moe_layer_freq rule).
bool is_moe_layer(const ModelConfig& c, int64_t layer);

// The exact tensors the engine loads for `c` (empty for an unknown architecture).
std::vector<TensorSpec> tensor_specs(const ModelConfig& c);
// The checkpoint name of `slot` for layer / expert ("{i}" / "{e}" expanded); empty when the
// arch has no pattern for the slot. Says nothing about whether the config has the tensor
// (biases, tied heads): WeightStore::find does.
std::string tensor_name(const ArchInfo& a, TensorSlot slot, int64_t layer = -1, int64_t expert = -1);
// Sum of numel over specs (parameters the engine loads).
int64_t total_params(const std::vector<TensorSpec>& specs);

}  // namespace frugal::model
