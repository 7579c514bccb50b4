// Reading a quantized linear from a checkpoint directory: HF config.json's quantization_config
// parsed into QuantConfig (as AutoAWQ, GPTQModel/AutoGPTQ, llm-compressor (compressed-tensors),
// DeepSeek-V3 / transformers fine-grained FP8 and bitsandbytes write it), then the tensors of
// one linear prefix ("model.layers.0.self_attn.q_proj") found in a SafetensorsSet and converted
// to quant::QuantWeight by checkpoint_layouts.h.
//
// model/weights calls it for every linear and an untied lm_head; the router rule (MoE `gate`
// never run quantized) and embeddings staying precise are its to enforce.
#pragma once

#include <cstdint>

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/safetensors.h"
#include "ops/quant/quant_weight.h"

namespace frugal::model {

enum class QuantMethod : uint8_t { kAwq, kGptq, kFp8Block, kCompressedTensors, kBnbNf4 };

// One rule of GPTQModel's per-module "dynamic" config: a regular expression over module names
// ("model.layers.0.mlp.down_proj", "lm_head") matched from the start (Python's re.match); "-:"
// in front leaves the modules it matches unquantized, "+:" (or nothing) overrides the fields it
// lists for them. The first rule in the file's order that matches a module decides (as GPTQModel
// and vLLM apply them); other fields of a rule (damp_percent, ...) do not change the layout.
struct GptqDynamicRule {
  std::string pattern;  // the key as written, "+:" / "-:" included
  std::regex re;
  bool skip = false;
  std::optional<int> bits;
  std::optional<int64_t> group_size;
  std::optional<bool> sym, desc_act;
};

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
  std::vector<GptqDynamicRule> dynamic;  // gptq: per-module rules, in the file's order
};

// Parses config.json's "quantization_config" object; `source` names the file in errors. A json
// object keeps its keys sorted, so GPTQ "dynamic" rules come in key order here;
// order_dynamic_rules puts them back in the order of the file's text.
Result<QuantConfig> parse_quantization_config(const nlohmann::json& qc, const std::string& source);
Status order_dynamic_rules(QuantConfig& c, const std::string& config_text, const std::string& source);

// The config of one module: `c` with the first matching "dynamic" rule's overrides applied, or
// nullopt when a "-:" rule leaves the module unquantized.
std::optional<QuantConfig> module_quant_config(const QuantConfig& c, const std::string& prefix);

// Whether the checkpoint stores `prefix` quantized (its tensors are there and it is not ignored).
bool is_quantized_linear(const QuantConfig& c, const SafetensorsSet& st, const std::string& prefix);

// Reads and converts the tensors of one quantized linear.
Result<quant::QuantWeight> load_quant_linear(const QuantConfig& c, const SafetensorsSet& st,
                                             const std::string& prefix);

}  // namespace frugal::model
