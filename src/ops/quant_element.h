// One element of a quantized weight (ops/weight_format.h: int8, int4, nf4, fp8 over the internal
// layout), for the reference backend and the CUDA correctness kernel (host and device code; no
// STL). The fast CPU kernels (backend/cpu/kernels_quant*) read the same layout by blocks.
#pragma once

#include <cstdint>

#include "ops/weight_format.h"

#if defined(__CUDACC__)
#define FRUGAL_QUANT_HD __host__ __device__ __forceinline__
#else
#define FRUGAL_QUANT_HD inline
#endif

namespace frugal::ops {

// The E4M3 number of an FP8 byte (bias 7, no infinities; 0x7f / 0xff are NaN).
FRUGAL_QUANT_HD float e4m3_value(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
  float v;
  if (exp == 0) {
    v = static_cast<float>(man) * (1.0f / 512.0f);  // subnormal: man / 8 * 2^-6
  } else if (exp == 15 && man == 7) {
    v = __builtin_nanf("");
  } else {
    v = (1.0f + static_cast<float>(man) * 0.125f);
    int e = exp - 7;
    for (; e > 0; --e) v *= 2.0f;
    for (; e < 0; ++e) v *= 0.5f;
  }
  return sign ? -v : v;
}

// The geometry of a quantized n x k weight, computed once per matmul.
struct QuantGeometry {
  int64_t row_bytes;  // bytes per stored row
  int64_t group_k;    // code positions per scale group (k_pad when the format says 0)
  int64_t groups_k;   // scale groups along k
  int64_t group_n;    // rows per scale row (n when the format says 0)
};

FRUGAL_QUANT_HD QuantGeometry quant_geometry(const WeightFormat& f, int64_t n, int64_t k) {
  const int64_t k_pad = (k + kQuantBlock - 1) / kQuantBlock * kQuantBlock;
  QuantGeometry g;
  g.row_bytes = f.packing == WeightPacking::kBlock32Nibbles ? k_pad / 2 : k_pad;
  g.group_k = f.group_k > 0 ? f.group_k : (k_pad > 0 ? k_pad : 1);
  g.groups_k = f.group_k > 0 ? (k + f.group_k - 1) / f.group_k : 1;
  g.group_n = f.group_n > 0 ? f.group_n : (n > 0 ? n : 1);
  return g;
}

// Where byte b of row o's codes is stored: o row_bytes + b, or in kOutInTiles8 (weight_format.h)
// at its place in the row's tile.
FRUGAL_QUANT_HD int64_t quant_code_byte(const WeightFormat& f, const QuantGeometry& g, int64_t o, int64_t b) {
  if (f.layout == WeightLayout::kOutInTiles8) return (o / 8) * 8 * g.row_bytes + (b / 64) * 512 + (o % 8) * 64 + b % 64;
  return o * g.row_bytes + b;
}

// W[o, j'] in the internal column order (j' < k; see WeightView::k_perm), as a float.
FRUGAL_QUANT_HD float quant_weight_element(const WeightView& w, const QuantGeometry& g, int64_t o, int64_t jp) {
  const uint8_t* codes = static_cast<const uint8_t*>(w.data);
  const uint8_t* row = codes + o * g.row_bytes;
  float v = 0.0f;
  if (w.format.packing == WeightPacking::kBlock32Nibbles) {
    const uint8_t byte = codes[quant_code_byte(w.format, g, o, (jp / kQuantBlock) * (kQuantBlock / 2) + (jp % 16))];
    const int code = (jp % kQuantBlock) < 16 ? (byte & 0xf) : (byte >> 4);
    if (w.format.scheme == WeightScheme::kNf4) {
      constexpr float kBook[16] = {FRUGAL_NF4_CODEBOOK};
      v = kBook[code];
    } else {
      v = static_cast<float>(code);
    }
  } else if (w.format.scheme == WeightScheme::kFp8) {
    v = e4m3_value(row[jp]);
  } else {
    v = static_cast<float>(static_cast<int8_t>(codes[quant_code_byte(w.format, g, o, jp)]));
  }
  const int64_t gk = jp / g.group_k;
  float x = static_cast<const float*>(w.scales)[(o / g.group_n) * g.groups_k + gk] * v;
  if (w.format.zero == ZeroPoint::kOffset) x += static_cast<const float*>(w.zeros)[o * g.groups_k + gk];
  return x;
}

}  // namespace frugal::ops
