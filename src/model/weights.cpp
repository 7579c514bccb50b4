#include "model/weights.h"

#include <new>
#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "model/quant/quant_loader.h"
#include "ops/weight_format_check.h"

namespace frugal::model {
namespace {

constexpr int64_t kAlign = 256;

int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool is_weight_dtype(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Approximately standard normal from one 64-bit hash: Irwin-Hall sum of four 16-bit uniforms,
// centred and scaled to unit variance (tails clipped at +-3.46; plenty for speed work).
float approx_normal(uint64_t h) {
  float s = 0;
  for (int k = 0; k < 4; ++k) s += (static_cast<float>((h >> (16 * k)) & 0xffff) + 0.5f) * (1.0f / 65536.0f);
  return (s - 2.0f) * 1.7320508f;
}

std::string describe_files(const std::string& dir) {
  return file_exists(dir + "/model.safetensors.index.json") ? dir + "/model.safetensors.index.json"
                                                            : dir + "/model.safetensors";
}

bool ignorable(const std::string& name, const std::vector<TensorSpec>& specs,
               const std::set<std::string>& wanted) {
  // Stale buffers some exporters write (e.g. rotary_emb.inv_freq).
  static constexpr std::string_view kIgnored[] = {".rotary_emb.inv_freq"};
  for (auto s : kIgnored)
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  // A tied checkpoint may still carry a copy of the embedding as lm_head; the engine uses the
  // embedding table.
  return name == "lm_head.weight" && !wanted.count(name) && !specs.empty();
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string role_of(const TensorSpec& s) {
  switch (s.role) {
    case TensorRole::kEmbedding: return "embedding";
    case TensorRole::kLmHead: return "lm_head";
    case TensorRole::kRouter: case TensorRole::kRouterBias: return "router";
    case TensorRole::kNorm: return "norm";
    case TensorRole::kBias: return "bias";
    case TensorRole::kLinear: break;
  }
  if (s.name.find(".self_attn.") != std::string::npos) return "attention";
  if (s.expert >= 0) return "mlp (routed experts)";
  return "mlp";
}

// The quantization_config of dir/config.json, or nullopt when it has none.
Result<std::optional<QuantConfig>> read_quant_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!file_exists(path)) return std::optional<QuantConfig>();
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::optional<QuantConfig>();  // load_model_config reports it
  auto it = j.find("quantization_config");
  if (it == j.end() || it->is_null()) return std::optional<QuantConfig>();
  FRUGAL_ASSIGN_OR_RETURN(QuantConfig c, parse_quantization_config(*it, path));
  FRUGAL_RETURN_IF_ERROR(order_dynamic_rules(c, text, path));
  return std::optional<QuantConfig>(std::move(c));
}

// A dummy n x k weight in format f (int8, int4, fp8 or nf4) with values of about the scale of
// fill_dummy's linears (std ~0.02): random codes, one scale per group. Codes are hashed in
// parallel chunks of rows so the split does not change the bytes.
Result<quant::QuantWeight> dummy_quant(const ops::WeightFormat& f, int64_t n, int64_t k, uint64_t seed, uint64_t stream) {
  quant::CodeKind kind = quant::CodeKind::kQ8;
  float scale = 0.02f / 74.0f, offset = 0;  // uniform int8 codes: std ~74
  switch (f.scheme) {
    case ops::WeightScheme::kInt8: break;
    case ops::WeightScheme::kInt4: kind = quant::CodeKind::kQ4; scale = 0.02f / 4.6f; offset = -7.5f * scale; break;
    case ops::WeightScheme::kNf4: kind = quant::CodeKind::kQ4; scale = 0.02f / 0.52f; break;
    case ops::WeightScheme::kFp8: kind = quant::CodeKind::kF8; scale = 0.02f / 0.9f; break;
    case ops::WeightScheme::kDense: return internal_error("dummy_quant: dense format");
  }
  const int64_t k_pad = (k + quant::kBlock - 1) / quant::kBlock * quant::kBlock;
  const int64_t group = f.group_k > 0 ? f.group_k : k_pad;
  const int64_t row_block = f.group_n > 0 ? f.group_n : n;
  if (f.group_k > 0 && k % f.group_k != 0)
    return invalid_argument("dummy weights: group size " + std::to_string(f.group_k) + " does not divide in_features " +
                            std::to_string(k));
  quant::QuantWeight w = quant::make_quant_weight(kind, n, k, group, row_block);
  if (f.scheme == ops::WeightScheme::kNf4) w.lut.assign(quant::kNf4Table, quant::kNf4Table + 16);
  if (f.scheme == ops::WeightScheme::kInt4)
    for (int c = 0; c < 16; ++c) w.lut.push_back(static_cast<float>(c));
  const uint64_t key = splitmix64(seed * 0x100000001b3ull ^ splitmix64(stream + 0x51ed27ull));
  const int64_t ld = w.ld_q();
  ThreadPool::global().parallel_for(n, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(ld, 1)),
                                    [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* row = w.q.data() + r * ld;
      for (int64_t b = 0; b < ld; b += 8) {
        uint64_t h = splitmix64(key + static_cast<uint64_t>(r * ld + b));
        for (int64_t i = b; i < std::min(b + 8, ld); ++i, h >>= 8) {
          uint8_t c = static_cast<uint8_t>(h);
          if (kind == quant::CodeKind::kF8) c &= 0xbf;  // exponent <= 7: |v| < 2, never NaN
          row[i] = c;
        }
      }
      // Padding codes past k stay zero (4-bit: zero the codes of blocks past k too).
      if (kind != quant::CodeKind::kQ4) {
        std::fill(row + k, row + ld, uint8_t{0});
      } else {
        for (int64_t j = k; j < k_pad; ++j) {
          uint8_t& byte = row[(j / quant::kBlock) * (quant::kBlock / 2) + (j % 16)];
          byte = (j % quant::kBlock) < 16 ? (byte & 0xf0) : (byte & 0x0f);
        }
      }
    }
  });
  std::fill(w.scale.begin(), w.scale.end(), scale);
  if (offset != 0) w.offset.assign(static_cast<size_t>(n * w.n_groups), offset);
  w.spec.source = f.scheme == ops::WeightScheme::kFp8 ? (f.group_k == 0 && f.group_n == 1 ? quant::SourceFormat::kFp8Channel
                                                                                         : quant::SourceFormat::kFp8Block)
                  : f.scheme == ops::WeightScheme::kNf4 ? quant::SourceFormat::kNf4
                  : f.scheme == ops::WeightScheme::kInt4 ? quant::SourceFormat::kAwqGemm
                                                          : quant::SourceFormat::kInt8Channel;
  return w;
}

