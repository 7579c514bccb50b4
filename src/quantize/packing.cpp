#include "quantize/packing.h"

#include <cstring>

#include "core/thread_pool.h"

namespace frugal::quantize {

namespace {

// AutoAWQ GEMM nibble order: nibble f of an int32 holds column 8c + kAwqOrder[f].
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

template <typename T>
OutTensor make_tensor(std::string name, DType dt, std::vector<int64_t> shape, const std::vector<T>& v) {
  OutTensor t{std::move(name), dt, std::move(shape), {}};
  t.data.resize(v.size() * sizeof(T));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

OutTensor f16_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
  return make_tensor(std::move(name), DType::kF16, std::move(shape), h);
}

OutTensor bf16_tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
  return make_tensor(std::move(name), DType::kBF16, std::move(shape), h);
}

int64_t numel(const model::TensorEntry& e) { return e.shape.numel(); }

std::string shape_str(const model::TensorEntry& e) { return e.shape.to_string(); }

Result<const model::TensorEntry*> need(const std::string& prefix, const TensorFinder& find, const std::string& rel,
                                       DType dt, int rank) {
  const model::TensorEntry* e = find(rel);
  if (!e) return not_found("tensor " + prefix + "." + rel + " is missing");
  if (e->dtype != dt) {
    return corrupt("tensor " + prefix + "." + rel + ": dtype " + dtype_name(e->dtype) + ", expected " + dtype_name(dt));
  }
  if (e->shape.ndim != rank) {
    return corrupt("tensor " + prefix + "." + rel + ": shape " + shape_str(*e) + ", expected rank " + std::to_string(rank));
  }
  return e;
}

// Any float dtype -> f32.
Result<std::vector<float>> floats(const std::string& prefix, const TensorFinder& find, const std::string& rel) {
  const model::TensorEntry* e = find(rel);
  if (!e) return not_found("tensor " + prefix + "." + rel + " is missing");
  if (e->dtype != DType::kF16 && e->dtype != DType::kBF16 && e->dtype != DType::kF32) {
    return corrupt("tensor " + prefix + "." + rel + ": dtype " + dtype_name(e->dtype) + ", expected F16, BF16 or F32");
  }
  std::vector<float> v(static_cast<size_t>(numel(*e)));
  convert_to_f32(e->dtype, e->data, v.data(), numel(*e));
  return v;
}

std::vector<uint32_t> words(const model::TensorEntry& e) {
  std::vector<uint32_t> w(static_cast<size_t>(numel(e)));
  std::memcpy(w.data(), e.data, w.size() * 4);
  return w;
}

Status shape_error(const std::string& name, const model::TensorEntry& e, const std::string& expected) {
  return corrupt("tensor " + name + ": shape " + shape_str(e) + ", expected " + expected);
}

}  // namespace

Result<std::vector<OutTensor>> pack_gptq(const std::string& tensor, const IntQuant& q, bool v2) {
  const int32_t bits = q.spec.bits;
  const int64_t per = 32 / bits;
  if (q.in % per != 0 || q.out % per != 0) {
    return invalid_argument(tensor + ": GPTQ " + std::to_string(bits) + "-bit packing needs both dimensions [" +
                            std::to_string(q.out) + ", " + std::to_string(q.in) + "] divisible by " + std::to_string(per));
  }
  const uint32_t mask = (1u << bits) - 1;
  const int64_t ng = q.n_groups();
  std::vector<uint32_t> qw(static_cast<size_t>(q.in / per * q.out), 0);
  // Packed rows in chunks of 16 per task; each output row's codes are read contiguously.
  ThreadPool::global().parallel_for(q.in / per, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t o = 0; o < q.out; ++o) {
      const int32_t* src = q.q.data() + o * q.in;
      for (int64_t r = r0; r < r1; ++r) {
        uint32_t word = 0;
        for (int64_t f = 0; f < per; ++f) word |= (static_cast<uint32_t>(src[r * per + f]) & mask) << (f * bits);
        qw[r * q.out + o] = word;
      }
    }
  });
  std::vector<uint32_t> qz(static_cast<size_t>(ng * q.out / per), 0);
  for (int64_t g = 0; g < ng; ++g) {
    for (int64_t o = 0; o < q.out; ++o) {
      const int32_t z = q.zero[g * q.out + o] - (v2 ? 0 : 1);
      if (z < 0 || z > static_cast<int32_t>(mask)) {
        return internal_error(tensor + ": zero point " + std::to_string(q.zero[g * q.out + o]) + " is not storable in GPTQ v1");
      }
      qz[g * (q.out / per) + o / per] |= static_cast<uint32_t>(z) << ((o % per) * bits);
    }
  }
  std::vector<OutTensor> t;
  t.push_back(make_tensor("qweight", DType::kI32, {q.in / per, q.out}, qw));
  t.push_back(make_tensor("qzeros", DType::kI32, {ng, q.out / per}, qz));
  t.push_back(f16_tensor("scales", {ng, q.out}, q.scale));
  t.push_back(make_tensor("g_idx", DType::kI32, {q.in}, q.g_idx));
  return t;
}

