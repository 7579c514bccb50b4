// HF config.json -> ModelConfig. Every error names the file and the field, and says what was
// expected, because the user's fix is always "edit that field in that file".
#include "model/config.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"

namespace frugal::model {
namespace {

using json = nlohmann::json;

const char* json_type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

// Typed field access on one JSON object; `where` is "<file>" or "<file>: rope_scaling".
class Fields {
 public:
  Fields(const json& obj, std::string where) : obj_(obj), where_(std::move(where)) {}

  bool has(const char* name) const { return obj_.contains(name) && !obj_.at(name).is_null(); }

  Status error(const char* name, const std::string& what) const {
    return invalid_argument(where_ + ": field '" + name + "': " + what);
  }
  Status type_error(const char* name, const char* expected) const {
    if (!obj_.contains(name)) return error(name, std::string("missing (expected ") + expected + ")");
    return error(name, std::string("expected ") + expected + ", got " + json_type_name(obj_.at(name)));
  }

  // Required integer, or `def` when absent/null and not required.
  Result<int64_t> integer(const char* name, std::optional<int64_t> def = std::nullopt) const {
    if (!has(name)) {
      if (def) return *def;
      return type_error(name, "an integer");
    }
    const json& v = obj_.at(name);
    if (!v.is_number_integer()) return type_error(name, "an integer");
    return v.get<int64_t>();
  }
  Result<int64_t> positive(const char* name, std::optional<int64_t> def = std::nullopt) const {
    FRUGAL_ASSIGN_OR_RETURN(int64_t v, integer(name, def));
    if (v <= 0) return error(name, "expected a positive integer, got " + std::to_string(v));
    return v;
  }
  Result<int64_t> non_negative(const char* name, int64_t def) const {
    FRUGAL_ASSIGN_OR_RETURN(int64_t v, integer(name, def));
    if (v < 0) return error(name, "expected a non-negative integer, got " + std::to_string(v));
    return v;
  }
  Result<double> number(const char* name, std::optional<double> def = std::nullopt) const {
    if (!has(name)) {
      if (def) return *def;
      return type_error(name, "a number");
    }
    const json& v = obj_.at(name);
    if (!v.is_number()) return type_error(name, "a number");
    return v.get<double>();
  }
  Result<double> positive_number(const char* name, std::optional<double> def = std::nullopt) const {
    FRUGAL_ASSIGN_OR_RETURN(double v, number(name, def));
    if (!(v > 0)) return error(name, "expected a positive number, got " + std::to_string(v));
    return v;
  }
  Result<bool> boolean(const char* name, bool def) const {
    if (!has(name)) return def;
    const json& v = obj_.at(name);
    if (!v.is_boolean()) return type_error(name, "a boolean");
    return v.get<bool>();
  }
  Result<std::string> string(const char* name, std::optional<std::string> def = std::nullopt) const {
    if (!has(name)) {
      if (def) return *def;
      return type_error(name, "a string");
    }
    const json& v = obj_.at(name);
    if (!v.is_string()) return type_error(name, "a string");
    return v.get<std::string>();
  }
  // Token ids: an integer, a list of integers, or null/absent (empty).
  Result<std::vector<int64_t>> token_ids(const char* name) const {
    std::vector<int64_t> out;
    if (!has(name)) return out;
    const json& v = obj_.at(name);
    if (v.is_number_integer()) {
      out.push_back(v.get<int64_t>());
    } else if (v.is_array()) {
      for (const json& e : v) {
        if (!e.is_number_integer()) return type_error(name, "an integer or a list of integers");
        out.push_back(e.get<int64_t>());
      }
    } else {
      return type_error(name, "an integer, a list of integers or null");
    }
    for (int64_t id : out) {
      if (id < 0) return error(name, "expected non-negative token ids, got " + std::to_string(id));
    }
    return out;
  }

  const json& at(const char* name) const { return obj_.at(name); }
  const std::string& where() const { return where_; }