// The slice `sh` of tensor v: rows in place (a view into v), columns copied into `store`.
Result<TensorView> slice_dense(const TensorView& v, const TensorShard& sh, const std::string& name,
                               std::vector<std::vector<uint8_t>>& store) {
  if (sh.axis < 0) return v;
  if (sh.axis >= v.shape.ndim || sh.begin < 0 || sh.count < 0 || sh.begin + sh.count > v.shape[sh.axis])
    return internal_error("shard of '" + name + "' outside its shape " + v.shape.to_string());
  const Shape out_shape = shard_shape(v.shape, sh);
  const int64_t cols = v.shape.ndim == 2 ? v.shape[1] : 1;
  const auto* src = static_cast<const uint8_t*>(v.data);
  if (sh.axis == 0)
    return TensorView{const_cast<uint8_t*>(src) + dtype_bytes(v.dtype, sh.begin * cols), v.dtype, out_shape};
  const int64_t rows = v.shape[0];
  const int64_t row_in = dtype_bytes(v.dtype, cols), row_out = dtype_bytes(v.dtype, sh.count);
  store.emplace_back(static_cast<size_t>(rows * row_out));
  uint8_t* dst = store.back().data();
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * row_out, src + r * row_in + dtype_bytes(v.dtype, sh.begin), static_cast<size_t>(row_out));
  return TensorView{dst, v.dtype, out_shape};
}

