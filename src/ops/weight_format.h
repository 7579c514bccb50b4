// Weight formats as data: how a matmul weight W [n, k] (n outputs, k inputs) is stored, and
// the view of one in device memory. A format is a value of WeightFormat; each backend
// dispatches on it explicitly, once per call, and refuses one it has no kernels for with an
// error naming it (never a silent fallback). See docs/weight_formats.md.
//
// Quantized checkpoints (AutoAWQ, GPTQ, compressed-tensors, DeepSeek FP8, bitsandbytes NF4) are
// converted at load into ONE internal layout (ops/quant/checkpoint_layouts.h documents the
// checkpoint layouts; ops/quant/quant_weight.h owns the host copy); the schemes below describe
// that layout, which is what every backend reads:
//   scheme  dtype   packing          group_k      group_n          scales            zeros             k_perm
//   dense   f32/f16/bf16 none        0            0                -                 -                 -
//   int8    i8      none             0 | 32m      1                f32 [n][ng]       none | offset     act order
//   int4    i4      block32_nibbles  0 | 32m      1                f32 [n][ng]       none | offset     act order
//   nf4     i4      block32_nibbles  0 | 32m      1                f32 [n][ng]       none              -
//   fp8     f8e4m3  none             0 | 32m      0 | 1 | bn       f32 [nr][ng]      none              -
// Quantized rows hold k_pad = round_up(k, 32) codes (weight_row_bytes); ng = groups along k
// (weight_groups_k), nr = scale rows (weight_scale_rows). Element (o, j') of the internal order:
//   W = scale[o / group_n][j' / group_k] * value(code) + offset[o][j' / group_k]
// int8: value = code (signed); int4: code 0..15; nf4: kNf4Codebook[code]; fp8: the E4M3 number.
// Internal column j' multiplies x[k_perm[j']] when act_order (GPTQ desc_act), else x[j'].
//
// No STL here: included by .cu files (through ops/params.h). CUDA code is C++17.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace frugal::ops {

// X(Name, "name"): every weight scheme, once. Only dense has kernels today.
#define FRUGAL_WEIGHT_SCHEMES(X)                                                                 \
  X(Dense, "dense") /* W[o, j] = data[o * k + j] in dtype (f32, f16 or bf16); no scales */     \
  X(Int8, "int8")   /* signed int8 codes, W8A16: compressed-tensors int8, GPTQ 8-bit */        \
  X(Int4, "int4")   /* 4-bit codes 0..15 with offsets (zero points), W4A16: AWQ, GPTQ 4-bit */ \
  X(Nf4, "nf4")     /* 4-bit NF4 code book with absmax scales: bitsandbytes */                \
  X(Fp8, "fp8")     /* FP8 E4M3 with tensor / channel / block scales: compressed-tensors, DeepSeek-V3 */

enum class WeightScheme : uint8_t {
#define FRUGAL_WEIGHT_SCHEME_ENUM_(Name, str) k##Name,
  FRUGAL_WEIGHT_SCHEMES(FRUGAL_WEIGHT_SCHEME_ENUM_)
#undef FRUGAL_WEIGHT_SCHEME_ENUM_
};

// How quantized values share storage words.
enum class WeightPacking : uint8_t {
  kNone,            // one value per dtype element
  kBlock32Nibbles,  // 4-bit codes in 32-code blocks of 16 bytes: byte i = code i | code (i + 16) << 4
};

// Which axis is contiguous in the stored weight (every scheme stores [n, k] rows; [k, n]
// checkpoint tensors such as AWQ / GPTQ `qweight` are transposed at load).
enum class WeightLayout : uint8_t {
  kOutIn,  // [n, k] row-major: HF nn.Linear `weight`
  // int4 and int8 only, made by the CUDA backend from kOutIn when it places a weight
  // (prepare_weight): the rows in tiles of 8 (n % 8 == 0), each tile's 8 row_bytes bytes in the
  // same place as before but quad-major: the 64 bytes of quad t (int4 codes 128 t .. 128 t + 127,
  // int8 64 t .. 64 t + 63) of rows 0..7 of the tile one after another, so byte b of row o is at
  //   (o / 8) 8 row_bytes + (b / 64) 512 + (o % 8) 64 + b % 64   (row_bytes % 64 == 0, no act order).
  // A GEMV warp's 16-byte loads (lane = 4 row + chunk) then read 512 contiguous bytes.
  // Scales and offsets keep their row order; rows n0.. of a weight start at n0 row_bytes when
  // n0 % 8 == 0 (weight_row_step).
  kOutInTiles8,
};