 private:
  const json& obj_;
  std::string where_;
};

struct ArchName {
  const char* architecture;
  const char* model_type;
};

constexpr ArchName kArchs[] = {
    {"LlamaForCausalLM", "llama"},
    {"Qwen2ForCausalLM", "qwen2"},
    {"DeepseekV2ForCausalLM", "deepseek_v2"},
    {"DeepseekV3ForCausalLM", "deepseek_v3"},
};

std::string supported_list() {
  std::string s;
  for (const ArchName& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.architecture);
  return s;
}

Status parse_architecture(const Fields& f, ModelConfig& c) {
  if (!f.has("architectures") || !f.at("architectures").is_array() ||
      f.at("architectures").empty() || !f.at("architectures")[0].is_string()) {
    return f.error("architectures", "expected a non-empty list of strings (supported: " +
                                        supported_list() + ")");
  }
  const std::string arch = f.at("architectures")[0].get<std::string>();
  for (const ArchName& a : kArchs) {
    if (arch == a.architecture) {
      c.architecture = arch;
      FRUGAL_ASSIGN_OR_RETURN(c.model_type, f.string("model_type", std::string(a.model_type)));
      return Status::ok();
    }
  }
  return unsupported(f.where() + ": field 'architectures': unsupported architecture '" + arch +
                     "' (supported: " + supported_list() + ")");
}

Result<DType> parse_dtype(const Fields& f) {
  // Newer transformers write "dtype"; older ones "torch_dtype".
  const char* key = f.has("dtype") ? "dtype" : "torch_dtype";
  FRUGAL_ASSIGN_OR_RETURN(std::string s, f.string(key, std::string("bfloat16")));
  if (s == "bfloat16") return DType::kBF16;
  if (s == "float16") return DType::kF16;
  if (s == "float32") return DType::kF32;
  return f.error(key, "unsupported dtype '" + s + "' (expected bfloat16, float16 or float32)");
}

Status parse_llama3(const Fields& r, RopeScaling& rs) {
  FRUGAL_ASSIGN_OR_RETURN(rs.low_freq_factor, r.positive_number("low_freq_factor"));
  FRUGAL_ASSIGN_OR_RETURN(rs.high_freq_factor, r.positive_number("high_freq_factor"));
  FRUGAL_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          r.positive("original_max_position_embeddings"));
  if (rs.high_freq_factor <= rs.low_freq_factor) {
    return r.error("high_freq_factor", "must be greater than low_freq_factor");
  }
  return Status::ok();
}

Status parse_yarn(const Fields& r, RopeScaling& rs) {
  FRUGAL_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          r.positive("original_max_position_embeddings"));
  FRUGAL_ASSIGN_OR_RETURN(rs.beta_fast, r.number("beta_fast", 32.0));
  FRUGAL_ASSIGN_OR_RETURN(rs.beta_slow, r.number("beta_slow", 1.0));
  FRUGAL_ASSIGN_OR_RETURN(rs.mscale, r.number("mscale", 0.0));
  FRUGAL_ASSIGN_OR_RETURN(rs.mscale_all_dim, r.number("mscale_all_dim", 0.0));
  FRUGAL_ASSIGN_OR_RETURN(rs.attention_factor, r.number("attention_factor", 0.0));
  FRUGAL_ASSIGN_OR_RETURN(rs.truncate, r.boolean("truncate", true));
  if (rs.attention_factor < 0) return r.error("attention_factor", "must not be negative");
  return Status::ok();
}

// Scaling settings in one object: `rope_scaling` (transformers < 5, where "type" or "rope_type"
// names the kind) or `rope_parameters` (transformers 5, "rope_type", default "default").
Status parse_rope_object(const Fields& r, const char* type_key, std::optional<std::string> type_default,
                         RopeScaling& rs) {
  FRUGAL_ASSIGN_OR_RETURN(std::string type, r.string(type_key, type_default));
  if (type == "default") {
    rs.type = RopeScalingType::kNone;
    return Status::ok();
  }
  if (type == "linear") {
    rs.type = RopeScalingType::kLinear;
  } else if (type == "dynamic") {
    rs.type = RopeScalingType::kDynamic;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::kLlama3;
  } else if (type == "yarn") {
    rs.type = RopeScalingType::kYarn;
  } else {
    return unsupported(r.where() + ": field '" + type_key + "': unsupported rope scaling '" + type +
                       "' (supported: default, linear, dynamic, llama3, yarn)");
  }
  FRUGAL_ASSIGN_OR_RETURN(rs.factor, r.positive_number("factor"));
  if (rs.type == RopeScalingType::kLlama3) return parse_llama3(r, rs);
  if (rs.type == RopeScalingType::kYarn) return parse_yarn(r, rs);
  return Status::ok();
}

