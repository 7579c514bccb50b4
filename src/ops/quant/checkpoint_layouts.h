// Converters from quantized-checkpoint tensor layouts, as the tools publish them, to QuantWeight.
// Each takes the raw tensors of ONE linear (null = absent in the file) and validates every shape,
// dtype and field against the format before touching data; errors name the tensor and the field.
//
// Layouts (n = out_features, k = in_features; "int32 along X" = 32/bits codes per int32 word,
// the first code in the lowest bits unless said otherwise):
//  - AutoAWQ "GEMM" (WQLinear_GEMM; quant_method awq, version gemm):
//      qweight I32 [k, n/8]   codes of 8 consecutive OUTPUTS per word, interleaved: nibble i holds
//                             output 8c + {0,2,4,6,1,3,5,7}[i]
//      qzeros  I32 [k/g, n/8] zero points, same packing, stored as is
//      scales  F16 [k/g, n]   W[o, i] = (q - z) * s of group i / g
//  - GPTQ (AutoGPTQ / GPTQModel QuantLinear; quant_method gptq):
//      qweight I32 [k*bits/32, n]  codes of consecutive INPUTS per word, in order
//      qzeros  I32 [k/g, n*bits/32] zero points of consecutive outputs per word, in order;
//                             checkpoint_format "gptq" stores zero - 1, "gptq_v2" stores zero
//      scales  F16 [k/g, n]
//      g_idx   I32 [k]        group of each input (act order / desc_act: any permutation of
//                             equal-sized groups); absent means i / g
//  - compressed-tensors (llm-compressor) int-quantized / float-quantized, symmetric:
//      weight I8 or F8_E4M3 [n, k], weight_scale [n, 1] (channel) or [1] / [] (tensor);
//      W = weight * weight_scale
//  - DeepSeek-V3 fine-grained FP8 (quant_method fp8, weight_block_size [bn, bk]):
//      weight F8_E4M3 [n, k], weight_scale_inv F32 [ceil(n/bn), ceil(k/bk)];
//      W = weight * weight_scale_inv of the block (the name notwithstanding, it multiplies)
//  - bitsandbytes NF4 as transformers saves Linear4bit (quant_storage uint8, no double quant):
//      weight U8 [ceil(n*k/2), 1]  row-major flattened codes, two per byte, the EARLIER in the
//                             HIGH nibble; weight.absmax F32 [n*k/64]; weight.quant_map F32 [16];
//      W = quant_map[code] * absmax[flat / 64]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/quant/quant_weight.h"

namespace frugal::quant {

// One tensor as read from a safetensors file (not owned).
struct RawTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

struct AwqConfig {
  std::string prefix;       // "model.layers.0.self_attn.q_proj", for messages
  int bits = 4;
  int64_t group_size = 128; // -1: per channel (one group of k)
  bool zero_point = true;
};
Result<QuantWeight> from_awq_gemm(const AwqConfig& c, const RawTensor* qweight,
                                  const RawTensor* qzeros, const RawTensor* scales);

struct GptqConfig {
  std::string prefix;
  int bits = 4;             // 4 or 8
  int64_t group_size = 128; // -1: per channel
  bool sym = true;
  bool desc_act = false;
  bool zeros_v2 = false;    // checkpoint_format gptq_v2 (zeros stored as is)
};
Result<QuantWeight> from_gptq(const GptqConfig& c, const RawTensor* qweight,
                              const RawTensor* qzeros, const RawTensor* scales,
                              const RawTensor* g_idx);

enum class Fp8Scaling : uint8_t { kTensor, kChannel, kBlock };
struct Fp8Config {
  std::string prefix;
  Fp8Scaling scaling = Fp8Scaling::kChannel;
  int64_t block_n = 128, block_k = 128;  // kBlock only
};
// `scale` is weight_scale (tensor/channel) or weight_scale_inv (block).
Result<QuantWeight> from_fp8(const Fp8Config& c, const RawTensor* weight, const RawTensor* scale);

// compressed-tensors int8 symmetric per output channel (W8A16).
Result<QuantWeight> from_int8_channel(const std::string& prefix, const RawTensor* weight,
                                      const RawTensor* weight_scale);

struct Nf4Config {
  std::string prefix;
  int64_t n = 0, k = 0;     // from the quant_state's "shape"
  int64_t blocksize = 64;   // from the quant_state's "blocksize"
};
// quant_map may be null (the standard NF4 table is used).
Result<QuantWeight> from_nf4(const Nf4Config& c, const RawTensor* weight, const RawTensor* absmax,
                             const RawTensor* quant_map);

}  // namespace frugal::quant
