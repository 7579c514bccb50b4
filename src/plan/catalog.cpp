#include "plan/catalog.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace frugal::plan {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

Result<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(path + ": not valid JSON");
  return j;
}

// Reads obj[key] as a number (>= 0); `where` names the file and entry in errors.
Result<double> number(const json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || !obj.at(key).is_number()) {
    return invalid_argument(where + ": field '" + key + "': expected a number");
  }
  double v = obj.at(key).get<double>();
  if (v < 0) return invalid_argument(where + ": field '" + key + "': expected >= 0");
  return v;
}

std::string string_or(const json& obj, const char* key, const std::string& def) {
  return obj.contains(key) && obj.at(key).is_string() ? obj.at(key).get<std::string>() : def;
}

Result<GpuSpec> parse_gpu(const json& g, const std::string& where_file, size_t index) {
  const std::string where = where_file + ": gpus[" + std::to_string(index) + "]";
  if (!g.is_object()) return invalid_argument(where + ": expected an object");
  GpuSpec s;
  s.name = string_or(g, "name", "");
  if (s.name.empty()) return invalid_argument(where + ": field 'name': expected a non-empty string");
  const std::string w = where + " (" + s.name + ")";
  s.display_name = string_or(g, "display_name", s.name);
  if (g.contains("aliases") && g["aliases"].is_array()) {
    for (const auto& a : g["aliases"]) {
      if (a.is_string()) s.aliases.push_back(a.get<std::string>());
    }
  }
  FRUGAL_ASSIGN_OR_RETURN(s.memory_gib, number(g, "memory_gib", w));
  FRUGAL_ASSIGN_OR_RETURN(s.bandwidth_gb_s, number(g, "memory_bandwidth_gb_s", w));
  if (s.memory_gib <= 0 || s.bandwidth_gb_s <= 0) {
    return invalid_argument(w + ": memory_gib and memory_bandwidth_gb_s must be positive");
  }
  if (!g.contains("dense_tflops") || !g["dense_tflops"].is_object()) {
    return invalid_argument(w + ": field 'dense_tflops': expected an object {bf16, fp8, int8}");
  }
  const json& t = g["dense_tflops"];
  FRUGAL_ASSIGN_OR_RETURN(s.tflops_bf16, number(t, "bf16", w + ": dense_tflops"));
  FRUGAL_ASSIGN_OR_RETURN(s.tflops_fp8, number(t, "fp8", w + ": dense_tflops"));
  FRUGAL_ASSIGN_OR_RETURN(s.tflops_int8, number(t, "int8", w + ": dense_tflops"));
  if (s.tflops_bf16 <= 0) return invalid_argument(w + ": dense_tflops.bf16 must be positive");
  if (!g.contains("interconnect") || !g["interconnect"].is_object()) {
    return invalid_argument(w + ": field 'interconnect': expected an object");
  }
  const json& ic = g["interconnect"];
  FRUGAL_ASSIGN_OR_RETURN(double gen, number(ic, "pcie_gen", w + ": interconnect"));
  s.pcie_gen = static_cast<int>(gen);
  FRUGAL_ASSIGN_OR_RETURN(s.pcie_gb_s, number(ic, "pcie_gb_s", w + ": interconnect"));
  FRUGAL_ASSIGN_OR_RETURN(s.nvlink_gb_s, number(ic, "nvlink_gb_s", w + ": interconnect"));
  FRUGAL_ASSIGN_OR_RETURN(s.allreduce_latency_us, number(ic, "allreduce_latency_us", w + ": interconnect"));
  FRUGAL_ASSIGN_OR_RETURN(s.price_usd_per_hour, number(g, "price_usd_per_hour", w));
  s.price_source = string_or(g, "price_source", "");
  s.price_date = string_or(g, "price_date", "");
  s.spec_source = string_or(g, "spec_source", "");
  if (g.contains("list_price_usd")) {
    FRUGAL_ASSIGN_OR_RETURN(s.list_price_usd, number(g, "list_price_usd", w));
    if (s.list_price_usd < 0) return invalid_argument(w + ": list_price_usd must be >= 0");
  }
  s.list_price_source = string_or(g, "list_price_source", "");
  if (g.contains("tdp_w")) {
    FRUGAL_ASSIGN_OR_RETURN(s.tdp_w, number(g, "tdp_w", w));
    if (s.tdp_w < 0) return invalid_argument(w + ": tdp_w must be >= 0");
  }
  s.tdp_source = string_or(g, "tdp_source", "");
  return s;
}

}  // namespace