// rope_theta and the scaling: top-level rope_theta / rope_scaling where given (they win), else
// transformers 5's rope_parameters {rope_type, rope_theta, factor, ...}.
Status parse_rope(const Fields& f, ModelConfig& c) {
  std::optional<Fields> params;
  if (f.has("rope_parameters")) {
    if (!f.at("rope_parameters").is_object()) return f.type_error("rope_parameters", "an object or null");
    params.emplace(f.at("rope_parameters"), f.where() + ": rope_parameters");
  }
  if (f.has("rope_theta") || !params) {
    FRUGAL_ASSIGN_OR_RETURN(c.rope_theta, f.positive_number("rope_theta", 10000.0));
  } else {
    FRUGAL_ASSIGN_OR_RETURN(c.rope_theta, params->positive_number("rope_theta", 10000.0));
  }
  if (f.has("rope_scaling")) {
    const json& obj = f.at("rope_scaling");
    if (!obj.is_object()) return f.type_error("rope_scaling", "an object or null");
    Fields r(obj, f.where() + ": rope_scaling");
    // HF renamed "type" to "rope_type"; either may appear.
    return parse_rope_object(r, r.has("rope_type") ? "rope_type" : "type", std::nullopt, c.rope_scaling);
  }
  if (params) return parse_rope_object(*params, "rope_type", std::string("default"), c.rope_scaling);
  return Status::ok();  // absent or null: plain RoPE
}

