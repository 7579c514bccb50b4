#include "model/generation_config.h"

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"

namespace frugal::model {
namespace {

using nlohmann::json;

// bos/eos may be an int, a list of ints, or null.
Result<std::vector<int64_t>> token_ids(const json& j, const char* key, const std::string& source) {
  std::vector<int64_t> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  auto bad = [&] { return invalid_argument(source + ": field '" + key + "' must be a non-negative integer or a list of them"); };
  if (it->is_number_integer()) {
    if (it->get<int64_t>() < 0) return bad();
    out.push_back(it->get<int64_t>());
    return out;
  }
  if (!it->is_array()) return bad();
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) return bad();
    out.push_back(v.get<int64_t>());
  }
  return out;
}

template <typename T>
Status optional_number(const json& j, const char* key, const std::string& source, std::optional<T>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number()) return invalid_argument(source + ": field '" + key + "' must be a number");
  *out = it->get<T>();
  return {};
}

}  // namespace

Result<GenerationConfig> parse_generation_config(const json& j, const std::string& source) {
  if (!j.is_object()) return invalid_argument(source + ": not a JSON object");
  GenerationConfig g;
  FRUGAL_ASSIGN_OR_RETURN(g.bos_token_ids, token_ids(j, "bos_token_id", source));
  FRUGAL_ASSIGN_OR_RETURN(g.eos_token_ids, token_ids(j, "eos_token_id", source));
  if (auto it = j.find("do_sample"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid_argument(source + ": field 'do_sample' must be a boolean");
    g.do_sample = it->get<bool>();
  }
  FRUGAL_RETURN_IF_ERROR(optional_number(j, "temperature", source, &g.temperature));
  FRUGAL_RETURN_IF_ERROR(optional_number(j, "top_p", source, &g.top_p));
  FRUGAL_RETURN_IF_ERROR(optional_number(j, "top_k", source, &g.top_k));
  FRUGAL_RETURN_IF_ERROR(optional_number(j, "repetition_penalty", source, &g.repetition_penalty));
  if (g.temperature && *g.temperature < 0) return invalid_argument(source + ": field 'temperature' must be >= 0");
  if (g.top_p && (*g.top_p <= 0 || *g.top_p > 1)) return invalid_argument(source + ": field 'top_p' must be in (0, 1]");
  if (g.top_k && *g.top_k < 0) return invalid_argument(source + ": field 'top_k' must be >= 0");
  return g;
}

Result<GenerationConfig> load_generation_config(const std::string& dir, const ModelConfig& config) {
  const std::string path = dir + "/generation_config.json";
  GenerationConfig g;
  if (file_exists(path)) {
    FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(path));
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return corrupt(path + ": not valid JSON");
    FRUGAL_ASSIGN_OR_RETURN(g, parse_generation_config(j, path));
  }
  if (g.bos_token_ids.empty()) g.bos_token_ids = config.bos_token_ids;
  if (g.eos_token_ids.empty()) g.eos_token_ids = config.eos_token_ids;
  return g;
}

}  // namespace frugal::model
