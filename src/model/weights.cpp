#include "model/weights.h"

#include <new>
#include <algorithm>
#include <cmath>
#include <set>

#include "core/thread_pool.h"

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

}  // namespace

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

// Sort key that groups "<p>.{q,k,v}_proj.{weight,bias}" as <p>.qkv.{weight,bias}.{0,1,2} and
// "<p>.{gate,up}_proj.weight" as <p>.gate_up.weight.{0,1}; other names sort as themselves.
std::string placement_key(const std::string& name) {
  static const std::pair<const char*, const char*> kGroups[] = {
      {"q_proj", "qkv~0"}, {"k_proj", "qkv~1"}, {"v_proj", "qkv~2"}, {"gate_proj", "gate_up~0"}, {"up_proj", "gate_up~1"}};
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
    if (f.weight.format.scheme != ops::WeightScheme::kDense) return std::nullopt;
    if (static_cast<const uint8_t*>(a.weight.data) + dtype_bytes(a.weight.format.dtype, a.out * a.in) != b.weight.data)
      return std::nullopt;
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
                                                       ops::Backend* backend) {
  auto ws = std::unique_ptr<WeightStore>(new WeightStore());
  FRUGAL_ASSIGN_OR_RETURN(ws->files_, SafetensorsSet::open_dir(dir));
  std::set<std::string> wanted;
  std::vector<std::pair<std::string, TensorView>> host;
  for (const auto& s : specs) {
    wanted.insert(s.name);
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
    host.emplace_back(s.name, e->view());
  }
  for (const auto& name : ws->files_->names()) {
    if (wanted.count(name) || ignorable(name, specs, wanted)) continue;
    return invalid_argument(ws->files_->find(name)->file + ": unexpected tensor '" + name +
                            "' (not part of this architecture/config; check config.json)");
  }
  FRUGAL_RETURN_IF_ERROR(ws->place(backend, host));
  return ws;
}

Result<std::unique_ptr<WeightStore>> WeightStore::dummy(const std::vector<TensorSpec>& specs,
                                                        const DummyWeightOptions& opts,
                                                        ops::Backend* backend) {
  if (!is_weight_dtype(opts.dtype))
    return unsupported(std::string("dummy weights: dtype ") + dtype_name(opts.dtype) + " is not bf16, f16 or f32");
  auto ws = std::unique_ptr<WeightStore>(new WeightStore());
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const auto& s : specs) {
    offsets.push_back(total);
    total += align_up(dtype_bytes(opts.dtype, s.shape.numel()));
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
    uint8_t* dst = base + offsets[t];
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
    host.emplace_back(s.name, TensorView{dst, opts.dtype, s.shape});
  }
  FRUGAL_RETURN_IF_ERROR(ws->place(backend, host));
  return ws;
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
  // Device copies are complete: the mmap and host dummy copies are no longer needed.
  files_.reset();
  dummy_host_ = HostBuffer();
  return {};
}

const TensorView* WeightStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<Linear> WeightStore::linear(const std::string& weight_name, const std::string& bias_name) const {
  const TensorView* w = find(weight_name);
  if (!w || w->shape.ndim != 2) return internal_error("weights: no 2-d tensor '" + weight_name + "'");
  Linear l{.weight = ops::dense_weight(w->data, w->dtype), .out = w->shape[0], .in = w->shape[1]};
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