Result<std::vector<OutTensor>> pack_awq(const std::string& tensor, const IntQuant& q) {
  if (q.out % 8 != 0) {
    return invalid_argument(tensor + ": the AutoAWQ GEMM packing needs the output dimension " + std::to_string(q.out) +
                            " divisible by 8");
  }
  const int64_t ng = q.n_groups(), oc = q.out / 8;
  std::vector<uint32_t> qw(static_cast<size_t>(q.in * oc), 0);
  // Input rows in chunks of 64 per task; each output row's codes are read contiguously.
  ThreadPool::global().parallel_for(q.in, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t c = 0; c < oc; ++c)
      for (int f = 0; f < 8; ++f) {
        const int32_t* src = q.q.data() + (8 * c + kAwqOrder[f]) * q.in;
        for (int64_t i = i0; i < i1; ++i) qw[i * oc + c] |= (static_cast<uint32_t>(src[i]) & 0xfu) << (4 * f);
      }
  });
  std::vector<uint32_t> qz(static_cast<size_t>(ng * oc), 0);
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t c = 0; c < oc; ++c)
      for (int f = 0; f < 8; ++f)
        qz[g * oc + c] |= (static_cast<uint32_t>(q.zero[g * q.out + 8 * c + kAwqOrder[f]]) & 0xfu) << (4 * f);
  std::vector<OutTensor> t;
  t.push_back(make_tensor("qweight", DType::kI32, {q.in, oc}, qw));
  t.push_back(make_tensor("qzeros", DType::kI32, {ng, oc}, qz));
  t.push_back(f16_tensor("scales", {ng, q.out}, q.scale));
  return t;
}

