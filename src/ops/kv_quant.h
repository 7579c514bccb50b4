// Quantized KV cache elements: the one definition of how a K or V row is stored in and read from
// an fp8 e4m3 or int8 cache, shared by the reference, the CPU kernels and the harness (the bytes
// in the arena are laid out by kv/kv_layout.h; see docs/kv_cache.md, "KV precision").
//
//   fp8 e4m3: stored = e4m3(x / scale) (round to nearest even, saturating at +-448), read back as
//             e4m3_value * scale, with one scalar scale per layer for K and one for V
//             (ops::KvCacheLayer::k_scale / v_scale; 1.0 unless calibrated, as in vLLM).
//   int8:     symmetric per (token, kv head): scale = max|x| / 127 over the head's row,
//             stored = clamp(round_half_even(x / scale), -127, 127), read back as q * scale; the
//             scale is stored as an f32 next to the row (KvCacheLayer::k_scales / v_scales).
//             An all-zero row has scale 0 and reads back as zeros.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace frugal::ops {

inline constexpr float kKvInt8Max = 127.0f;
inline constexpr float kKvFp8Max = 448.0f;

// True for the KV cache dtypes that are stored quantized (fp8 e4m3, int8).
inline bool is_quantized_kv_dtype(DType t) { return t == DType::kF8E4M3 || t == DType::kI8; }

// f32 -> e4m3 (OCP FP8 E4M3: bias 7, no infinities, 0x7f/0xff NaN), round to nearest even,
// saturating to +-448. Bit-exact with core's f32_to_f8e4m3, without its table scan.
inline uint8_t kv_f32_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= kKvFp8Max) return sign | 0x7e;
  if (a < 0.015625f) {  // below the smallest normal 2^-6: subnormal steps of 2^-9
    const float m = std::nearbyint(a * 512.0f);  // 0..8 (8 is the smallest normal, code 0x08)
    return sign | static_cast<uint8_t>(m);
  }
  uint32_t u;
  std::memcpy(&u, &a, 4);
  u += 0x7ffffu + ((u >> 20) & 1u);  // round the 23-bit mantissa to 3 bits, ties to even
  const uint32_t e = (u >> 23) - 127 + 7;
  return sign | static_cast<uint8_t>(e << 3 | ((u >> 20) & 7u));
}

inline float kv_e4m3_to_f32(uint8_t v) {
  const uint32_t sign = v & 0x80u, e = (v >> 3) & 0xfu, m = v & 7u;
  if (e == 0xf && m == 7) return NAN;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, static_cast<int>(e) - 7);
  return sign ? -mag : mag;
}

// int8 scale of a row whose largest magnitude is amax.
inline float kv_int8_scale(float amax) { return amax / kKvInt8Max; }

inline int8_t kv_int8_quantize(float x, float scale) {
  if (scale == 0.0f) return 0;
  float q = std::nearbyint(x / scale);
  q = q > kKvInt8Max ? kKvInt8Max : (q < -kKvInt8Max ? -kKvInt8Max : q);
  return static_cast<int8_t>(q);
}

}  // namespace frugal::ops