// The slice `sh` of a quantized weight: any rows, inputs at multiples of its scale group (the
// codes of a slice keep their scales and offsets). Rows that cut through a scale block (fp8's
// 128-row blocks, or a per-tensor scale, over a rank's heads) get a finer row block that the cut
// respects, gcd(block, first row, rows), each finer block keeping its block's scale: the same
// numbers, a few more scales.
Result<quant::QuantWeight> slice_quant(const quant::QuantWeight& w, const TensorShard& sh, const std::string& name) {
  if (sh.axis < 0) return w;
  const bool rows = sh.axis == 0;
  const int64_t r0 = rows ? sh.begin : 0, nr = rows ? sh.count : w.n;
  const int64_t c0 = rows ? 0 : sh.begin, nc = rows ? w.k : sh.count;
  int64_t row_block = w.row_block;
  if (rows && (r0 % w.row_block != 0 || (nr % w.row_block != 0 && r0 + nr != w.n)))
    row_block = std::gcd(w.row_block, std::gcd(r0, nr));
  const bool per_channel = w.n_groups == 1;
  if (!rows) {
    if (!w.k_perm.empty())
      return unsupported("tensor parallelism: quantized '" + name +
                         "' uses act order (desc_act): splitting its inputs over ranks is not supported");
    if (!per_channel && (c0 % w.group != 0 || nc % w.group != 0))
      return invalid_argument("tensor parallelism: quantized '" + name + "' has groups of " + std::to_string(w.group) +
                              " inputs; inputs [" + std::to_string(c0) + ", " + std::to_string(c0 + nc) +
                              ") do not cut at group boundaries");
  }
  const int64_t group = per_channel ? std::max<int64_t>(nc, 1) : w.group;
  const int64_t group_k = per_channel ? ((nc + quant::kBlock - 1) / quant::kBlock) * quant::kBlock : group;
  quant::QuantWeight o = quant::make_quant_weight(w.kind, nr, nc, group_k, row_block);
  o.spec = w.spec;
  o.lut = w.lut;
  o.name = w.name;
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t j = 0; j < nc; ++j) quant::set_code(o, r, j, quant::get_code(w, r0 + r, c0 + j));
  const int64_t g0 = per_channel ? 0 : c0 / w.group;
  for (int64_t rb = 0; rb < (nr + row_block - 1) / row_block; ++rb)
    for (int64_t g = 0; g < o.n_groups; ++g)
      o.scale[static_cast<size_t>(rb * o.n_groups + g)] =
          w.scale[static_cast<size_t>(((r0 + rb * row_block) / w.row_block) * w.n_groups + g0 + g)];
  if (!w.offset.empty()) {
    o.offset.resize(static_cast<size_t>(nr * o.n_groups));
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t g = 0; g < o.n_groups; ++g)
        o.offset[static_cast<size_t>(r * o.n_groups + g)] = w.offset[static_cast<size_t>((r0 + r) * w.n_groups + g0 + g)];
  }
  return o;
}

}  // namespace

Result<DummyPrecision> parse_dummy_precision(const std::string& s) {
  if (s.empty() || s == "bf16" || s == "f16" || s == "f32" || s == "dense") return DummyPrecision::kDense;
  if (s == "int8") return DummyPrecision::kInt8;
  if (s == "int4") return DummyPrecision::kInt4;
  if (s == "fp8") return DummyPrecision::kFp8;
  if (s == "fp8-channel") return DummyPrecision::kFp8Channel;
  if (s == "nf4") return DummyPrecision::kNf4;
  return invalid_argument("--precision: unknown '" + s + "' (expected bf16, int8, int4, fp8, fp8-channel or nf4)");
}

Result<DummyPrecision> parse_lm_head_precision(const std::string& s) {
  if (s.empty() || s == "bf16" || s == "f16" || s == "f32" || s == "dense") return DummyPrecision::kDense;
  if (s == "int8") return DummyPrecision::kInt8;
  return invalid_argument("--lm-head: unknown '" + s + "' (expected bf16 or int8)");
}

const char* dummy_precision_name(DummyPrecision p) {
  switch (p) {
    case DummyPrecision::kDense: return "dense";
    case DummyPrecision::kInt8: return "int8";
    case DummyPrecision::kInt4: return "int4";
    case DummyPrecision::kFp8: return "fp8";
    case DummyPrecision::kFp8Channel: return "fp8-channel";
    case DummyPrecision::kNf4: return "nf4";
  }
  return "?";
}

ops::WeightFormat dummy_linear_format(DummyPrecision p, DType dtype, int64_t k) {
  switch (p) {
    case DummyPrecision::kDense: break;
    case DummyPrecision::kInt8: return ops::quant_format(ops::WeightScheme::kInt8, k, 0, false, 1);
    case DummyPrecision::kInt4: return ops::quant_format(ops::WeightScheme::kInt4, k, 128, true, 1);
    case DummyPrecision::kFp8: return ops::quant_format(ops::WeightScheme::kFp8, k, 128, false, 128);
    case DummyPrecision::kFp8Channel: return ops::quant_format(ops::WeightScheme::kFp8, k, 0, false, 1);
    case DummyPrecision::kNf4: return ops::quant_format(ops::WeightScheme::kNf4, k, 64, false, 1);
  }
  return ops::dense_format(dtype);
}

