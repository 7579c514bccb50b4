// Quantized linear weights on the host: the format descriptor (QuantSpec, what a checkpoint's
// quantization_config said) and the one internal layout every CPU quant kernel reads
// (QuantWeight), re-laid out at load by checkpoint_layouts.h from AWQ / GPTQ / FP8 / INT8 / NF4.
//
// The weight is logically W[n, k] (torch Linear layout: n outputs, k inputs); y = x @ W^T.
// Internally each row stores k_pad = round_up(k, 32) codes in 32-element blocks; every block
// lies inside one scale group, and
//   W[r, j'] = scale[r / row_block][j' / group] * value(code[r, j']) + offset[r][j' / group]
// where j' is the position after the optional input permutation (act order): column j' of the
// internal weight multiplies x[k_perm[j']]. Codes past k (padding) multiply zero-padded x.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/weight_format.h"
#include "ops/quant/quant_view.h"

namespace frugal::quant {

// The checkpoint format a weight came from (for logs, the memory report and plan).
enum class SourceFormat : uint8_t {
  kInt8Channel,   // compressed-tensors int-quantized, symmetric per output channel
  kAwqGemm,       // AutoAWQ GEMM packing
  kGptq,          // AutoGPTQ / GPTQModel packing (classic or v2 zeros, optional act order)
  kFp8Tensor,     // compressed-tensors float-quantized, one scale
  kFp8Channel,    // compressed-tensors float-quantized, one scale per output channel
  kFp8Block,      // DeepSeek-V3 weight_scale_inv per block_n x block_k
  kNf4,           // bitsandbytes NF4, absmax per 64 consecutive elements
};
const char* source_format_name(SourceFormat f);

// The plain description of a format, as the checkpoint stated it.
struct QuantSpec {
  SourceFormat source = SourceFormat::kInt8Channel;
  int bits = 8;
  int64_t group_size = 0;   // inputs per scale (k for per-channel); FP8 block: block_k
  bool symmetric = true;    // no zero points
  bool act_order = false;   // GPTQ desc_act: rows of W grouped by g_idx, not by position
  DType scale_dtype = DType::kF32;  // as stored
  int64_t block_n = 1;      // FP8: outputs per scale (1 per-channel, n per-tensor, 128 block)
};

struct QuantWeight {
  QuantSpec spec;
  CodeKind kind = CodeKind::kQ8;
  int64_t n = 0, k = 0, k_pad = 0, group = 0, n_groups = 0, row_block = 1;
  std::vector<uint8_t> q;
  std::vector<float> scale;
  std::vector<float> offset;   // empty when symmetric
  std::vector<float> lut;      // kQ4 only, 16 entries
  std::vector<int32_t> k_perm; // empty unless act order
  std::string name;            // the checkpoint tensor prefix, for error messages

  int64_t ld_q() const { return kind == CodeKind::kQ4 ? k_pad / 2 : k_pad; }
  QuantWeightView view() const;
  // Bytes the weight occupies in memory (codes, scales, offsets, permutation; the 4-bit code
  // table is shared): ops::weight_bytes of its format.
  int64_t bytes() const;
};

// Allocates codes/scales for an n x k weight of `kind` with the given grouping; codes are
// zero-filled (padding stays zero). Used by the converters.
QuantWeight make_quant_weight(CodeKind kind, int64_t n, int64_t k, int64_t group,
                              int64_t row_block);

// Sets code (r, j) (j in internal, permuted order) of a weight made by make_quant_weight.
void set_code(QuantWeight& w, int64_t r, int64_t j, int code);
int get_code(const QuantWeight& w, int64_t r, int64_t j);

// The dequantized weight W[n][k] in the checkpoint's ORIGINAL input order, computed in double
// and rounded to float (the oracle layout for tests and the fallback for backends without
// quant kernels).
std::vector<float> dequantize(const QuantWeight& w);

// The 16 NF4 code values (QLoRA appendix E; bitsandbytes' table): ops::kNf4Codebook.
extern const float kNf4Table[16];

// The ops::WeightFormat of a QuantWeight (weight_format.h: int8, int4, nf4 or fp8 over this
// layout). The format is the contract between loader and kernels; QuantWeight is only the host
// owner of the bytes. Error for a weight no scheme describes (an NF4 quant_map other than the
// standard code book, a 4-bit code table that is neither identity nor NF4).
Result<ops::WeightFormat> weight_format_of(const QuantWeight& w);
// The view of w in host memory (codes, scales, offsets, k_perm); w.name names it in errors.
Result<ops::WeightView> weight_view_of(const QuantWeight& w);
// The kernels' view of a quantized WeightView of an n x k weight (the inverse of weight_view_of).
QuantWeightView kernel_view(const ops::WeightView& w, int64_t n, int64_t k);

}  // namespace frugal::quant