std::vector<OutTensor> pack_ct_int8(const IntQuant& q) {
  std::vector<int8_t> w(q.q.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(q.q[i]);
  std::vector<OutTensor> t;
  t.push_back(make_tensor("weight", DType::kI8, {q.out, q.in}, w));
  t.push_back(bf16_tensor("weight_scale", {q.out, 1}, std::vector<float>(q.scale.begin(), q.scale.begin() + q.out)));
  return t;
}

std::vector<OutTensor> pack_fp8(const Fp8Quant& q) {
  std::vector<OutTensor> t;
  t.push_back(make_tensor("weight", DType::kF8E4M3, {q.out, q.in}, q.q));
  switch (q.mode) {
    case Fp8Scale::kTensor: t.push_back(bf16_tensor("weight_scale", {1}, q.scale)); break;
    case Fp8Scale::kChannel: t.push_back(bf16_tensor("weight_scale", {q.out, 1}, q.scale)); break;
    case Fp8Scale::kBlock:
      t.push_back(make_tensor("weight_scale_inv", DType::kF32, {(q.out + 127) / 128, (q.in + 127) / 128}, q.scale));
      break;
  }
  return t;
}

std::vector<OutTensor> pack_nf4(const Nf4Quant& q, const char* compute_dtype) {
  const int64_t n = q.out * q.in;
  std::vector<uint8_t> packed(static_cast<size_t>((n + 1) / 2), 0);
  for (int64_t i = 0; i < n; ++i) packed[i / 2] |= static_cast<uint8_t>(q.idx[i] << ((i % 2) ? 0 : 4));
  // bitsandbytes' quant_state JSON, spelled as Python's json.dumps writes it.
  const std::string state = std::string("{\"quant_type\": \"nf4\", \"blocksize\": ") + std::to_string(q.block) +
                            ", \"dtype\": \"" + compute_dtype + "\", \"shape\": [" + std::to_string(q.out) + ", " +
                            std::to_string(q.in) + "]}";
  std::vector<OutTensor> t;
  t.push_back(make_tensor("weight", DType::kU8, {(n + 1) / 2, 1}, packed));
  t.push_back(make_tensor("weight.absmax", DType::kF32, {n / q.block}, q.absmax));
  t.push_back(make_tensor("weight.quant_map", DType::kF32, {16}, std::vector<float>(kNf4Table, kNf4Table + 16)));
  t.push_back(make_tensor("weight.quant_state.bitsandbytes__nf4", DType::kU8, {static_cast<int64_t>(state.size())},
                          std::vector<uint8_t>(state.begin(), state.end())));
  return t;
}

Result<IntQuant> unpack_gptq(const std::string& prefix, const TensorFinder& find, const StoredLayout& l) {
  const int64_t per = 32 / l.bits;
  const uint32_t mask = (1u << l.bits) - 1;
  FRUGAL_ASSIGN_OR_RETURN(const model::TensorEntry* qw, need(prefix, find, "qweight", DType::kI32, 2));
  FRUGAL_ASSIGN_OR_RETURN(const model::TensorEntry* qz, need(prefix, find, "qzeros", DType::kI32, 2));
  FRUGAL_ASSIGN_OR_RETURN(std::vector<float> scales, floats(prefix, find, "scales"));
  IntQuant q;
  q.spec = {.scheme = l.sym ? IntScheme::kGptqSym : IntScheme::kGptqAsym, .bits = l.bits, .group = l.group};
  q.in = qw->shape[0] * per;
  q.out = qw->shape[1];
  q.group = l.group == -1 ? q.in : l.group;
  if (q.group <= 0 || q.in % q.group != 0) {
    return corrupt(prefix + ": group_size " + std::to_string(l.group) + " does not divide the input dimension " + std::to_string(q.in));
  }
  const int64_t ng = q.in / q.group;
  if (qz->shape[0] != ng || qz->shape[1] * per != q.out) {
    return shape_error(prefix + ".qzeros", *qz, "[" + std::to_string(ng) + ", " + std::to_string(q.out / per) + "]");
  }
  if (static_cast<int64_t>(scales.size()) != ng * q.out) {
    return corrupt("tensor " + prefix + ".scales: " + std::to_string(scales.size()) + " values, expected [" +
                   std::to_string(ng) + ", " + std::to_string(q.out) + "]");
  }
  q.scale = scales;
  const auto qwv = words(*qw), qzv = words(*qz);
  q.q.resize(static_cast<size_t>(q.out * q.in));
  for (int64_t r = 0; r < q.in / per; ++r)
    for (int64_t f = 0; f < per; ++f)
      for (int64_t o = 0; o < q.out; ++o)
        q.q[o * q.in + r * per + f] = static_cast<int32_t>((qwv[r * q.out + o] >> (f * l.bits)) & mask);
  q.zero.resize(static_cast<size_t>(ng * q.out));
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t o = 0; o < q.out; ++o)
      q.zero[g * q.out + o] = static_cast<int32_t>((qzv[g * (q.out / per) + o / per] >> ((o % per) * l.bits)) & mask) +
                              (l.gptq_v2 ? 0 : 1);
  q.g_idx.resize(static_cast<size_t>(q.in));
  const model::TensorEntry* gi = find("g_idx");
  if (!gi) {
    if (l.desc_act) return not_found("tensor " + prefix + ".g_idx is missing (desc_act is true)");
    for (int64_t i = 0; i < q.in; ++i) q.g_idx[i] = static_cast<int32_t>(i / q.group);
  } else {
    if (gi->dtype != DType::kI32 || numel(*gi) != q.in) return shape_error(prefix + ".g_idx", *gi, "I32 [" + std::to_string(q.in) + "]");
    std::memcpy(q.g_idx.data(), gi->data, q.g_idx.size() * 4);
    for (int64_t i = 0; i < q.in; ++i) {
      if (q.g_idx[i] < 0 || q.g_idx[i] >= ng) {
        return corrupt("tensor " + prefix + ".g_idx[" + std::to_string(i) + "] = " + std::to_string(q.g_idx[i]) +
                       " is not a group in 0.." + std::to_string(ng - 1));
      }
    }
  }
  return q;
}

