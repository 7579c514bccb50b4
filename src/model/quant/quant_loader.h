// Reading a quantized linear from a checkpoint directory: HF config.json's quantization_config
// parsed into QuantConfig (as AutoAWQ, GPTQModel/AutoGPTQ, llm-compressor (compressed-tensors),
// DeepSeek-V3 / transformers fine-grained FP8 and bitsandbytes write it), then the tensors of
// one linear prefix ("model.layers.0.self_attn.q_proj") found in a SafetensorsSet and converted
// to quant::QuantWeight by checkpoint_layouts.h.
//
// Not yet wired into model/weights (that follows the Linear weight-format descriptor); the
// router rule (MoE `gate` never quantized) and lm_head/embeddings staying precise are the
// loader's to enforce when it calls is_quantized_linear.
#pragma once

#include <cstdint>

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/safetensors.h"
#include "ops/quant/quant_weight.h"

namespace frugal::model {

enum class QuantMethod : uint8_t { kAwq, kGptq, kFp8Block, kCompressedTensors, kBnbNf4 };

struct QuantConfig {
  QuantMethod method = QuantMethod::kAwq;
  int bits = 4;
  int64_t group_size = 128;          // -1 = per channel
  bool zero_point = true;            // awq
  bool sym = true;                   // gptq
  bool desc_act = false;             // gptq
  bool zeros_v2 = false;             // gptq checkpoint_format gptq_v2
  bool ct_float = true;              // compressed-tensors: weights type float (fp8) or int
  bool ct_per_tensor = false;        // compressed-tensors: strategy tensor (else channel)
  int64_t block_n = 128, block_k = 128;  // fp8 weight_block_size
  std::vector<std::string> ignore;   // modules left unquantized (names or suffixes)
};

// Parses config.json's "quantization_config" object; `source` names the file in errors.
Result<QuantConfig> parse_quantization_config(const nlohmann::json& qc, const std::string& source);

// Whether the checkpoint stores `prefix` quantized (its tensors are there and it is not ignored).
bool is_quantized_linear(const QuantConfig& c, const SafetensorsSet& st, const std::string& prefix);

// Reads and converts the tensors of one quantized linear.
Result<quant::QuantWeight> load_quant_linear(const QuantConfig& c, const SafetensorsSet& st,
                                             const std::string& prefix);

}  // namespace frugal::model
