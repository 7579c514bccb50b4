// Round-to-nearest quantization of one [out, in] weight into each target representation, and
// the exact dequantization every loader computes from it. GPTQ and AWQ build on the same
// per-group parameter rules (find_group_params), so a weight they produce dequantizes the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "quantize/formats.h"

namespace frugal::quantize {

// Integer schemes, each as the tool that defines its layout computes scales and zeros:
//   kGptqSym   s = 2 amax / maxq, zero = (maxq + 1) / 2              (GPTQ, sym)
//   kGptqAsym  s = (max(x,0) - min(x,0)) / maxq, zero = round(-min/s) clamped to [1, maxq]
//              (GPTQ asym; v1 checkpoints store zero - 1 so zero 0 is not storable)
//   kAwq       s = max(max - min, 1e-5) / 15, zero = clamp(-round(min/s), 0, 15)   (AutoAWQ)
//   kCtInt8    s = amax / 127, zero 0, codes in [-128, 127]           (compressed-tensors)
// Scales are rounded to the stored dtype (f16, or bf16 for kCtInt8) before any code is computed,
// so dequantizing the stored tensors gives exactly the weights the quantizer used.
enum class IntScheme { kGptqSym, kGptqAsym, kAwq, kCtInt8 };

struct IntSpec {
  IntScheme scheme = IntScheme::kGptqAsym;
  int32_t bits = 4;
  int64_t group = 128;  // input columns per group; -1: the whole row
};

struct GroupParams {
  float scale = 1;
  int32_t zero = 0;
};

// Parameters for the n values x[0], x[stride], ... of one group.
GroupParams find_group_params(const IntSpec& spec, const float* x, int64_t n, int64_t stride);
int32_t spec_qmin(const IntSpec& spec);
int32_t spec_qmax(const IntSpec& spec);

inline int32_t quantize_code(float w, const GroupParams& p, int32_t qmin, int32_t qmax) {
  float r = __builtin_nearbyintf(w / p.scale) + static_cast<float>(p.zero);
  if (r < static_cast<float>(qmin)) r = static_cast<float>(qmin);
  if (r > static_cast<float>(qmax)) r = static_cast<float>(qmax);
  return static_cast<int32_t>(r);
}
inline float dequantize_code(int32_t q, const GroupParams& p) {
  return static_cast<float>(q - p.zero) * p.scale;
}

// An integer-quantized [out, in] weight before packing.
struct IntQuant {
  IntSpec spec;
  int64_t out = 0;
  int64_t in = 0;
  int64_t group = 0;             // resolved group size (in for per channel)
  std::vector<int32_t> q;        // [out, in] codes in [qmin, qmax]
  std::vector<float> scale;      // [n_groups, out]
  std::vector<int32_t> zero;     // [n_groups, out]
  std::vector<int32_t> g_idx;    // [in] group of each input column (act order permutes it)

  int64_t n_groups() const { return in / group; }
  std::vector<float> dequantize() const;  // [out, in]
};

// Checks that `group` divides `in` (errors name the tensor) and returns the resolved size.
Result<int64_t> resolve_group(const std::string& tensor, int64_t in, int64_t group);

// RTN of w [out, in] (row-major, f32).
Result<IntQuant> rtn_int(const std::string& tensor, const float* w, int64_t out, int64_t in, const IntSpec& spec);

// FP8 E4M3 (saturating, round to nearest even) with absmax scales: per tensor (BF16 [1]),
// per output channel (BF16 [out, 1]) or per 128x128 block (F32 [ceil(out/128), ceil(in/128)]).
struct Fp8Quant {
  Fp8Scale mode = Fp8Scale::kBlock;
  int64_t out = 0;
  int64_t in = 0;
  std::vector<uint8_t> q;      // [out, in] e4m3 bytes
  std::vector<float> scale;    // see above (bf16-representable for tensor/channel)
  std::vector<float> dequantize() const;
};
Fp8Quant rtn_fp8(const float* w, int64_t out, int64_t in, Fp8Scale mode);
uint8_t fp8_e4m3_encode(float f);  // saturates at +-448, NaN -> 0x7f

// NF4 (bitsandbytes): codes index kNf4Table, absmax per run of `block` row-major elements.
extern const float kNf4Table[16];
struct Nf4Quant {
  int64_t out = 0;
  int64_t in = 0;
  int64_t block = 64;
  std::vector<uint8_t> idx;     // [out * in] codes 0..15
  std::vector<float> absmax;    // [out * in / block]
  std::vector<float> dequantize() const;
};
Result<Nf4Quant> rtn_nf4(const std::string& tensor, const float* w, int64_t out, int64_t in, int64_t block);

// Rounds to the nearest f16 / bf16 value (scales are stored in those dtypes).
float round_f16(float x);
float round_bf16(float x);

}  // namespace frugal::quantize
