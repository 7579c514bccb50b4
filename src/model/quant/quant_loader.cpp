#include "model/quant/quant_loader.h"

#include <nlohmann/json.hpp>

#include "ops/quant/checkpoint_layouts.h"

namespace frugal::model {
namespace {

using nlohmann::json;

quant::RawTensor raw(const TensorEntry* e) {
  quant::RawTensor t;
  if (e == nullptr) return t;
  t.name = e->name;
  t.dtype = e->dtype;
  for (int i = 0; i < e->shape.ndim; ++i) t.shape.push_back(e->shape[i]);
  t.data = e->data;
  return t;
}

// A RawTensor for `prefix.field`, or null when absent (the converters report missing tensors).
struct Lookup {
  const SafetensorsSet& st;
  std::string prefix;
  std::vector<quant::RawTensor> keep;
  Lookup(const SafetensorsSet& s, std::string p) : st(s), prefix(std::move(p)) { keep.reserve(8); }
  const quant::RawTensor* get(const std::string& field) {
    const TensorEntry* e = st.find(prefix + "." + field);
    if (e == nullptr) return nullptr;
    keep.push_back(raw(e));
    return &keep.back();
  }
};

Result<int64_t> get_int(const json& qc, const char* key, const std::string& source, int64_t dflt, bool required) {
  auto it = qc.find(key);
  if (it == qc.end() || it->is_null()) {
    if (required) return invalid_argument(source + ": quantization_config." + key + " is missing");
    return dflt;
  }
  if (!it->is_number_integer())
    return invalid_argument(source + ": quantization_config." + key + " must be an integer");
  return it->get<int64_t>();
}

bool get_bool(const json& qc, const char* key, bool dflt) {
  auto it = qc.find(key);
  return it != qc.end() && it->is_boolean() ? it->get<bool>() : dflt;
}

}  // namespace

Result<QuantConfig> parse_quantization_config(const json& qc, const std::string& source) {
  if (!qc.is_object()) return invalid_argument(source + ": quantization_config must be an object");
  const std::string method = qc.value("quant_method", std::string());
  QuantConfig c;
  if (method == "awq") {
    c.method = QuantMethod::kAwq;
    Result<int64_t> bits = get_int(qc, "bits", source, -1, false);
    if (!bits) return bits.status();
    Result<int64_t> wbit = get_int(qc, "w_bit", source, 4, false);  // older AutoAWQ key
    if (!wbit) return wbit.status();
    c.bits = static_cast<int>(*bits != -1 ? *bits : *wbit);
    Result<int64_t> g = get_int(qc, "group_size", source, -2, false);
    if (!g) return g.status();
    Result<int64_t> qg = get_int(qc, "q_group_size", source, 128, false);
    if (!qg) return qg.status();
    c.group_size = *g != -2 ? *g : *qg;
    c.zero_point = get_bool(qc, "zero_point", true);
    const std::string version = qc.value("version", std::string("gemm"));
    if (version != "gemm" && version != "GEMM")
      return unsupported(source + ": quantization_config.version = '" + version +
                         "' is not supported for awq (gemm only)");
  } else if (method == "gptq") {
    c.method = QuantMethod::kGptq;
    Result<int64_t> bits = get_int(qc, "bits", source, 4, true);
    if (!bits) return bits.status();
    c.bits = static_cast<int>(*bits);
    Result<int64_t> g = get_int(qc, "group_size", source, 128, true);
    if (!g) return g.status();
    c.group_size = *g;
    c.sym = get_bool(qc, "sym", true);
    c.desc_act = get_bool(qc, "desc_act", false);
    const std::string fmt = qc.value("checkpoint_format", std::string("gptq"));
    if (fmt != "gptq" && fmt != "gptq_v2")
      return unsupported(source + ": quantization_config.checkpoint_format = '" + fmt +
                         "' is not supported (gptq or gptq_v2)");
    c.zeros_v2 = fmt == "gptq_v2";
    if (auto d = qc.find("dynamic"); d != qc.end() && !d->is_null()) {
      if (!d->is_object()) return invalid_argument(source + ": quantization_config.dynamic must be an object");
      for (auto it = d->begin(); it != d->end(); ++it) {
        GptqDynamicRule r;
        r.pattern = it.key();
        std::string body = r.pattern;
        if (body.rfind("-:", 0) == 0) {
          r.skip = true;
          body = body.substr(2);
        } else if (body.rfind("+:", 0) == 0) {
          body = body.substr(2);
        }
        const std::string where = source + ": quantization_config.dynamic['" + r.pattern + "']";
        try {
          r.re = std::regex(body, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          return invalid_argument(where + " is not a regular expression frugal reads (" + e.what() + ")");
        }
        if (!it->is_object()) return invalid_argument(where + " must be an object of overrides");
        const json& o = *it;
        if (auto b = o.find("bits"); b != o.end()) {
          if (!b->is_number_integer()) return invalid_argument(where + ".bits must be an integer");
          r.bits = b->get<int>();
        }
        if (auto g = o.find("group_size"); g != o.end()) {
          if (!g->is_number_integer()) return invalid_argument(where + ".group_size must be an integer");
          r.group_size = g->get<int64_t>();
        }
        if (auto s = o.find("sym"); s != o.end()) {
          if (!s->is_boolean()) return invalid_argument(where + ".sym must be true or false");
          r.sym = s->get<bool>();
        }
        if (auto a = o.find("desc_act"); a != o.end()) {
          if (!a->is_boolean()) return invalid_argument(where + ".desc_act must be true or false");
          r.desc_act = a->get<bool>();
        }
        c.dynamic.push_back(std::move(r));
      }
    }
  } else if (method == "fp8") {
    c.method = QuantMethod::kFp8Block;
    c.bits = 8;
    auto it = qc.find("weight_block_size");
    if (it == qc.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() ||
        !(*it)[1].is_number_integer())
      return unsupported(source + ": quantization_config.weight_block_size must be [block_n, block_k] "
                         "(fp8 without blocks is not supported)");
    c.block_n = (*it)[0].get<int64_t>();
    c.block_k = (*it)[1].get<int64_t>();
    const std::string fmt = qc.value("fmt", std::string("e4m3"));
    if (fmt != "e4m3")
      return unsupported(source + ": quantization_config.fmt = '" + fmt + "' is not supported (e4m3)");
  } else if (method == "compressed-tensors") {
    c.method = QuantMethod::kCompressedTensors;
    const std::string fmt = qc.value("format", std::string());
    auto groups = qc.find("config_groups");
    if (groups == qc.end() || !groups->is_object() || groups->size() != 1)
      return unsupported(source + ": quantization_config.config_groups must hold exactly one group");
    const json& wq = groups->begin()->value("weights", json());
    if (!wq.is_object())
      return invalid_argument(source + ": quantization_config.config_groups." + groups->begin().key() +
                              ".weights is missing");
    const std::string type = wq.value("type", std::string());
    const std::string strategy = wq.value("strategy", std::string());
    const int64_t nb = wq.value("num_bits", int64_t{0});
    if (nb != 8 || !wq.value("symmetric", false))
      return unsupported(source + ": compressed-tensors weights num_bits = " + std::to_string(nb) +
                         " / symmetric = false are not supported (8-bit symmetric only)");
    if (type == "float" && fmt == "float-quantized") {
      c.ct_float = true;
    } else if (type == "int" && fmt == "int-quantized") {
      c.ct_float = false;
    } else {
      return unsupported(source + ": compressed-tensors format '" + fmt + "' with weights type '" + type +
                         "' is not supported (float-quantized/float or int-quantized/int)");
    }
    if (strategy != "channel" && !(strategy == "tensor" && c.ct_float))
      return unsupported(source + ": compressed-tensors weights strategy '" + strategy +
                         "' is not supported (channel, or tensor for fp8)");
    c.ct_per_tensor = strategy == "tensor";
    c.bits = 8;
    if (auto ig = qc.find("ignore"); ig != qc.end() && ig->is_array())
      for (const auto& s : *ig)
        if (s.is_string()) c.ignore.push_back(s.get<std::string>());
  } else if (method == "bitsandbytes") {
    c.method = QuantMethod::kBnbNf4;
    if (!get_bool(qc, "load_in_4bit", false) || qc.value("bnb_4bit_quant_type", std::string()) != "nf4")
      return unsupported(source + ": bitsandbytes quantization_config is supported for load_in_4bit "
                         "with bnb_4bit_quant_type nf4 only");
    if (get_bool(qc, "bnb_4bit_use_double_quant", false))
      return unsupported(source + ": quantization_config.bnb_4bit_use_double_quant = true is not supported");
    c.bits = 4;
    c.group_size = 64;
  } else {
    return unsupported(source + ": quantization_config.quant_method = '" + method +
                       "' is not supported (awq, gptq, fp8, compressed-tensors, bitsandbytes)");
  }
  if (auto m = qc.find("modules_to_not_convert"); m != qc.end() && m->is_array())
    for (const auto& s : *m)
      if (s.is_string()) c.ignore.push_back(s.get<std::string>());
  return c;
}

Status order_dynamic_rules(QuantConfig& c, const std::string& config_text, const std::string& source) {
  if (c.dynamic.size() < 2) return Status::ok();
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(config_text, nullptr, false);
  if (j.is_discarded() || !j.contains("quantization_config") || !j["quantization_config"].contains("dynamic"))
    return invalid_argument(source + ": quantization_config.dynamic could not be read in order");
  std::vector<GptqDynamicRule> ordered;
  for (auto it = j["quantization_config"]["dynamic"].begin(); it != j["quantization_config"]["dynamic"].end(); ++it)
    for (auto& r : c.dynamic)
      if (r.pattern == it.key()) ordered.push_back(r);
  if (ordered.size() != c.dynamic.size())
    return invalid_argument(source + ": quantization_config.dynamic has repeated keys");
  c.dynamic = std::move(ordered);
  return Status::ok();
}

std::optional<QuantConfig> module_quant_config(const QuantConfig& c, const std::string& prefix) {
  for (const GptqDynamicRule& r : c.dynamic) {
    if (!std::regex_search(prefix, r.re, std::regex_constants::match_continuous)) continue;
    if (r.skip) return std::nullopt;
    QuantConfig m = c;
    if (r.bits) m.bits = *r.bits;
    if (r.group_size) m.group_size = *r.group_size;
    if (r.sym) m.sym = *r.sym;
    if (r.desc_act) m.desc_act = *r.desc_act;
    return m;
  }
  return c;
}

bool is_quantized_linear(const QuantConfig& c, const SafetensorsSet& st, const std::string& prefix) {
  if (!module_quant_config(c, prefix)) return false;  // a "-:" rule: stored dense
  for (const std::string& ig : c.ignore)
    if (prefix == ig || (prefix.size() > ig.size() && prefix.compare(prefix.size() - ig.size(), ig.size(), ig) == 0 &&
                         prefix[prefix.size() - ig.size() - 1] == '.'))
      return false;
  switch (c.method) {
    case QuantMethod::kAwq:
    case QuantMethod::kGptq: return st.find(prefix + ".qweight") != nullptr;
    case QuantMethod::kFp8Block:
    case QuantMethod::kCompressedTensors:
    case QuantMethod::kBnbNf4: {
      const TensorEntry* w = st.find(prefix + ".weight");
      if (w == nullptr) return false;
      return w->dtype == DType::kF8E4M3 || w->dtype == DType::kI8 || w->dtype == DType::kU8;
    }
  }
  return false;
}

Result<quant::QuantWeight> load_quant_linear(const QuantConfig& base, const SafetensorsSet& st,
                                             const std::string& prefix) {
  const std::optional<QuantConfig> mc = module_quant_config(base, prefix);
  if (!mc) return invalid_argument(prefix + " is left unquantized by quantization_config.dynamic, yet read as quantized");
  const QuantConfig& c = *mc;
  Lookup t(st, prefix);
  switch (c.method) {
    case QuantMethod::kAwq:
      return quant::from_awq_gemm({.prefix = prefix, .bits = c.bits, .group_size = c.group_size,
                                   .zero_point = c.zero_point},
                                  t.get("qweight"), t.get("qzeros"), t.get("scales"));
    case QuantMethod::kGptq:
      return quant::from_gptq({.prefix = prefix, .bits = c.bits, .group_size = c.group_size, .sym = c.sym,
                               .desc_act = c.desc_act, .zeros_v2 = c.zeros_v2},
                              t.get("qweight"), t.get("qzeros"), t.get("scales"), t.get("g_idx"));
    case QuantMethod::kFp8Block:
      return quant::from_fp8({.prefix = prefix, .scaling = quant::Fp8Scaling::kBlock,
                              .block_n = c.block_n, .block_k = c.block_k},
                             t.get("weight"), t.get("weight_scale_inv"));
    case QuantMethod::kCompressedTensors:
      if (!c.ct_float) return quant::from_int8_channel(prefix, t.get("weight"), t.get("weight_scale"));
      return quant::from_fp8({.prefix = prefix,
                              .scaling = c.ct_per_tensor ? quant::Fp8Scaling::kTensor : quant::Fp8Scaling::kChannel},
                             t.get("weight"), t.get("weight_scale"));
    case QuantMethod::kBnbNf4: {
      // The quant state: JSON bytes {"quant_type", "blocksize", "dtype", "shape"} in a U8 tensor.
      const quant::RawTensor* qs = t.get("weight.quant_state.bitsandbytes__nf4");
      if (qs == nullptr)
        return not_found("tensor " + prefix + ".weight.quant_state.bitsandbytes__nf4 is missing (nf4)");
      int64_t nbytes = 1;
      for (int64_t d : qs->shape) nbytes *= d;
      const auto* p = static_cast<const char*>(qs->data);
      json state = json::parse(p, p + nbytes, nullptr, false);
      if (state.is_discarded() || !state.is_object())
        return invalid_argument("tensor " + qs->name + ": not a JSON object");
      if (state.value("quant_type", std::string()) != "nf4")
        return unsupported("tensor " + qs->name + ": quant_type '" + state.value("quant_type", std::string()) +
                           "' is not supported (nf4)");
      auto shape = state.find("shape");
      if (shape == state.end() || !shape->is_array() || shape->size() != 2 || !(*shape)[0].is_number_integer() ||
          !(*shape)[1].is_number_integer())
        return invalid_argument("tensor " + qs->name + ": shape must be [out_features, in_features]");
      return quant::from_nf4({.prefix = prefix, .n = (*shape)[0].get<int64_t>(), .k = (*shape)[1].get<int64_t>(),
                              .blocksize = state.value("blocksize", int64_t{64})},
                             t.get("weight"), t.get("weight.absmax"), t.get("weight.quant_map"));
    }
  }
  return internal_error("load_quant_linear: unknown method");
}

}  // namespace frugal::model
