// Weight formats as data: how a matmul weight W [n, k] (n outputs, k inputs) is stored, and
// the view of one in device memory. A format is a value of WeightFormat; each backend
// dispatches on it explicitly, once per call, and refuses one it has no kernels for with an
// error naming it (never a silent fallback). See docs/weight_formats.md.
//
// Adding a format (issue 16: INT8 per channel, INT4 AWQ/GPTQ, FP8 E4M3, NF4) is one line in
// FRUGAL_WEIGHT_SCHEMES plus its checks in weight_format.cpp, its dequantization in
// ops/reference.cpp and its kernels; the fields below already describe them:
//   scheme   dtype    packing        layout  group_k group_n scales      zero             act_order
//   dense    bf16     none           out_in  -       -       -           none             no
//   int8     i8       none           out_in  0       1       [n]         none             no
//   int4 AWQ i4       int32_along_n  in_out  128     1       [k/g, n]    stored           no
//   int4 GPTQ i4      int32_along_k  in_out  128     1       [k/g, n]    stored_minus_one yes (g_idx [k])
//   fp8 tensor f8e4m3 none           out_in  0       0       [1]         none             no
//   fp8 block f8e4m3  none           out_in  128     128     [n/128, k/128] none          no
//                                                                (W8A8: act_quant per token or per 128-group)
//   nf4      i4       nibbles_along_k out_in 64      1       [n, k/64]   none             no
//
// No STL here: included by .cu files (through ops/params.h). CUDA code is C++17.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace frugal::ops {

// X(Name, "name"): every weight scheme, once. Only dense has kernels today.
#define FRUGAL_WEIGHT_SCHEMES(X) \
  X(Dense, "dense") /* W[o, j] = data[o * k + j] in dtype (f32, f16 or bf16); no scales */

enum class WeightScheme : uint8_t {
#define FRUGAL_WEIGHT_SCHEME_ENUM_(Name, str) k##Name,
  FRUGAL_WEIGHT_SCHEMES(FRUGAL_WEIGHT_SCHEME_ENUM_)
#undef FRUGAL_WEIGHT_SCHEME_ENUM_
};

// How quantized values share storage words.
enum class WeightPacking : uint8_t {
  kNone,           // one value per dtype element
  kInt32AlongN,    // 8 4-bit values per int32, consecutive outputs (AutoAWQ GEMM, order 0 2 4 6 1 3 5 7)
  kInt32AlongK,    // 8 4-bit values per int32, consecutive inputs, low nibble first (GPTQ)
  kNibblesAlongK,  // 2 4-bit values per byte, consecutive inputs, high nibble first (bitsandbytes NF4)
};

// Which axis is contiguous in the stored weight.
enum class WeightLayout : uint8_t {
  kOutIn,  // [n, k] row-major: HF nn.Linear `weight`
  kInOut,  // [k, n] row-major: AutoAWQ / GPTQ `qweight`
};

// Activations quantized on the fly for W8A8 kernels (FP8 E4M3 with dynamic scales).
enum class ActivationQuant : uint8_t {
  kNone,             // weight-only: x stays in the activation dtype (W8A16, W4A16, dense)
  kDynamicPerToken,  // one scale per token row of x
  kDynamicPerGroup,  // one scale per group_k inputs of each token row (DeepSeek-V3: 128)
};

// Zero points of asymmetric integer schemes: W = (q - z) * scale.
enum class ZeroPoint : uint8_t {
  kNone,            // symmetric: W = q * scale (q signed, or offset by half the range)
  kStored,          // z as stored (AutoAWQ, GPTQ v2)
  kStoredMinusOne,  // classic GPTQ: the stored value is z - 1
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
  DType zero_dtype = DType::kI4;    // WeightView::zeros; i4 zeros are 8 per int32 along n (AWQ and GPTQ qzeros)
  bool act_order = false;           // WeightView::g_idx [k] gives each input's group (GPTQ desc_act)
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
  const void* scales = nullptr;   // format.scale_dtype, one per scale block (null for dense)
  const void* zeros = nullptr;    // format.zero_dtype, one per scale block (null when zero = kNone)
  const int32_t* g_idx = nullptr; // [k] group of each input (only when format.act_order)
};

inline WeightView dense_weight(const void* data, DType t) {
  WeightView w;
  w.data = data;
  w.format = dense_format(t);
  return w;
}

// The scheme's name ("dense"), or nullptr for a value outside FRUGAL_WEIGHT_SCHEMES.
const char* weight_scheme_name(WeightScheme s);

}  // namespace frugal::ops
