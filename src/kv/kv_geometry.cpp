#include "kv/kv_geometry.h"

namespace frugal::kv {

KvGeometry kv_geometry(const model::ModelConfig& c, const Parallelism& p, const KvCacheOptions& o) {
  FRUGAL_CHECK_MSG(p.tensor_parallel >= 1, "Parallelism.tensor_parallel must be >= 1");
  KvGeometry g{.n_layers = static_cast<int32_t>(c.num_hidden_layers), .dtype = o.dtype, .block_size = o.block_size};
  if (c.is_mla()) {
    g.kind = KvKind::kMla;
    g.latent_dim = static_cast<int32_t>(c.mla.kv_lora_rank);
    g.rope_dim = static_cast<int32_t>(c.mla.qk_rope_head_dim);
    return g;
  }
  g.kind = KvKind::kGqa;
  g.n_head_kv = static_cast<int32_t>((c.num_key_value_heads + p.tensor_parallel - 1) / p.tensor_parallel);
  g.head_dim_k = static_cast<int32_t>(c.head_dim);
  g.head_dim_v = static_cast<int32_t>(c.head_dim);
  return g;
}

Result<DType> parse_kv_dtype(const std::string& s) {
  if (s == "bf16") return DType::kBF16;
  if (s == "fp8") return DType::kF8E4M3;
  if (s == "int8") return DType::kI8;
  return invalid_argument("unknown KV dtype '" + s + "' (expected bf16, fp8 or int8)");
}

const char* kv_dtype_label(DType d) {
  switch (d) {
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "fp8";
    case DType::kI8: return "int8";
    case DType::kF32:
    case DType::kF16:
    case DType::kI4:
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
    case DType::kBool:
    case DType::kF64:
      return dtype_name(d);
  }
  return dtype_name(d);
}

}  // namespace frugal::kv