Result<IntQuant> unpack_awq(const std::string& prefix, const TensorFinder& find, const StoredLayout& l) {
  FRUGAL_ASSIGN_OR_RETURN(const model::TensorEntry* qw, need(prefix, find, "qweight", DType::kI32, 2));
  FRUGAL_ASSIGN_OR_RETURN(const model::TensorEntry* qz, need(prefix, find, "qzeros", DType::kI32, 2));
  FRUGAL_ASSIGN_OR_RETURN(std::vector<float> scales, floats(prefix, find, "scales"));
  IntQuant q;
  q.spec = {.scheme = IntScheme::kAwq, .bits = 4, .group = l.group};
  q.in = qw->shape[0];
  const int64_t oc = qw->shape[1];
  q.out = oc * 8;
  q.group = l.group;
  if (q.group <= 0 || q.in % q.group != 0) {
    return corrupt(prefix + ": group_size " + std::to_string(l.group) + " does not divide the input dimension " + std::to_string(q.in));
  }
  const int64_t ng = q.in / q.group;
  if (qz->shape[0] != ng || qz->shape[1] != oc) {
    return shape_error(prefix + ".qzeros", *qz, "[" + std::to_string(ng) + ", " + std::to_string(oc) + "]");
  }
  if (static_cast<int64_t>(scales.size()) != ng * q.out) {
    return corrupt("tensor " + prefix + ".scales: " + std::to_string(scales.size()) + " values, expected [" +
                   std::to_string(ng) + ", " + std::to_string(q.out) + "]");
  }
  q.scale = scales;
  const auto qwv = words(*qw), qzv = words(*qz);
  q.q.resize(static_cast<size_t>(q.out * q.in));
  for (int64_t i = 0; i < q.in; ++i)
    for (int64_t c = 0; c < oc; ++c)
      for (int f = 0; f < 8; ++f)
        q.q[(8 * c + kAwqOrder[f]) * q.in + i] = static_cast<int32_t>((qwv[i * oc + c] >> (4 * f)) & 0xfu);
  q.zero.resize(static_cast<size_t>(ng * q.out));
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t c = 0; c < oc; ++c)
      for (int f = 0; f < 8; ++f)
        q.zero[g * q.out + 8 * c + kAwqOrder[f]] = static_cast<int32_t>((qzv[g * oc + c] >> (4 * f)) & 0xfu);
  q.g_idx.resize(static_cast<size_t>(q.in));
  for (int64_t i = 0; i < q.in; ++i) q.g_idx[i] = static_cast<int32_t>(i / q.group);
  return q;
}