void fill_dummy(TensorRole role, DType dtype, uint64_t seed, uint64_t stream, void* out, int64_t n) {
  float mean = 0, std = 0.02f;
  switch (role) {
    case TensorRole::kEmbedding: case TensorRole::kLmHead: case TensorRole::kLinear:
    case TensorRole::kRouter:
      break;
    case TensorRole::kNorm: mean = 1.0f; std = 0.05f; break;
    case TensorRole::kBias: std = 0.01f; break;
    case TensorRole::kRouterBias: std = 0.01f; break;
  }
  const uint64_t key = splitmix64(seed * 0x100000001b3ull ^ splitmix64(stream));
  for (int64_t i = 0; i < n; ++i) {
    const float v = mean + std * approx_normal(splitmix64(key + static_cast<uint64_t>(i)));
    switch (dtype) {
      case DType::kBF16: static_cast<uint16_t*>(out)[i] = f32_to_bf16(v); break;
      case DType::kF16: static_cast<uint16_t*>(out)[i] = f32_to_f16(v); break;
      default: static_cast<float*>(out)[i] = v; break;
    }
  }
}

// Sort key that groups "<p>.{q,k,v}_proj.{weight,bias}" as <p>.qkv.{weight,bias}.{0,1,2},
// "<p>.{gate,up}_proj.weight" as <p>.gate_up.weight.{0,1} and MLA's "<p>.{q_proj or q_a_proj,
// kv_a_proj_with_mqa}" as <p>.qkv.*.{0,1}; other names sort as themselves.
std::string placement_key(const std::string& name) {
  static const std::pair<const char*, const char*> kGroups[] = {
      {"q_proj", "qkv~0"}, {"k_proj", "qkv~1"}, {"v_proj", "qkv~2"}, {"gate_proj", "gate_up~0"}, {"up_proj", "gate_up~1"},
      // MLA (DeepSeek): q_proj, or q_a_proj under q_lora_rank, reads the same input as kv_a.
      {"q_a_proj", "qkv~0"}, {"kv_a_proj_with_mqa", "qkv~1"}};
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return name;
  const size_t dot2 = name.rfind('.', dot - 1);
  if (dot2 == std::string::npos) return name;
  const std::string proj = name.substr(dot2 + 1, dot - dot2 - 1), suffix = name.substr(dot + 1);
  for (const auto& [p, g] : kGroups) {
    if (proj != p) continue;
    const std::string group(g);
    const size_t tilde = group.find('~');
    return name.substr(0, dot2 + 1) + group.substr(0, tilde) + "." + suffix + "." + group.substr(tilde + 1);
  }
  return name;
}

std::optional<Linear> fuse_rows(std::span<const Linear> parts) {
  if (parts.size() < 2) return std::nullopt;
  Linear f = parts[0];
  const bool biased = parts[0].bias != nullptr;
  for (size_t i = 1; i < parts.size(); ++i) {
    const Linear& a = parts[i - 1];
    const Linear& b = parts[i];
    if (b.weight.format != f.weight.format || b.in != f.in || (b.bias != nullptr) != biased) return std::nullopt;
    auto follows = [](const void* p, int64_t bytes, const void* q) {
      return p && q && static_cast<const uint8_t*>(p) + bytes == q;
    };
    const ops::WeightFormat& wf = f.weight.format;
    if (wf.scheme == ops::WeightScheme::kDense) {
      if (!follows(a.weight.data, dtype_bytes(wf.dtype, a.out * a.in), b.weight.data)) return std::nullopt;
    } else {
      // Quantized: codes, scale rows and zero points must each continue the previous part's,
      // scale blocks must not straddle two parts, and one permutation cannot cover two.
      const int64_t groups = ops::weight_groups_k(wf, a.in);
      if (wf.act_order || wf.group_n == 0 || a.out % wf.group_n != 0) return std::nullopt;
      if (wf.layout == ops::WeightLayout::kOutInTiles8 && a.out % 8 != 0) return std::nullopt;  // whole tiles
      if (!follows(a.weight.data, a.out * ops::weight_row_bytes(wf, a.in), b.weight.data) ||
          !follows(a.weight.scales, 4 * ops::weight_scale_rows(wf, a.out) * groups, b.weight.scales))
        return std::nullopt;
      if (wf.zero == ops::ZeroPoint::kOffset && !follows(a.weight.zeros, 4 * a.out * groups, b.weight.zeros))
        return std::nullopt;
    }
    if (biased && (b.bias_dtype != f.bias_dtype ||
                   static_cast<const uint8_t*>(a.bias) + dtype_bytes(a.bias_dtype, a.out) != b.bias))
      return std::nullopt;
    f.out += b.out;
  }
  return f;
}