Status parse_heads(const Fields& f, ModelConfig& c) {
  FRUGAL_ASSIGN_OR_RETURN(c.num_attention_heads, f.positive("num_attention_heads"));
  FRUGAL_ASSIGN_OR_RETURN(c.num_key_value_heads,
                          f.positive("num_key_value_heads", c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return f.error("num_key_value_heads",
                   "num_attention_heads (" + std::to_string(c.num_attention_heads) +
                       ") must be a multiple of num_key_value_heads (" +
                       std::to_string(c.num_key_value_heads) + ")");
  }
  if (c.is_mla()) {
    c.head_dim = c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim;
    return Status::ok();
  }
  if (f.has("head_dim")) {
    FRUGAL_ASSIGN_OR_RETURN(c.head_dim, f.positive("head_dim"));
    return Status::ok();
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    return f.error("hidden_size", "hidden_size (" + std::to_string(c.hidden_size) +
                                      ") must be a multiple of num_attention_heads (" +
                                      std::to_string(c.num_attention_heads) +
                                      ") unless head_dim is given");
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return Status::ok();
}

Status parse_mla(const Fields& f, MlaConfig& m) {
  FRUGAL_ASSIGN_OR_RETURN(m.q_lora_rank, f.non_negative("q_lora_rank", 0));  // null: plain q_proj
  FRUGAL_ASSIGN_OR_RETURN(m.kv_lora_rank, f.positive("kv_lora_rank"));
  FRUGAL_ASSIGN_OR_RETURN(m.qk_nope_head_dim, f.positive("qk_nope_head_dim"));
  FRUGAL_ASSIGN_OR_RETURN(m.qk_rope_head_dim, f.positive("qk_rope_head_dim"));
  FRUGAL_ASSIGN_OR_RETURN(m.v_head_dim, f.positive("v_head_dim"));
  if (m.qk_rope_head_dim % 2 != 0) return f.error("qk_rope_head_dim", "must be even for RoPE");
  return Status::ok();
}

Status check_moe(const Fields& f, const MoeConfig& m, int64_t n_layers) {
  if (m.num_experts_per_tok > m.n_routed_experts) {
    return f.error("num_experts_per_tok", "exceeds n_routed_experts (" +
                                              std::to_string(m.n_routed_experts) + ")");
  }
  if (m.n_routed_experts % m.n_group != 0) {
    return f.error("n_group", "n_routed_experts (" + std::to_string(m.n_routed_experts) +
                                  ") must be a multiple of n_group");
  }
  if (m.topk_group > m.n_group) return f.error("topk_group", "exceeds n_group");
  if (m.first_k_dense_replace > n_layers) {
    return f.error("first_k_dense_replace", "exceeds num_hidden_layers");
  }
  if (m.scoring_func != "softmax" && m.scoring_func != "sigmoid") {
    return f.error("scoring_func", "unsupported '" + m.scoring_func + "' (expected softmax or sigmoid)");
  }
  return Status::ok();
}

Status parse_moe(const Fields& f, MoeConfig& m, int64_t n_layers) {
  FRUGAL_ASSIGN_OR_RETURN(m.n_routed_experts, f.non_negative("n_routed_experts", 0));
  FRUGAL_ASSIGN_OR_RETURN(m.num_nextn_predict_layers, f.non_negative("num_nextn_predict_layers", 0));
  if (m.n_routed_experts == 0) return Status::ok();  // dense DeepSeek variant
  FRUGAL_ASSIGN_OR_RETURN(m.n_shared_experts, f.non_negative("n_shared_experts", 0));
  FRUGAL_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.positive("num_experts_per_tok"));
  FRUGAL_ASSIGN_OR_RETURN(m.moe_intermediate_size, f.positive("moe_intermediate_size"));
  FRUGAL_ASSIGN_OR_RETURN(m.first_k_dense_replace, f.non_negative("first_k_dense_replace", 0));
  FRUGAL_ASSIGN_OR_RETURN(m.moe_layer_freq, f.positive("moe_layer_freq", 1));
  FRUGAL_ASSIGN_OR_RETURN(m.n_group, f.positive("n_group", 1));
  FRUGAL_ASSIGN_OR_RETURN(m.topk_group, f.positive("topk_group", 1));
  FRUGAL_ASSIGN_OR_RETURN(m.scoring_func, f.string("scoring_func", std::string("softmax")));
  FRUGAL_ASSIGN_OR_RETURN(m.topk_method, f.string("topk_method", std::string("greedy")));
  FRUGAL_ASSIGN_OR_RETURN(m.norm_topk_prob, f.boolean("norm_topk_prob", false));
  FRUGAL_ASSIGN_OR_RETURN(m.routed_scaling_factor, f.positive_number("routed_scaling_factor", 1.0));
  return check_moe(f, m, n_layers);
}

Status parse_quantization(const Fields& f, QuantizationConfig& q) {
  if (!f.has("quantization_config")) return Status::ok();
  const json& obj = f.at("quantization_config");
  if (!obj.is_object()) return f.type_error("quantization_config", "an object or null");
  Fields qf(obj, f.where() + ": quantization_config");
  FRUGAL_ASSIGN_OR_RETURN(q.quant_method, qf.string("quant_method"));
  FRUGAL_ASSIGN_OR_RETURN(q.fmt, qf.string("fmt", std::string()));
  FRUGAL_ASSIGN_OR_RETURN(q.bits, qf.non_negative("bits", 0));
  FRUGAL_ASSIGN_OR_RETURN(q.group_size, qf.integer("group_size", 0));  // -1: per channel (GPTQ)
  if (qf.has("weight_block_size")) {
    const json& b = qf.at("weight_block_size");
    if (!b.is_array()) return qf.type_error("weight_block_size", "a list of positive integers");
    for (const json& e : b) {
      if (!e.is_number_integer() || e.get<int64_t>() <= 0) {
        return qf.type_error("weight_block_size", "a list of positive integers");
      }
      q.weight_block_size.push_back(e.get<int64_t>());
    }
  }
  return Status::ok();
}

Status parse_sizes(const Fields& f, ModelConfig& c) {
  FRUGAL_ASSIGN_OR_RETURN(c.vocab_size, f.positive("vocab_size"));
  FRUGAL_ASSIGN_OR_RETURN(c.hidden_size, f.positive("hidden_size"));
  FRUGAL_ASSIGN_OR_RETURN(c.intermediate_size, f.positive("intermediate_size"));
  FRUGAL_ASSIGN_OR_RETURN(c.num_hidden_layers, f.positive("num_hidden_layers"));
  FRUGAL_ASSIGN_OR_RETURN(c.max_position_embeddings, f.positive("max_position_embeddings"));
  FRUGAL_ASSIGN_OR_RETURN(c.rms_norm_eps, f.positive_number("rms_norm_eps", 1e-6));
  FRUGAL_ASSIGN_OR_RETURN(c.hidden_act, f.string("hidden_act", std::string("silu")));
  return Status::ok();
}

Status parse_flags(const Fields& f, ModelConfig& c) {
  const bool qwen2 = c.architecture == "Qwen2ForCausalLM";
  FRUGAL_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.boolean("tie_word_embeddings", false));
  // Qwen2 always has q/k/v biases; its config.json does not say so.
  FRUGAL_ASSIGN_OR_RETURN(c.attention_bias, f.boolean("attention_bias", qwen2));
  if (qwen2) c.attention_bias = true;
  FRUGAL_ASSIGN_OR_RETURN(c.mlp_bias, f.boolean("mlp_bias", false));
  FRUGAL_ASSIGN_OR_RETURN(c.use_sliding_window, f.boolean("use_sliding_window", false));
  FRUGAL_ASSIGN_OR_RETURN(c.sliding_window, f.non_negative("sliding_window", 0));
  FRUGAL_ASSIGN_OR_RETURN(c.max_window_layers, f.non_negative("max_window_layers", 0));
  if (c.use_sliding_window && c.sliding_window == 0) {
    return f.error("sliding_window", "must be positive when use_sliding_window is true");
  }
  FRUGAL_ASSIGN_OR_RETURN(c.bos_token_ids, f.token_ids("bos_token_id"));
  FRUGAL_ASSIGN_OR_RETURN(c.eos_token_ids, f.token_ids("eos_token_id"));
  FRUGAL_ASSIGN_OR_RETURN(c.torch_dtype, parse_dtype(f));
  return Status::ok();
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const ArchName& a : kArchs) v.emplace_back(a.architecture);
    return v;
  }();
  return kNames;
}