std::string GpuSpec::link_name() const {
  if (nvlink_gb_s > 0) return "NVLink " + std::to_string(static_cast<int>(nvlink_gb_s)) + " GB/s";
  return "PCIe gen" + std::to_string(pcie_gen) + " x16 " + std::to_string(static_cast<int>(pcie_gb_s)) +
         " GB/s";
}

std::string default_catalog_dir() {
  if (const char* env = std::getenv("FRUGAL_CATALOG")) return env;
  return std::string(FRUGAL_SOURCE_ROOT) + "/data/catalog";
}

Result<std::vector<GpuSpec>> load_gpu_catalog(const std::string& catalog_dir) {
  const std::string path = catalog_dir + "/gpus.json";
  FRUGAL_ASSIGN_OR_RETURN(json j, read_json(path));
  if (!j.is_object() || !j.contains("gpus") || !j["gpus"].is_array()) {
    return invalid_argument(path + ": field 'gpus': expected a list of GPU entries");
  }
  std::vector<GpuSpec> out;
  for (size_t i = 0; i < j["gpus"].size(); ++i) {
    FRUGAL_ASSIGN_OR_RETURN(GpuSpec s, parse_gpu(j["gpus"][i], path, i));
    out.push_back(std::move(s));
  }
  return out;
}

Result<GpuSpec> find_gpu(const std::vector<GpuSpec>& gpus, const std::string& name) {
  const std::string want = lower(name);
  for (const GpuSpec& g : gpus) {
    if (lower(g.name) == want) return g;
    for (const std::string& a : g.aliases) {
      if (lower(a) == want) return g;
    }
  }
  std::string names;
  for (const GpuSpec& g : gpus) names += (names.empty() ? "" : ", ") + g.name;
  return not_found("--gpu: unknown GPU '" + name + "' (catalog has: " + names + ")");
}

Result<ModelEntry> load_model_entry(const std::string& path) {
  FRUGAL_ASSIGN_OR_RETURN(json j, read_json(path));
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object()) {
    return invalid_argument(path + ": field 'config': expected the model's config.json object");
  }
  ModelEntry e;
  e.name = string_or(j, "name", fs::path(path).stem().string());
  e.source = path;
  e.provenance = string_or(j, "provenance", "");
  if (j.contains("published_params_b") && j["published_params_b"].is_number()) {
    e.published_params_b = j["published_params_b"].get<double>();
  }
  if (j.contains("published_active_params_b") && j["published_active_params_b"].is_number()) {
    e.published_active_params_b = j["published_active_params_b"].get<double>();
  }
  FRUGAL_ASSIGN_OR_RETURN(e.config, model::parse_model_config(j["config"], path + ": config"));
  return e;
}

std::vector<std::string> catalog_model_names(const std::string& catalog_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(catalog_dir + "/models", ec)) {
    if (d.path().extension() == ".json") names.push_back(d.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<ModelEntry> resolve_model(const std::string& arg, const std::string& catalog_dir) {
  std::error_code ec;
  if (fs::exists(arg, ec)) {
    FRUGAL_ASSIGN_OR_RETURN(model::ModelConfig c, model::load_model_config(arg));
    const bool dir = fs::is_directory(arg, ec);
    ModelEntry e;
    e.name = arg;
    e.source = dir ? arg + "/config.json" : arg;
    e.config = std::move(c);
    return e;
  }
  const std::string want = lower(arg);
  for (const std::string& n : catalog_model_names(catalog_dir)) {
    if (lower(n) == want) return load_model_entry(catalog_dir + "/models/" + n + ".json");
  }
  std::string names;
  for (const std::string& n : catalog_model_names(catalog_dir)) names += (names.empty() ? "" : ", ") + n;
  return not_found("--model: '" + arg + "' is neither a file, a directory nor a catalog model (" +
                   catalog_dir + "/models has: " + names + ")");
}

}  // namespace frugal::plan