WeightStore::~WeightStore() = default;

Result<std::unique_ptr<WeightStore>> WeightStore::load(const std::string& dir,
                                                       const std::vector<TensorSpec>& specs,
                                                       ops::Backend* backend,
                                                       std::span<const TensorShard> shards) {
  if (!shards.empty() && shards.size() != specs.size()) return internal_error("weights: one shard per spec expected");
  auto shard_of = [&](size_t i) { return shards.empty() ? TensorShard{} : shards[i]; };
  auto ws = std::unique_ptr<WeightStore>(new WeightStore());
  FRUGAL_ASSIGN_OR_RETURN(ws->files_, SafetensorsSet::open_dir(dir));
  FRUGAL_ASSIGN_OR_RETURN(const std::optional<QuantConfig> qc, read_quant_config(dir));
  std::set<std::string> wanted, consumed, skipped_prefixes;
  HostTensors host;
  int64_t n_quant = 0, n_routers = 0;
  for (size_t si = 0; si < specs.size(); ++si) {
    const TensorSpec& s = specs[si];
    const TensorShard shard = shard_of(si);
    TensorSpec local = s;
    local.shape = shard_shape(s.shape, shard);
    wanted.insert(s.name);
    if (shard.skip) {  // another rank's expert: neither read nor counted (its packed parts neither)
      if (ends_with(s.name, ".weight")) skipped_prefixes.insert(s.name.substr(0, s.name.size() - 7));
      continue;
    }
    if (s.role == TensorRole::kRouter) ++n_routers;
    if (qc && s.shape.ndim == 2 && ends_with(s.name, ".weight") &&
        (s.role == TensorRole::kLinear || s.role == TensorRole::kLmHead || s.role == TensorRole::kRouter)) {
      const std::string prefix = s.name.substr(0, s.name.size() - 7);
      if (is_quantized_linear(*qc, *ws->files_, prefix)) {
        Result<quant::QuantWeight> qw = load_quant_linear(*qc, *ws->files_, prefix);
        if (!qw) return Status(qw.status().code(), describe_files(dir) + ": " + qw.status().message());
        if (qw->n != s.shape[0] || qw->k != s.shape[1])
          return corrupt(describe_files(dir) + ": quantized linear '" + prefix + "' unpacks to [" +
                         std::to_string(qw->n) + ", " + std::to_string(qw->k) + "], config.json implies " +
                         s.shape.to_string());
        for (const auto& name : ws->files_->names())
          if (name.compare(0, prefix.size() + 1, prefix + ".") == 0) consumed.insert(name);
        if (s.role == TensorRole::kLinear || s.role == TensorRole::kLmHead) {
          qw->name = prefix;
          if (shard.axis >= 0) {
            FRUGAL_ASSIGN_OR_RETURN(*qw, slice_quant(*qw, shard, prefix));
          }
          FRUGAL_RETURN_IF_ERROR(ws->add_quant(s.name, std::move(*qw), host));
          ws->count_role(s, ops::weight_format_name(ws->quant_[s.name].format), ws->quant_host_.back()->bytes());
          if (s.role == TensorRole::kLmHead)
            FRUGAL_LOG_INFO("{}: lm_head is stored quantized ({}); it runs in that format", dir,
                            ops::weight_format_name(ws->quant_[s.name].format));
          ++n_quant;
        } else {
          // Routers are never run quantized: dequantized to f32.
          FRUGAL_LOG_WARN("{}: '{}' ({}) is stored quantized in the checkpoint; dequantized to f32 (MoE routers "
                          "are never run quantized)", dir, s.name, tensor_role_name(s.role));
          ws->dequant_host_.push_back(quant::dequantize(*qw));
          FRUGAL_ASSIGN_OR_RETURN(const TensorView v, slice_dense(TensorView{ws->dequant_host_.back().data(), DType::kF32, s.shape},
                                                                  shard, s.name, ws->shard_host_));
          host.emplace_back(s.name, v);
          ws->count_role(s, ops::weight_format_name(ops::dense_format(DType::kF32)), v.nbytes());
        }
        continue;
      }
    }
    const TensorEntry* e = ws->files_->find(s.name);
    if (!e)
      return not_found(describe_files(dir) + ": tensor '" + s.name + "' (" + tensor_role_name(s.role) +
                       ", shape " + s.shape.to_string() + ") is missing");
    if (!(e->shape == s.shape))
      return corrupt(e->file + ": tensor '" + s.name + "' has shape " + e->shape.to_string() +
                     ", config.json implies " + s.shape.to_string());
    if (!is_weight_dtype(e->dtype))
      return unsupported(e->file + ": tensor '" + s.name + "' has dtype " + dtype_safetensors_name(e->dtype) +
                         "; weights must be BF16, F16 or F32");
    FRUGAL_ASSIGN_OR_RETURN(const TensorView v, slice_dense(e->view(), shard, s.name, ws->shard_host_));
    host.emplace_back(s.name, v);
    ws->count_role(local, ops::weight_format_name(ops::dense_format(e->dtype)), v.nbytes());
  }
  if (qc) {
    FRUGAL_LOG_INFO("{}: {} quantized linears; embeddings, norms, biases and a dense lm_head stay as stored", dir, n_quant);
    if (n_routers > 0)
      FRUGAL_LOG_INFO("{}: {} MoE router weights stay precise (routers are never quantized)", dir, n_routers);
  }
  for (const auto& name : ws->files_->names()) {
    if (wanted.count(name) || consumed.count(name) || ignorable(name, specs, wanted)) continue;
    if (const size_t dot = name.rfind('.'); dot != std::string::npos && skipped_prefixes.count(name.substr(0, dot))) continue;
    return invalid_argument(ws->files_->find(name)->file + ": unexpected tensor '" + name +
                            "' (not part of this architecture/config; check config.json)");
  }
  FRUGAL_RETURN_IF_ERROR(ws->place(backend, host));
  return ws;
}

