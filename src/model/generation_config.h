// generation_config.json: token ids and default sampling settings shipped with a model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "model/config.h"

namespace frugal::model {

struct GenerationConfig {
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  bool do_sample = false;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
};

// Parses generation_config.json contents; `source` names the file in errors.
Result<GenerationConfig> parse_generation_config(const nlohmann::json& j, const std::string& source);
// Reads dir/generation_config.json; when the file is absent, bos/eos come from `config`.
// Token ids missing from the file are also taken from `config`.
Result<GenerationConfig> load_generation_config(const std::string& dir, const ModelConfig& config);

}  // namespace frugal::model
