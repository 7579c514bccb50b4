#include "kv/kv_layout.h"

#include <string>

namespace frugal::kv {
namespace {

constexpr int64_t kScaleBytes = 4;  // one f32 per scale

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

bool is_kv_dtype(DType d) {
  switch (d) {
    case DType::kBF16:
    case DType::kF16:
    case DType::kF32:
    case DType::kF8E4M3:
    case DType::kI8:
      return true;
    case DType::kI4:
    case DType::kI32:
    case DType::kI64:
    case DType::kU8:
    case DType::kBool:
    case DType::kF64:
      return false;
  }
  return false;
}

int32_t v_dim(const KvGeometry& g) { return g.head_dim_v > 0 ? g.head_dim_v : g.head_dim_k; }

Status require_positive(int64_t v, const char* field) {
  if (v > 0) return Status::ok();
  return invalid_argument(std::string("KvGeometry.") + field + ": expected > 0, got " + std::to_string(v));
}

}  // namespace

bool has_scale_tensors(DType dtype) { return dtype == DType::kI8; }

Status validate(const KvGeometry& g) {
  FRUGAL_RETURN_IF_ERROR(require_positive(g.n_layers, "n_layers"));
  FRUGAL_RETURN_IF_ERROR(require_positive(g.block_size, "block_size"));
  if (!is_kv_dtype(g.dtype)) {
    return unsupported(std::string("KvGeometry.dtype: ") + dtype_name(g.dtype) +
                       " is not a KV cache dtype (expected bf16, f16, f32, f8_e4m3 or i8)");
  }
  switch (g.kind) {
    case KvKind::kGqa:
      FRUGAL_RETURN_IF_ERROR(require_positive(g.n_head_kv, "n_head_kv"));
      FRUGAL_RETURN_IF_ERROR(require_positive(g.head_dim_k, "head_dim_k"));
      if (g.head_dim_v < 0) return invalid_argument("KvGeometry.head_dim_v: expected >= 0 (0 = head_dim_k)");
      return Status::ok();
    case KvKind::kMla:
      FRUGAL_RETURN_IF_ERROR(require_positive(g.latent_dim, "latent_dim"));
      if (g.rope_dim < 0) return invalid_argument("KvGeometry.rope_dim: expected >= 0");
      return Status::ok();
  }
  return internal_error("KvGeometry.kind: unknown value");
}

int64_t slot_bytes(const KvGeometry& g, KvTensor t) {
  const bool scaled = has_scale_tensors(g.dtype);
  const bool gqa = g.kind == KvKind::kGqa;
  switch (t) {
    case KvTensor::kK: return gqa ? dtype_bytes(g.dtype, int64_t{g.n_head_kv} * g.head_dim_k) : 0;
    case KvTensor::kV: return gqa ? dtype_bytes(g.dtype, int64_t{g.n_head_kv} * v_dim(g)) : 0;
    case KvTensor::kKScale:
    case KvTensor::kVScale: return gqa && scaled ? kScaleBytes * g.n_head_kv : 0;
    case KvTensor::kLatent: return gqa ? 0 : dtype_bytes(g.dtype, int64_t{g.latent_dim} + g.rope_dim);
    case KvTensor::kLatentScale: return !gqa && scaled ? kScaleBytes : 0;
  }
  return 0;
}

int64_t bytes_per_token_per_layer(const KvGeometry& g) {
  int64_t sum = 0;
  for (int i = 0; i < kNumKvTensors; ++i) sum += slot_bytes(g, static_cast<KvTensor>(i));
  return sum;
}

int64_t bytes_per_token(const KvGeometry& g) { return bytes_per_token_per_layer(g) * g.n_layers; }

int64_t bytes_per_block(const KvGeometry& g) { return bytes_per_token(g) * g.block_size; }

namespace {

// Fills tensor offsets and the layer stride for n_blocks; returns the layer stride.
int64_t lay_out_layer(const KvGeometry& g, int32_t n_blocks, std::array<int64_t, kNumKvTensors>* offsets) {
  int64_t cursor = 0;
  for (int i = 0; i < kNumKvTensors; ++i) {
    const int64_t row = slot_bytes(g, static_cast<KvTensor>(i));
    if (row == 0) {
      (*offsets)[i] = -1;
      continue;
    }
    (*offsets)[i] = cursor;
    cursor = align_up(cursor + row * g.block_size * n_blocks, kKvAlignment);
  }
  return cursor;
}

}  // namespace

Result<KvArenaLayout> make_arena_layout(const KvGeometry& g, int32_t n_blocks) {
  FRUGAL_RETURN_IF_ERROR(validate(g));
  if (n_blocks < 1) return invalid_argument("KV arena: n_blocks expected >= 1, got " + std::to_string(n_blocks));
  KvArenaLayout a{.geometry = g, .n_blocks = n_blocks};
  a.layer_stride = lay_out_layer(g, n_blocks, &a.tensor_offset);
  a.total_bytes = a.layer_stride * g.n_layers;
  return a;
}

int64_t arena_bytes(const KvGeometry& g, int32_t n_blocks) {
  std::array<int64_t, kNumKvTensors> offsets{};
  return lay_out_layer(g, n_blocks, &offsets) * g.n_layers;
}

int32_t n_blocks_for_budget(const KvGeometry& g, int64_t budget_bytes) {
  const int64_t per_block = bytes_per_block(g);
  if (per_block <= 0 || budget_bytes <= 0) return 0;
  int64_t n = budget_bytes / per_block;
  if (n > INT32_MAX) n = INT32_MAX;
  // Alignment padding is at most kKvAlignment per tensor per layer, so this loop runs a few times.
  while (n > 0 && arena_bytes(g, static_cast<int32_t>(n)) > budget_bytes) --n;
  return static_cast<int32_t>(n);
}

int64_t tensor_offset(const KvArenaLayout& a, int32_t layer, KvTensor t) {
  const int64_t within = a.tensor_offset[static_cast<int>(t)];
  FRUGAL_CHECK_MSG(within >= 0, "KV tensor absent for this geometry");
  FRUGAL_CHECK(layer >= 0 && layer < a.geometry.n_layers);
  return layer * a.layer_stride + within;
}

int64_t slot_offset(const KvArenaLayout& a, int32_t layer, KvTensor t, int32_t block, int32_t slot) {
  FRUGAL_CHECK(block >= 0 && block < a.n_blocks);
  FRUGAL_CHECK(slot >= 0 && slot < a.geometry.block_size);
  const int64_t row = slot_bytes(a.geometry, t);
  return tensor_offset(a, layer, t) + (int64_t{block} * a.geometry.block_size + slot) * row;
}

}  // namespace frugal::kv