Result<std::vector<float>> read_quantized_linear(const std::string& prefix, const TensorFinder& find,
                                                 const StoredLayout& l, int64_t* out, int64_t* in) {
  switch (l.layout) {
    case Layout::kGptq:
    case Layout::kAwqGemm: {
      FRUGAL_ASSIGN_OR_RETURN(IntQuant q, l.layout == Layout::kGptq ? unpack_gptq(prefix, find, l) : unpack_awq(prefix, find, l));
      *out = q.out;
      *in = q.in;
      return q.dequantize();
    }
    case Layout::kCtInt8:
    case Layout::kCtInt8W8A8:
    case Layout::kCtFp8:
    case Layout::kFp8Block: {
      const bool int8 = l.layout == Layout::kCtInt8 || l.layout == Layout::kCtInt8W8A8;
      FRUGAL_ASSIGN_OR_RETURN(const model::TensorEntry* w, need(prefix, find, "weight", int8 ? DType::kI8 : DType::kF8E4M3, 2));
      const int64_t o = w->shape[0], n = w->shape[1];
      const bool block = l.layout == Layout::kFp8Block;
      FRUGAL_ASSIGN_OR_RETURN(std::vector<float> s, floats(prefix, find, block ? "weight_scale_inv" : "weight_scale"));
      const int64_t nbi = (n + 127) / 128;
      const int64_t want = block ? ((o + 127) / 128) * nbi : static_cast<int64_t>(s.size()) == 1 && !int8 ? 1 : o;
      if (static_cast<int64_t>(s.size()) != want) {
        return corrupt("tensor " + prefix + (block ? ".weight_scale_inv: " : ".weight_scale: ") + std::to_string(s.size()) +
                       " values, expected " + std::to_string(want) + " for weight [" + std::to_string(o) + ", " + std::to_string(n) + "]");
      }
      std::vector<float> r(static_cast<size_t>(o * n));
      for (int64_t a = 0; a < o; ++a) {
        for (int64_t b = 0; b < n; ++b) {
          const float sc = block ? s[(a / 128) * nbi + b / 128] : want == 1 ? s[0] : s[a];
          const float v = int8 ? static_cast<float>(reinterpret_cast<const int8_t*>(w->data)[a * n + b])
                               : f8e4m3_to_f32(w->data[a * n + b]);
          r[a * n + b] = v * sc;
        }
      }
      *out = o;
      *in = n;
      return r;
    }
    case Layout::kBnbNf4: {
      FRUGAL_ASSIGN_OR_RETURN(const model::TensorEntry* w, need(prefix, find, "weight", DType::kU8, 2));
      FRUGAL_ASSIGN_OR_RETURN(const model::TensorEntry* st, need(prefix, find, "weight.quant_state.bitsandbytes__nf4", DType::kU8, 1));
      FRUGAL_ASSIGN_OR_RETURN(std::vector<float> absmax, floats(prefix, find, "weight.absmax"));
      FRUGAL_ASSIGN_OR_RETURN(std::vector<float> qmap, floats(prefix, find, "weight.quant_map"));
      const std::string js(reinterpret_cast<const char*>(st->data), static_cast<size_t>(numel(*st)));
      const nlohmann::json j = nlohmann::json::parse(js, nullptr, false);
      if (j.is_discarded() || !j.contains("shape") || !j["shape"].is_array() || j["shape"].size() != 2 ||
          !j.contains("blocksize") || !j["blocksize"].is_number_integer()) {
        return corrupt("tensor " + prefix + ".weight.quant_state.bitsandbytes__nf4: expected JSON with shape [out, in] and blocksize");
      }
      const int64_t o = j["shape"][0].get<int64_t>(), n = j["shape"][1].get<int64_t>(), bs = j["blocksize"].get<int64_t>();
      if (o <= 0 || n <= 0 || bs <= 0 || numel(*w) != (o * n + 1) / 2 || static_cast<int64_t>(absmax.size()) != (o * n + bs - 1) / bs ||
          qmap.size() != 16) {
        return corrupt(prefix + ": nf4 tensors disagree with quant_state shape [" + std::to_string(o) + ", " + std::to_string(n) +
                       "] blocksize " + std::to_string(bs));
      }
      std::vector<float> r(static_cast<size_t>(o * n));
      for (int64_t i = 0; i < o * n; ++i) {
        const uint8_t byte = w->data[i / 2];
        const int code = (i % 2) ? (byte & 0xf) : (byte >> 4);
        r[i] = qmap[code] * absmax[i / bs];
      }
      *out = o;
      *in = n;
      return r;
    }
  }
  return internal_error("unknown layout");
}