const char* rope_scaling_type_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kDynamic: return "dynamic";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kYarn: return "yarn";
  }
  return "unknown";
}

Result<ModelConfig> parse_model_config(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) {
    return invalid_argument(source + ": expected a JSON object at the top level, got " +
                            json_type_name(j));
  }
  Fields f(j, source);
  ModelConfig c;
  FRUGAL_RETURN_IF_ERROR(parse_architecture(f, c));
  FRUGAL_RETURN_IF_ERROR(parse_sizes(f, c));
  const bool deepseek = c.architecture == "DeepseekV2ForCausalLM" ||
                        c.architecture == "DeepseekV3ForCausalLM";
  if (deepseek) {
    FRUGAL_RETURN_IF_ERROR(parse_mla(f, c.mla));
    FRUGAL_RETURN_IF_ERROR(parse_moe(f, c.moe, c.num_hidden_layers));
    FRUGAL_ASSIGN_OR_RETURN(c.rope_interleave, f.boolean("rope_interleave", true));
  }
  FRUGAL_RETURN_IF_ERROR(parse_heads(f, c));
  FRUGAL_RETURN_IF_ERROR(parse_rope(f, c));
  FRUGAL_RETURN_IF_ERROR(parse_flags(f, c));
  FRUGAL_RETURN_IF_ERROR(parse_quantization(f, c.quantization));
  return c;
}

Result<ModelConfig> load_model_config(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "config.json").string() : path;
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(file));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(file + ": not valid JSON");
  return parse_model_config(j, file);
}

}  // namespace frugal::model