Result<std::unique_ptr<WeightStore>> WeightStore::dummy(const std::vector<TensorSpec>& specs,
                                                        const DummyWeightOptions& opts,
                                                        ops::Backend* backend,
                                                        std::span<const TensorShard> shards) {
  if (!shards.empty() && shards.size() != specs.size()) return internal_error("weights: one shard per spec expected");
  auto shard_of = [&](size_t i) { return shards.empty() ? TensorShard{} : shards[i]; };
  if (!is_weight_dtype(opts.dtype))
    return unsupported(std::string("dummy weights: dtype ") + dtype_name(opts.dtype) + " is not bf16, f16 or f32");
  auto ws = std::unique_ptr<WeightStore>(new WeightStore());
  const bool quantized = opts.precision != DummyPrecision::kDense;
  if (opts.lm_head != DummyPrecision::kDense && opts.lm_head != DummyPrecision::kInt8)
    return invalid_argument(std::string("dummy weights: lm_head format ") + dummy_precision_name(opts.lm_head) +
                            " (expected dense or int8)");
  auto is_quant = [&](const TensorSpec& s) {
    if (s.shape.ndim != 2) return false;
    if (s.role == TensorRole::kLmHead) return opts.lm_head != DummyPrecision::kDense;
    return quantized && s.role == TensorRole::kLinear;
  };
  auto format_of = [&](const TensorSpec& s) {
    return dummy_linear_format(s.role == TensorRole::kLmHead ? opts.lm_head : opts.precision, opts.dtype, s.shape[1]);
  };
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const auto& s : specs) {
    offsets.push_back(total);
    const TensorShard sh = shard_of(offsets.size() - 1);
    if (!is_quant(s) && !sh.skip) total += align_up(dtype_bytes(opts.dtype, shard_shape(s.shape, sh).numel()));
  }
  try {
    ws->dummy_host_ = HostBuffer(static_cast<size_t>(std::max<int64_t>(total, kAlign)));
  } catch (const std::bad_alloc&) {
    return resource_exhausted("dummy weights: cannot allocate " + std::to_string(total) + " bytes of host memory");
  }
  if (!ws->dummy_host_.data()) return resource_exhausted("dummy weights: cannot allocate " + std::to_string(total) + " bytes");
  auto* base = ws->dummy_host_.as<uint8_t>();
  std::vector<std::pair<std::string, TensorView>> host;
  ThreadPool& pool = ThreadPool::global();
  constexpr int64_t kChunk = int64_t{1} << 16;  // elements per task
  for (size_t t = 0; t < specs.size(); ++t) {
    const auto& s = specs[t];
    if (shard_of(t).skip) continue;  // another rank's expert
    if (is_quant(s)) {
      FRUGAL_ASSIGN_OR_RETURN(quant::QuantWeight w,
                              dummy_quant(format_of(s), s.shape[0], s.shape[1],
                                          opts.seed, static_cast<uint64_t>(t)));
      w.name = s.name;
      if (shard_of(t).axis >= 0) {
        FRUGAL_ASSIGN_OR_RETURN(w, slice_quant(w, shard_of(t), s.name));
      }
      FRUGAL_RETURN_IF_ERROR(ws->add_quant(s.name, std::move(w), host));
      ws->count_role(s, ops::weight_format_name(ws->quant_[s.name].format), ws->quant_host_.back()->bytes());
      continue;
    }
    const TensorShard shard = shard_of(t);
    // A sharded tensor is made whole (the same values as unsharded), then cut.
    std::vector<uint8_t> whole(shard.axis >= 0 ? static_cast<size_t>(dtype_bytes(opts.dtype, s.shape.numel())) : 0);
    uint8_t* dst = shard.axis >= 0 ? whole.data() : base + offsets[t];
    const int64_t n = s.shape.numel();
    const int64_t elem_bytes = dtype_bytes(opts.dtype, 1);
    pool.parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t lo = c * kChunk, cnt = std::min(kChunk, n - lo);
        // Each chunk is its own stream so the split does not change the values.
        fill_dummy(s.role, opts.dtype, opts.seed, (static_cast<uint64_t>(t) << 32) + static_cast<uint64_t>(c),
                   dst + lo * elem_bytes, cnt);
      }
    });
    if (shard.axis >= 0) {
      std::vector<std::vector<uint8_t>> tmp;
      FRUGAL_ASSIGN_OR_RETURN(const TensorView v, slice_dense(TensorView{dst, opts.dtype, s.shape}, shard, s.name, tmp));
      std::memcpy(base + offsets[t], v.data, static_cast<size_t>(v.nbytes()));
      host.emplace_back(s.name, TensorView{base + offsets[t], opts.dtype, v.shape});
      ws->count_role(s, ops::weight_format_name(ops::dense_format(opts.dtype)), v.nbytes());
      continue;
    }
    host.emplace_back(s.name, TensorView{dst, opts.dtype, s.shape});
    ws->count_role(s, ops::weight_format_name(ops::dense_format(opts.dtype)), dtype_bytes(opts.dtype, n));
  }
  FRUGAL_RETURN_IF_ERROR(ws->place(backend, host));
  return ws;
}