namespace {
nlohmann::json ct_args(int bits, const char* type, const char* strategy, bool dynamic) {
  return {{"actorder", nullptr}, {"block_structure", nullptr}, {"dynamic", dynamic}, {"group_size", nullptr},
          {"num_bits", bits}, {"observer", dynamic ? nlohmann::json(nullptr) : nlohmann::json("minmax")},
          {"observer_kwargs", nlohmann::json::object()}, {"strategy", strategy}, {"symmetric", true}, {"type", type}};
}
}  // namespace

nlohmann::json make_quantization_config(const StoredLayout& l, Method m, const std::vector<std::string>& kept,
                                        bool lm_head, int lm_head_bits) {
  using nlohmann::json;
  switch (l.layout) {
    case Layout::kGptq: {
      json j = {{"bits", l.bits}, {"group_size", l.group}, {"desc_act", l.desc_act}, {"sym", l.sym}, {"lm_head", lm_head},
                {"damp_percent", 0.01}, {"true_sequential", true}, {"static_groups", l.static_groups},
                {"checkpoint_format", l.gptq_v2 ? "gptq_v2" : "gptq"}, {"pack_dtype", "int32"}, {"quant_method", "gptq"},
                {"meta", {{"quantizer", json::array({std::string("frugal quantize (") + method_name(m) + ")"})}}}};
      json dyn = json::object();
      for (const auto& k : kept) dyn["-:^" + k + "$"] = json::object();  // GPTQModel: "-:" skips a module
      if (lm_head && lm_head_bits != 0 && lm_head_bits != l.bits) dyn["+:^lm_head$"] = {{"bits", lm_head_bits}};
      if (!dyn.empty()) j["dynamic"] = dyn;
      return j;
    }
    case Layout::kAwqGemm:
      return {{"quant_method", "awq"}, {"bits", 4}, {"group_size", l.group}, {"zero_point", true}, {"version", "gemm"},
              {"modules_to_not_convert", kept.empty() ? json(nullptr) : json(kept)}};
    case Layout::kCtInt8:
    case Layout::kCtInt8W8A8:
    case Layout::kCtFp8: {
      const bool fp8 = l.layout == Layout::kCtFp8;
      const char* type = fp8 ? "float" : "int";
      json w = ct_args(8, type, l.layout == Layout::kCtFp8 && l.fp8 == Fp8Scale::kTensor ? "tensor" : "channel", false);
      json in = l.layout == Layout::kCtInt8 ? json(nullptr) : ct_args(8, type, "token", true);
      json ignore = lm_head ? json::array() : json::array({"lm_head"});
      for (const auto& k : kept) ignore.push_back(k);
      return {{"config_groups", {{"group_0", {{"input_activations", in}, {"output_activations", nullptr},
                                              {"targets", json::array({"Linear"})}, {"weights", w}}}}},
              {"format", fp8 ? "float-quantized" : "int-quantized"}, {"global_compression_ratio", nullptr},
              {"ignore", ignore}, {"kv_cache_scheme", nullptr}, {"quant_method", "compressed-tensors"},
              {"quantization_status", "compressed"}};
    }
    case Layout::kFp8Block: {
      json j = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                {"weight_block_size", json::array({128, 128})}};
      if (!kept.empty()) j["modules_to_not_convert"] = kept;
      return j;
    }
    case Layout::kBnbNf4:
      return {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"load_in_8bit", false}, {"_load_in_4bit", true},
              {"_load_in_8bit", false}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", false},
              {"bnb_4bit_compute_dtype", "bfloat16"}, {"bnb_4bit_quant_storage", "uint8"}, {"llm_int8_threshold", 6.0},
              {"llm_int8_skip_modules", kept.empty() ? json(nullptr) : json(kept)},
              {"llm_int8_enable_fp32_cpu_offload", false}, {"llm_int8_has_fp16_weight", false}};
  }
  return nullptr;
}

