#include "tools/plan/kv_geometry.h"

namespace frugal::tools {

kv::KvGeometry kv_geometry(const model::ModelConfig& c, DType kv_dtype, int tp, int block_size) {
  kv::KvGeometry g{.n_layers = static_cast<int32_t>(c.num_hidden_layers), .dtype = kv_dtype,
                   .block_size = block_size};
  if (c.is_mla()) {
    g.kind = kv::KvKind::kMla;
    g.latent_dim = static_cast<int32_t>(c.mla.kv_lora_rank);
    g.rope_dim = static_cast<int32_t>(c.mla.qk_rope_head_dim);
    return g;
  }
  g.kind = kv::KvKind::kGqa;
  const int64_t per_rank = (c.num_key_value_heads + tp - 1) / tp;
  g.n_head_kv = static_cast<int32_t>(per_rank);
  g.head_dim_k = static_cast<int32_t>(c.head_dim);
  return g;
}

Result<DType> parse_kv_dtype(const std::string& s) {
  if (s == "bf16") return DType::kBF16;
  if (s == "fp8") return DType::kF8E4M3;
  if (s == "int8") return DType::kI8;
  return invalid_argument("--kv-dtype: unknown '" + s + "' (expected bf16, fp8 or int8)");
}

const char* kv_dtype_label(DType d) {
  switch (d) {
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "fp8";
    case DType::kI8: return "int8";
    default: return dtype_name(d);
  }
}

}  // namespace frugal::tools
