// Placeholder: parse_model_config is being written (plan/config work).
#include "model/config.h"

#include <nlohmann/json.hpp>

namespace frugal::model {

Result<ModelConfig> parse_model_config(const nlohmann::json&, const std::string& source) {
  return unsupported(source + ": config parsing not implemented yet");
}

Result<ModelConfig> load_model_config(const std::string& path) {
  return unsupported(path + ": config parsing not implemented yet");
}

}  // namespace frugal::model