Status WeightStore::add_quant(const std::string& name, quant::QuantWeight w, HostTensors& host) {
  FRUGAL_ASSIGN_OR_RETURN(const ops::WeightFormat f, quant::weight_format_of(w));
  quant_[name] = QuantLinear{.format = f, .n = w.n, .k = w.k};
  quant_host_.push_back(std::make_unique<quant::QuantWeight>(std::move(w)));
  quant::QuantWeight& q = *quant_host_.back();
  host.emplace_back(name + "#codes", TensorView{q.q.data(), DType::kU8, Shape{static_cast<int64_t>(q.q.size())}});
  host.emplace_back(name + "#scales", TensorView{q.scale.data(), DType::kF32, Shape{static_cast<int64_t>(q.scale.size())}});
  if (!q.offset.empty())
    host.emplace_back(name + "#zeros", TensorView{q.offset.data(), DType::kF32, Shape{static_cast<int64_t>(q.offset.size())}});
  if (!q.k_perm.empty())
    host.emplace_back(name + "#k_perm", TensorView{q.k_perm.data(), DType::kI32, Shape{static_cast<int64_t>(q.k_perm.size())}});
  return {};
}

void WeightStore::count_role(const TensorSpec& s, const std::string& format, int64_t bytes) {
  const std::string role = role_of(s);
  for (auto& r : by_role_)
    if (r.role == role && r.format == format) {
      ++r.n_tensors;
      r.bytes += bytes;
      return;
    }
  by_role_.push_back({.role = role, .format = format, .n_tensors = 1, .bytes = bytes});
  std::stable_sort(by_role_.begin(), by_role_.end(), [](const auto& a, const auto& b) { return a.role < b.role; });
}

