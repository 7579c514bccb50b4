#include "bench/model_cost.h"

#include <cmath>

#include "kv/kv_geometry.h"
#include "kv/kv_layout.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/weights.h"

namespace frugal::bench {

Result<ModelCost> model_cost(const runtime::EngineOptions& eo, DType kv_dtype) {
  std::string cfg_path = eo.model_dir;
  if (cfg_path.size() < 5 || cfg_path.substr(cfg_path.size() - 5) != ".json") cfg_path += "/config.json";
  FRUGAL_ASSIGN_OR_RETURN(model::ModelConfig c, model::load_model_config(cfg_path));
  ModelCost mc;
  mc.name = cfg_path;
  const auto specs = model::tensor_specs(c);
  const int64_t wbytes = dtype_bytes(c.torch_dtype, 1);
  // Dummy weights of a quantized precision: linears are read in their format (model/weights.h).
  FRUGAL_ASSIGN_OR_RETURN(const model::DummyPrecision prec, model::parse_dummy_precision(eo.weight_precision));
  FRUGAL_ASSIGN_OR_RETURN(const model::DummyPrecision lm_head, model::parse_lm_head_precision(eo.lm_head_precision));
  mc.n_routed_experts = c.moe.n_routed_experts;
  mc.experts_per_token = c.moe.num_experts_per_tok;
  for (const auto& s : specs) {
    bool tied_embedding = s.role == model::TensorRole::kEmbedding && c.tie_word_embeddings;
    const model::DummyPrecision p = s.role == model::TensorRole::kLmHead ? lm_head : prec;
    const bool quant = eo.dummy_weights && p != model::DummyPrecision::kDense && s.shape.ndim == 2 &&
                       (s.role == model::TensorRole::kLinear || s.role == model::TensorRole::kLmHead);
    const bool routed = s.expert >= 0;  // a routed expert's tensor (model/arch.h)
    int64_t bytes = 0;
    if (quant)
      bytes = ops::weight_bytes(model::dummy_linear_format(p, c.torch_dtype, s.shape[1]), s.shape[0], s.shape[1]);
    else if (s.role != model::TensorRole::kEmbedding || tied_embedding)
      bytes = s.shape.numel() * wbytes;
    mc.step_weight_bytes += bytes;
    if (routed) mc.routed_expert_bytes += bytes;
    if (s.role == model::TensorRole::kLinear || s.role == model::TensorRole::kLmHead || tied_embedding) {
      mc.linear_params += s.shape.numel();
      if (routed) mc.routed_expert_params += s.shape.numel();
    }
  }
  // The engine's KV shape (MLA latent caches included), one rank.
  mc.kv_bytes_per_token = kv::bytes_per_token(
      kv::kv_geometry(c, {.tensor_parallel = 1}, {.dtype = kv_dtype, .block_size = eo.block_size}));
  mc.n_layers = c.num_hidden_layers;
  mc.q_dim = c.num_attention_heads * c.head_dim;
  return mc;
}

void use_loaded_weight_bytes(ModelCost& mc, const std::vector<model::WeightRoleBytes>& roles) {
  bool quantized = false, untied = false;
  for (const auto& r : roles) {
    quantized |= r.format.rfind("dense", 0) != 0;
    untied |= r.role == "lm_head";
  }
  if (!quantized) return;
  int64_t step = 0, routed = 0;
  for (const auto& r : roles) {
    if (r.role == "embedding" && untied) continue;  // a lookup, not a read of the table
    step += r.bytes;
    if (r.role == "mlp (routed experts)") routed += r.bytes;
  }
  mc.step_weight_bytes = step;
  mc.routed_expert_bytes = routed;
}

double ModelCost::step_bytes_at_batch(int64_t batch) const {
  double b = static_cast<double>(step_weight_bytes - routed_expert_bytes);
  if (n_routed_experts > 0 && experts_per_token > 0) {
    const double n = static_cast<double>(n_routed_experts);
    const double k = static_cast<double>(experts_per_token);
    const double distinct = n * (1.0 - std::pow(1.0 - k / n, static_cast<double>(batch)));
    b += static_cast<double>(routed_expert_bytes) * distinct / n;
  }
  return b;
}

double ModelCost::active_linear_params() const {
  double p = static_cast<double>(linear_params - routed_expert_params);
  if (n_routed_experts > 0 && experts_per_token > 0)
    p += static_cast<double>(routed_expert_params) * static_cast<double>(experts_per_token) /
         static_cast<double>(n_routed_experts);
  return p;
}

}  // namespace frugal::bench