Result<StoredLayout> parse_quantization_config(const nlohmann::json& qc, const std::string& source) {
  auto field_error = [&](const std::string& f, const std::string& want) {
    return corrupt(source + ": quantization_config." + f + ": expected " + want);
  };
  if (!qc.is_object() || !qc.contains("quant_method") || !qc["quant_method"].is_string()) {
    return field_error("quant_method", "a string");
  }
  const std::string m = qc["quant_method"];
  StoredLayout l;
  auto get_int = [&](const char* f, int64_t* v) -> Status {
    if (!qc.contains(f) || !qc[f].is_number_integer()) return field_error(f, "an integer");
    *v = qc[f].get<int64_t>();
    return {};
  };
  if (m == "gptq" || m == "awq") {
    int64_t bits = 0;
    FRUGAL_RETURN_IF_ERROR(get_int("bits", &bits));
    FRUGAL_RETURN_IF_ERROR(get_int("group_size", &l.group));
    if (m == "awq" ? bits != 4 : (bits != 4 && bits != 8)) return field_error("bits", m == "awq" ? "4" : "4 or 8");
    l.bits = static_cast<int32_t>(bits);
    if (m == "awq") {
      l.layout = Layout::kAwqGemm;
      if (qc.contains("version") && qc["version"] != "gemm") return field_error("version", "\"gemm\"");
    } else {
      l.layout = Layout::kGptq;
      l.sym = qc.value("sym", true);
      l.desc_act = qc.value("desc_act", false);
      l.static_groups = qc.value("static_groups", false);
      const std::string cf = qc.value("checkpoint_format", std::string("gptq"));
      if (cf != "gptq" && cf != "gptq_v2") return field_error("checkpoint_format", "\"gptq\" or \"gptq_v2\"");
      l.gptq_v2 = cf == "gptq_v2";
    }
    return l;
  }
  if (m == "fp8") {
    l.layout = Layout::kFp8Block;
    l.bits = 8;
    if (!qc.contains("weight_block_size") || qc["weight_block_size"] != nlohmann::json::array({128, 128})) {
      return field_error("weight_block_size", "[128, 128]");
    }
    return l;
  }
  if (m == "compressed-tensors") {
    const auto* w = qc.contains("config_groups") && qc["config_groups"].contains("group_0") &&
                            qc["config_groups"]["group_0"].contains("weights")
                        ? &qc["config_groups"]["group_0"]["weights"] : nullptr;
    if (!w || !w->is_object()) return field_error("config_groups.group_0.weights", "an object");
    const std::string type = w->value("type", std::string()), strategy = w->value("strategy", std::string());
    const bool acts = !qc["config_groups"]["group_0"].value("input_activations", nlohmann::json(nullptr)).is_null();
    l.bits = 8;
    if (type == "float") {
      l.layout = Layout::kCtFp8;
      if (strategy != "tensor" && strategy != "channel") return field_error("config_groups.group_0.weights.strategy", "\"tensor\" or \"channel\"");
      l.fp8 = strategy == "tensor" ? Fp8Scale::kTensor : Fp8Scale::kChannel;
    } else if (type == "int") {
      l.layout = acts ? Layout::kCtInt8W8A8 : Layout::kCtInt8;
      if (strategy != "channel") return field_error("config_groups.group_0.weights.strategy", "\"channel\"");
    } else {
      return field_error("config_groups.group_0.weights.type", "\"float\" or \"int\"");
    }
    return l;
  }
  if (m == "bitsandbytes") {
    if (qc.value("bnb_4bit_quant_type", std::string()) != "nf4" || !qc.value("load_in_4bit", false)) {
      return field_error("bnb_4bit_quant_type", "\"nf4\" with load_in_4bit");
    }
    l.layout = Layout::kBnbNf4;
    l.group = 64;
    return l;
  }
  return unsupported(source + ": quantization_config.quant_method \"" + m + "\" is not a layout frugal quantize reads");
}

StoredLayout stored_layout_for(const QuantizeOptions& o, Layout l) {
  StoredLayout s;
  s.layout = l;
  s.group = effective_group_size(o, l);
  s.bits = o.format == Format::kInt4 || o.format == Format::kNf4 ? 4 : 8;
  s.sym = o.sym;
  s.desc_act = o.act_order;
  s.static_groups = o.static_groups;
  s.fp8 = o.fp8_scale;
  return s;
}

}  // namespace frugal::quantize
