// Device side of the quantized KV cache elements (ops/kv_quant.h is the one definition; this is
// its port for the CUDA kernels, bit-exact with it):
//   fp8 e4m3: stored = e4m3(x / scale), round to nearest even, saturating at +-448; read back as
//             e4m3 * scale (one scalar scale per layer for K and for V).
//   int8:     per (token, kv head) scale = max|x| / 127, stored = clamp(rint(x / scale), +-127);
//             read back as q * scale. An all-zero row has scale 0 and stores zeros.
// Also the vector loaders the attention kernels use: 8 cache elements (16 bytes of bf16, 8 of
// fp8/int8) to 8 floats, without the scales (the kernels apply those per key or per layer).
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "core/dtype.h"
#include "ops/params.h"

namespace frugal::cuda {

// Element type of a cache as a template parameter of the attention kernels.
enum class KvElem : int { kBF16 = 0, kFp8 = 1, kInt8 = 2 };

template <KvElem E>
struct KvElemTraits;
template <>
struct KvElemTraits<KvElem::kBF16> {
  using Vec8 = uint4;  // 8 elements
  static constexpr int kBytes = 2;
};
template <>
struct KvElemTraits<KvElem::kFp8> {
  using Vec8 = uint2;
  static constexpr int kBytes = 1;
};
template <>
struct KvElemTraits<KvElem::kInt8> {
  using Vec8 = uint2;
  static constexpr int kBytes = 1;
};

// f32 -> e4m3 exactly as ops::kv_f32_to_e4m3 (bias 7, no infinities, 0x7f NaN, RNE, saturating).
__device__ __forceinline__ uint8_t kv_f32_to_e4m3_dev(float f) {
  if (isnan(f)) return 0x7f;
  const uint8_t sign = signbit(f) ? 0x80 : 0;
  const float a = fabsf(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) return sign | static_cast<uint8_t>(rintf(a * 512.0f));  // subnormal steps of 2^-9
  uint32_t u = __float_as_uint(a);
  u += 0x7ffffu + ((u >> 20) & 1u);  // round the mantissa to 3 bits, ties to even
  const uint32_t e = (u >> 23) - 127 + 7;
  return sign | static_cast<uint8_t>(e << 3 | ((u >> 20) & 7u));
}

// fp8: x's e4m3 code under the layer scale s.
__device__ __forceinline__ uint8_t kv_fp8_code_dev(float x, float s) { return kv_f32_to_e4m3_dev(__fdiv_rn(x, s)); }

// int8 as ops::kv_int8_scale / kv_int8_quantize: the scale of a row whose max |x| is amax, and x's
// code under it (0 for an all-zero row).
__device__ __forceinline__ float kv_int8_scale_dev(float amax) { return __fdiv_rn(amax, 127.0f); }
__device__ __forceinline__ int8_t kv_int8_code_dev(float x, float scale) {
  return scale != 0.f ? static_cast<int8_t>(fminf(fmaxf(rintf(__fdiv_rn(x, scale)), -127.f), 127.f)) : int8_t{0};
}

__device__ __forceinline__ float kv_e4m3_to_f32_dev(uint8_t v) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(v), __NV_E4M3);
  return __half2float(__half(h));
}

// Two e4m3 codes (low byte first) to two floats; e4m3 values are exact in half.
__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v), __NV_E4M3);
  return __half22float2(__half2(h));
}

template <KvElem E>
__device__ __forceinline__ void kv8_to_float(typename KvElemTraits<E>::Vec8 v, float* f) {
  if constexpr (E == KvElem::kBF16) {
    unpack_bf16x8(v, f);
  } else if constexpr (E == KvElem::kFp8) {
    const uint32_t w[2] = {v.x, v.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 a = fp8x2_to_float2(static_cast<uint16_t>(w[i] & 0xffffu));
      const float2 b = fp8x2_to_float2(static_cast<uint16_t>(w[i] >> 16));
      f[4 * i] = a.x;
      f[4 * i + 1] = a.y;
      f[4 * i + 2] = b.x;
      f[4 * i + 3] = b.y;
    }
  } else {
    const uint32_t w[2] = {v.x, v.y};
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int b = 0; b < 4; ++b) f[4 * i + b] = static_cast<float>(static_cast<int8_t>((w[i] >> (8 * b)) & 0xffu));
  }
}

// Elements i, i + 1 (i even) of a cache as kv_write stores them; `scale` is the row's int8 scale
// or the layer's fp8 scale. Values are already rounded to the activation dtype (the fused
// writers, rope_kv_write.cu and mla_prologue.cu, keep them in registers).
__device__ __forceinline__ void store_cache2(DType t, void* cache, int64_t i, float2 v, float scale) {
  switch (t) {
    case DType::kBF16:
      *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(cache) + i) = __floats2bfloat162_rn(v.x, v.y);
      return;
    case DType::kF8E4M3:
      *reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(cache) + i) =
          static_cast<uint16_t>(kv_fp8_code_dev(v.x, scale) | kv_fp8_code_dev(v.y, scale) << 8);
      return;
    case DType::kI8:
      *reinterpret_cast<uint16_t*>(static_cast<int8_t*>(cache) + i) = static_cast<uint16_t>(
          static_cast<uint8_t>(kv_int8_code_dev(v.x, scale)) | static_cast<uint8_t>(kv_int8_code_dev(v.y, scale)) << 8);
      return;
    default:
      store_f(t, cache, i, v.x);
      store_f(t, cache, i + 1, v.y);
      return;
  }
}

// One cache element as a float (scales applied): the generic kernel's reader.
__device__ __forceinline__ float kv_load_scaled(const ops::KvCacheLayer& c, bool value, int64_t slot, int h, int e) {
  const void* cache = value ? c.v_cache : c.k_cache;
  const int64_t i = (slot * c.n_head_kv + h) * c.head_dim + e;
  switch (c.cache_dtype) {
    case DType::kI8:
      return static_cast<float>(static_cast<const int8_t*>(cache)[i]) * (value ? c.v_scales : c.k_scales)[slot * c.n_head_kv + h];
    case DType::kF8E4M3:
      return kv_e4m3_to_f32_dev(static_cast<const uint8_t*>(cache)[i]) * (value ? c.v_scale : c.k_scale);
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(cache)[i]);
    case DType::kF16: return __half2float(static_cast<const __half*>(cache)[i]);
    default: return static_cast<const float*>(cache)[i];
  }
}

}  // namespace frugal::cuda
