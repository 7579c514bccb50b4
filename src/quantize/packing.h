// Checkpoint layouts: packing a quantized weight into the tensors each tool writes, reading
// them back (unpacking and dequantizing), and the quantization_config that names the layout.
//
//   GPTQ (AutoGPTQ / GPTQModel QuantLinear), for prefix P:
//     P.qweight I32 [in*bits/32, out]   32/bits codes per int32 along IN, lowest bits first
//     P.qzeros  I32 [n_groups, out*bits/32] zero points along OUT, lowest bits first; the
//               "gptq" (v1) checkpoint format stores zero - 1, "gptq_v2" the zero itself
//     P.scales  F16 [n_groups, out]
//     P.g_idx   I32 [in]                group of each input row (act order: a permutation's)
//   AutoAWQ GEMM: P.qweight I32 [in, out/8], P.qzeros I32 [n_groups, out/8] (nibble i of an
//     int32 holds column 8c + {0,2,4,6,1,3,5,7}[i]), P.scales F16 [n_groups, out]
//   compressed-tensors: P.weight I8|F8_E4M3 [out, in], P.weight_scale BF16 [out, 1] or [1]
//   DeepSeek-V3 fp8: P.weight F8_E4M3 [out, in], P.weight_scale_inv F32 [ceil(out/128), ceil(in/128)]
//   bitsandbytes nf4: P.weight U8 [out*in/2, 1] (earlier element in the HIGH nibble),
//     P.weight.absmax F32 [out*in/block], P.weight.quant_map F32 [16],
//     P.weight.quant_state.bitsandbytes__nf4 U8 [n] (JSON {quant_type, blocksize, dtype, shape})
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"
#include "model/safetensors.h"
#include "quantize/formats.h"
#include "quantize/rtn.h"

namespace frugal::quantize {

// One tensor to write, owning its bytes. `name` is relative to the linear's prefix.
struct OutTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// The layout parameters a reader needs (parsed from, and written to, quantization_config).
struct StoredLayout {
  Layout layout = Layout::kGptq;
  int32_t bits = 4;
  int64_t group = 128;      // -1: per channel (GPTQ); nf4 blocksize
  bool gptq_v2 = false;     // checkpoint_format "gptq_v2"
  bool sym = false;
  bool desc_act = false;
  bool static_groups = false;
  Fp8Scale fp8 = Fp8Scale::kBlock;
};

// Packers. Shapes that the layout cannot hold are errors naming the tensor.
Result<std::vector<OutTensor>> pack_gptq(const std::string& tensor, const IntQuant& q, bool v2);
Result<std::vector<OutTensor>> pack_awq(const std::string& tensor, const IntQuant& q);
std::vector<OutTensor> pack_ct_int8(const IntQuant& q);
std::vector<OutTensor> pack_fp8(const Fp8Quant& q);  // compressed-tensors or DeepSeek block names
std::vector<OutTensor> pack_nf4(const Nf4Quant& q, const char* compute_dtype);

// Finds a stored tensor by name relative to the linear's prefix; nullptr if absent.
using TensorFinder = std::function<const model::TensorEntry*(const std::string& rel)>;

// Unpackers back to codes/scales (errors name the tensor and field).
Result<IntQuant> unpack_gptq(const std::string& prefix, const TensorFinder& find, const StoredLayout& l);
Result<IntQuant> unpack_awq(const std::string& prefix, const TensorFinder& find, const StoredLayout& l);
// Dequantized f32 [out, in] of the linear at `prefix` in layout l (sets out/in).
Result<std::vector<float>> read_quantized_linear(const std::string& prefix, const TensorFinder& find,
                                                 const StoredLayout& l, int64_t* out, int64_t* in);

// quantization_config <-> StoredLayout. `kept` lists modules left unquantized (by prefix).
// lm_head: the checkpoint stores lm_head quantized (QuantizeOptions::lm_head).
// lm_head_bits: GPTQ, the lm_head's own bits (a "dynamic" rule; 0: the layout's).
nlohmann::json make_quantization_config(const StoredLayout& l, Method m, const std::vector<std::string>& kept,
                                        bool lm_head = false, int lm_head_bits = 0);
Result<StoredLayout> parse_quantization_config(const nlohmann::json& qc, const std::string& source);

// The StoredLayout the options write (after choose_layout).
StoredLayout stored_layout_for(const QuantizeOptions& o, Layout l);

}  // namespace frugal::quantize