// Activations quantized on the fly for W8A8 kernels (FP8 E4M3 with dynamic scales).
enum class ActivationQuant : uint8_t {
  kNone,             // weight-only: x stays in the activation dtype (W8A16, W4A16, dense)
  kDynamicPerToken,  // one scale per token row of x
  kDynamicPerGroup,  // one scale per group_k inputs of each token row (DeepSeek-V3: 128)
};

// Zero points of asymmetric integer schemes. Checkpoints store W = (q - z) * s (AWQ, GPTQ v1's
// z - 1 and v2's z); the loader folds them into W = q * s + offset with offset = -z * s, so
// the kernels add sum_g offset[g] * sum(x over group g) outside their inner loop.
enum class ZeroPoint : uint8_t {
  kNone,    // symmetric: W = value(q) * scale
  kOffset,  // WeightView::zeros holds f32 offset [n][groups_k]
};

struct WeightFormat {
  WeightScheme scheme = WeightScheme::kDense;
  DType dtype = DType::kF32;  // element type of the stored values
  WeightPacking packing = WeightPacking::kNone;
  WeightLayout layout = WeightLayout::kOutIn;
  // Scale blocks: group_k inputs x group_n outputs share one scale. group_k = 0: all of k (per
  // output channel when group_n = 1); group_n = 0: all of n (with group_k = 0, per tensor).
  int32_t group_k = 0;
  int32_t group_n = 0;
  DType scale_dtype = DType::kF32;  // WeightView::scales, one per block, laid out like the weight
  ZeroPoint zero = ZeroPoint::kNone;
  DType zero_dtype = DType::kF32;   // WeightView::zeros (f32 offsets)
  bool act_order = false;           // WeightView::k_perm [k]: internal column j' multiplies x[k_perm[j']]
  ActivationQuant act_quant = ActivationQuant::kNone;
};

inline bool operator==(const WeightFormat& a, const WeightFormat& b) {
  return a.scheme == b.scheme && a.dtype == b.dtype && a.packing == b.packing && a.layout == b.layout &&
         a.group_k == b.group_k && a.group_n == b.group_n && a.scale_dtype == b.scale_dtype && a.zero == b.zero &&
         a.zero_dtype == b.zero_dtype && a.act_order == b.act_order && a.act_quant == b.act_quant;
}
inline bool operator!=(const WeightFormat& a, const WeightFormat& b) { return !(a == b); }

// The dense format of dtype t (f32, f16, bf16): today's checkpoints.
inline WeightFormat dense_format(DType t) {
  WeightFormat f;
  f.dtype = t;
  return f;
}

// A weight in (device) memory: the stored values and the side tensors its format names.
struct WeightView {
  const void* data = nullptr;     // the stored weight, in format.layout / format.packing
  WeightFormat format;
  const void* scales = nullptr;    // format.scale_dtype, one per scale block (null for dense)
  const void* zeros = nullptr;     // format.zero_dtype, one per (row, k group) (null when zero = kNone)
  const int32_t* k_perm = nullptr; // [k] input of each internal column (only when format.act_order)
};

// The NF4 code book (QLoRA appendix E; bitsandbytes' table), the one copy every backend uses.
#define FRUGAL_NF4_CODEBOOK                                                                               \
  -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,       \
      -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,    \
      0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,              \
      0.7229568362236023f, 1.0f
inline constexpr float kNf4Codebook[16] = {FRUGAL_NF4_CODEBOOK};

inline constexpr int64_t kQuantBlock = 32;  // codes per block of a quantized row

