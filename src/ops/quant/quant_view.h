// The POD view of a quantized weight that the per-ISA kernels read (no STL: see
// backend/cpu/kernels.h for why nothing with inline library code crosses into those units).
// The layout itself is described in quant_weight.h.
#pragma once

#include <cstdint>

namespace frugal::quant {

inline constexpr int64_t kBlock = 32;  // codes per internal block (one 4-bit block = 16 bytes)

// How the codes of one row are stored.
enum class CodeKind : uint8_t {
  kQ8,  // int8 [n][k_pad]; value(c) = c
  kQ4,  // uint8 [n][k_pad / 2]; block b of a row is 16 bytes, byte i = code i | code (i+16) << 4;
        // value(c) = lut[c]
  kF8,  // uint8 [n][k_pad] FP8 E4M3 bit patterns; value(c) = the e4m3 number
};

// POD view of a QuantWeight for the kernels (nothing with a destructor crosses into the
// per-ISA translation units; see backend/cpu/kernels.h).
struct QuantWeightView {
  CodeKind kind;
  int64_t n;
  int64_t k;
  int64_t k_pad;        // round_up(k, kBlock)
  int64_t ld_q;         // bytes per row of codes
  int64_t group;        // code positions per scale along k (a multiple of kBlock, or >= k)
  int64_t n_groups;     // scales per scale-row = ceil(k / group)
  int64_t row_block;    // rows sharing one scale-row (1, or FP8 block_n / n)
  const uint8_t* q;     // codes, [n][ld_q]
  const float* scale;   // [ceil(n / row_block)][n_groups]
  const float* offset;  // [n][n_groups] or null (symmetric); only with row_block == 1
  const float* lut;     // kQ4: [16] code values; else null
  bool lut_is_identity; // kQ4 with lut[c] == c: kernels convert codes to float directly
  const int32_t* k_perm;  // [k] or null: internal column j multiplies x[k_perm[j]]
};

}  // namespace frugal::quant