Status WeightStore::place(ops::Backend* backend, const std::vector<std::pair<std::string, TensorView>>& host) {
  bytes_ = 0;
  for (const auto& [name, v] : host) bytes_ += v.nbytes();
  if (backend->weights_in_host_memory()) {
    for (const auto& [name, v] : host) tensors_[name] = v;
    return {};
  }
  int64_t total = 0;
  for (const auto& [name, v] : host) total += align_up(v.nbytes());
  FRUGAL_ASSIGN_OR_RETURN(arena_, ops::DeviceBuffer::create(backend, static_cast<size_t>(std::max<int64_t>(total, kAlign))));
  // Place the projections that read the same input next to each other (q, k, v weights, then
  // their biases; gate, up), so the model can run each group as one matmul (fuse_rows).
  std::vector<size_t> order(host.size());
  std::vector<std::string> keys(host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    order[i] = i;
    keys[i] = placement_key(host[i].first);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  int64_t off = 0;
  for (size_t i : order) {
    const auto& [name, v] = host[i];
    void* dst = arena_.as<uint8_t>() + off;
    FRUGAL_RETURN_IF_ERROR(backend->upload(dst, v.data, static_cast<size_t>(v.nbytes())));
    tensors_[name] = TensorView{dst, v.dtype, v.shape};
    off += align_up(v.nbytes());
  }
  FRUGAL_RETURN_IF_ERROR(backend->synchronize());
  // The backend may re-lay each quantized weight's codes for its kernels (CUDA: int4 tiles).
  for (auto& [name, ql] : quant_) {
    const std::optional<ops::WeightView> w = quant_view(name, ql);
    if (!w) continue;
    Result<ops::WeightFormat> f = backend->prepare_weight(*w, ql.n, ql.k);
    if (!f) return Status(f.status().code(), "weights: " + name + ": " + f.status().message());
    ql.format = *f;
  }
  FRUGAL_RETURN_IF_ERROR(backend->synchronize());
  // Device copies are complete: the mmap and host dummy copies are no longer needed.
  files_.reset();
  dummy_host_ = HostBuffer();
  quant_host_.clear();
  dequant_host_.clear();
  shard_host_.clear();
  return {};
}

const TensorView* WeightStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::optional<ops::WeightView> WeightStore::quant_view(const std::string& name, const QuantLinear& ql) const {
  const TensorView* codes = find(name + "#codes");
  const TensorView* scales = find(name + "#scales");
  const TensorView* zeros = find(name + "#zeros");
  const TensorView* perm = find(name + "#k_perm");
  if (!codes || !scales) return std::nullopt;
  return ops::WeightView{.data = codes->data, .format = ql.format, .scales = scales->data,
                         .zeros = zeros ? zeros->data : nullptr,
                         .k_perm = perm ? static_cast<const int32_t*>(perm->data) : nullptr};
}

Result<Linear> WeightStore::linear(const std::string& weight_name, const std::string& bias_name) const {
  Linear l;
  if (auto q = quant_.find(weight_name); q != quant_.end()) {
    const std::optional<ops::WeightView> w = quant_view(weight_name, q->second);
    if (!w) return internal_error("weights: quantized '" + weight_name + "' has no codes or scales");
    l.weight = *w;
    l.out = q->second.n;
    l.in = q->second.k;
    FRUGAL_RETURN_IF_ERROR(ops::check_weight_view(l.weight, weight_name.c_str()));
  } else {
    const TensorView* w = find(weight_name);
    if (!w || w->shape.ndim != 2) return internal_error("weights: no 2-d tensor '" + weight_name + "'");
    l = Linear{.weight = ops::dense_weight(w->data, w->dtype), .out = w->shape[0], .in = w->shape[1]};
  }
  if (const TensorView* b = bias_name.empty() ? nullptr : find(bias_name)) {
    l.bias = b->data;
    l.bias_dtype = b->dtype;
  }
  return l;
}

Result<Norm> WeightStore::norm(const std::string& name) const {
  const TensorView* w = find(name);
  if (!w || w->shape.ndim != 1) return internal_error("weights: no 1-d tensor '" + name + "'");
  return Norm{.weight = w->data, .dtype = w->dtype, .dim = w->shape[0]};
}

Result<Embedding> WeightStore::embedding(const std::string& name) const {
  const TensorView* w = find(name);
  if (!w || w->shape.ndim != 2) return internal_error("weights: no 2-d tensor '" + name + "'");
  return Embedding{.table = w->data, .dtype = w->dtype, .vocab = w->shape[0], .dim = w->shape[1]};
}

}  // namespace frugal::model