inline bool is_quant_scheme(WeightScheme s) {
  return s == WeightScheme::kInt8 || s == WeightScheme::kInt4 || s == WeightScheme::kNf4 || s == WeightScheme::kFp8;
}
// Codes per row: k rounded up to whole 32-code blocks (quantized schemes), k for dense.
inline int64_t weight_k_pad(const WeightFormat& f, int64_t k) {
  return is_quant_scheme(f.scheme) ? (k + kQuantBlock - 1) / kQuantBlock * kQuantBlock : k;
}
// Bytes of one stored row of W.
inline int64_t weight_row_bytes(const WeightFormat& f, int64_t k) {
  return f.packing == WeightPacking::kBlock32Nibbles ? weight_k_pad(f, k) / 2 : dtype_bytes(f.dtype, weight_k_pad(f, k));
}
// Scale groups along k (1 when group_k = 0) and scale rows along n (1 when group_n = 0).
inline int64_t weight_groups_k(const WeightFormat& f, int64_t k) { return f.group_k > 0 ? (k + f.group_k - 1) / f.group_k : 1; }
inline int64_t weight_scale_rows(const WeightFormat& f, int64_t n) { return f.group_n > 0 ? (n + f.group_n - 1) / f.group_n : 1; }
// The quantized format frugal gives a linear of k inputs (dummy weights, `frugal plan`): scheme
// s with scale groups of `group` inputs, halved down to 32 until one divides k, else the whole
// row (0, also when the group is all of k); f32 offsets when `zeros` (int8 / int4); `block_n` rows per scale (fp8; 1 otherwise).
inline WeightFormat quant_format(WeightScheme s, int64_t k, int32_t group, bool zeros, int32_t block_n) {
  WeightFormat f;
  f.scheme = s;
  f.dtype = s == WeightScheme::kInt8 ? DType::kI8 : s == WeightScheme::kFp8 ? DType::kF8E4M3 : DType::kI4;
  f.packing = f.dtype == DType::kI4 ? WeightPacking::kBlock32Nibbles : WeightPacking::kNone;
  int32_t g = group;
  while (g >= static_cast<int32_t>(kQuantBlock) && k % g != 0) g /= 2;
  // A group covering the whole row is per channel (0), as quant::weight_format_of names it.
  f.group_k = g >= static_cast<int32_t>(kQuantBlock) && g % kQuantBlock == 0 && g < k ? g : 0;
  f.group_n = s == WeightScheme::kFp8 ? block_n : 1;
  if (zeros && (s == WeightScheme::kInt8 || s == WeightScheme::kInt4)) f.zero = ZeroPoint::kOffset;
  return f;
}

// Bytes of the weight and its side tensors (scales, offsets, permutation) for an n x k weight.
inline int64_t weight_bytes(const WeightFormat& f, int64_t n, int64_t k) {
  if (!is_quant_scheme(f.scheme)) return dtype_bytes(f.dtype, n * k);
  int64_t b = n * weight_row_bytes(f, k) + 4 * weight_scale_rows(f, n) * weight_groups_k(f, k);
  if (f.zero == ZeroPoint::kOffset) b += 4 * n * weight_groups_k(f, k);
  if (f.act_order) b += 4 * k;
  return b;
}

// The rows n0.. of a weight with k inputs: the same format, its pointers moved to row n0. For a
// quantized weight n0 must be a multiple of weight_row_step (the rows of one scale row, and of
// one tile of kOutInTiles8); a per-tensor scale stays where it is.
inline int64_t weight_row_step(const WeightFormat& f) {
  const int64_t step = is_quant_scheme(f.scheme) && f.group_n > 1 ? f.group_n : 1;
  if (f.layout != WeightLayout::kOutInTiles8) return step;
  int64_t m = 8;  // lcm(8, step) without <numeric>
  while (m % step != 0) m += 8;
  return m;
}
// Whether a weight can be re-laid kOutInTiles8: int4 or int8 codes in input order, whole
// 64-byte quads per row (k % 128 == 0 for int4, k % 64 == 0 for int8) and whole 8-row tiles.
inline bool tiles8_fits(const WeightFormat& f, int64_t n, int64_t k) {
  const bool int4 = f.scheme == WeightScheme::kInt4 && f.packing == WeightPacking::kBlock32Nibbles;
  const bool int8 = f.scheme == WeightScheme::kInt8 && f.packing == WeightPacking::kNone;
  return (int4 || int8) && !f.act_order && f.layout == WeightLayout::kOutIn && n > 0 && n % 8 == 0 && k > 0 &&
         k % (int4 ? 128 : 64) == 0;
}
inline WeightView weight_rows_from(const WeightView& w, int64_t n0, int64_t k) {
  WeightView r = w;
  if (!is_quant_scheme(w.format.scheme)) {
    r.data = static_cast<const uint8_t*>(w.data) + dtype_bytes(w.format.dtype, n0 * k);
    return r;
  }
  const int64_t groups = weight_groups_k(w.format, k);
  r.data = static_cast<const uint8_t*>(w.data) + n0 * weight_row_bytes(w.format, k);
  if (w.format.group_n > 0) r.scales = static_cast<const float*>(w.scales) + n0 / w.format.group_n * groups;
  if (w.zeros) r.zeros = static_cast<const float*>(w.zeros) + n0 * groups;
  return r;
}

inline WeightView dense_weight(const void* data, DType t) {
  WeightView w;
  w.data = data;
  w.format = dense_format(t);
  return w;
}

// The scheme's name ("dense"), or nullptr for a value outside FRUGAL_WEIGHT_SCHEMES.
const char* weight_scheme_name(WeightScheme s);

}  // namespace frugal::ops
