#include "bench/model_cost.h"

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
  for (const auto& s : specs) {
    bool tied_embedding = s.role == model::TensorRole::kEmbedding && c.tie_word_embeddings;
    const bool quant = eo.dummy_weights && prec != model::DummyPrecision::kDense &&
                       s.role == model::TensorRole::kLinear && s.shape.ndim == 2;
    if (quant)
      mc.step_weight_bytes += ops::weight_bytes(model::dummy_linear_format(prec, c.torch_dtype, s.shape[1]), s.shape[0], s.shape[1]);
    else if (s.role != model::TensorRole::kEmbedding || tied_embedding)
      mc.step_weight_bytes += s.shape.numel() * wbytes;
    if (s.role == model::TensorRole::kLinear || s.role == model::TensorRole::kLmHead || tied_embedding)
      mc.linear_params += s.shape.numel();
  }
  // The engine's KV shape (MLA latent caches included), one rank.
  mc.kv_bytes_per_token = kv::bytes_per_token(
      kv::kv_geometry(c, {.tensor_parallel = 1}, {.dtype = kv_dtype, .block_size = eo.block_size}));
  mc.n_layers = c.num_hidden_layers;
  mc.q_dim = c.num_attention_heads * c.head_dim;
  return mc;
}

}  // namespace frugal::bench
