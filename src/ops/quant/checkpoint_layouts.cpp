#include "ops/quant/checkpoint_layouts.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace frugal::quant {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t numel(const RawTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

Status require(const RawTensor* t, const std::string& prefix, const char* field, const char* why) {
  if (t == nullptr || t->data == nullptr)
    return not_found("tensor " + prefix + "." + field + " is missing (" + why + ")");
  return Status::ok();
}

Status check_dtype(const RawTensor& t, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype == d) return Status::ok();
  std::string want;
  for (DType d : allowed) want += (want.empty() ? "" : " or ") + std::string(dtype_safetensors_name(d));
  return invalid_argument("tensor " + t.name + ": dtype " + dtype_safetensors_name(t.dtype) +
                          ", expected " + want);
}

Status check_shape(const RawTensor& t, const std::vector<int64_t>& want, const std::string& why) {
  if (t.shape == want) return Status::ok();
  return invalid_argument("tensor " + t.name + ": shape " + shape_str(t.shape) + ", expected " +
                          shape_str(want) + " (" + why + ")");
}

float read_float(const RawTensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  switch (t.dtype) {
    case DType::kF16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); return f16_to_f32(h); }
    case DType::kBF16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); return bf16_to_f32(h); }
    default: { float f; std::memcpy(&f, p + 4 * i, 4); return f; }
  }
}

uint32_t read_u32(const RawTensor& t, int64_t i) {
  uint32_t u;
  std::memcpy(&u, static_cast<const uint8_t*>(t.data) + 4 * i, 4);
  return u;
}

int64_t read_index(const RawTensor& t, int64_t i) {
  if (t.dtype == DType::kI64) {
    int64_t v;
    std::memcpy(&v, static_cast<const uint8_t*>(t.data) + 8 * i, 8);
    return v;
  }
  return static_cast<int32_t>(read_u32(t, i));
}

// Scales must be finite: a NaN scale would silently poison every output of its group.
Status check_scales(const RawTensor& t) {
  for (int64_t i = 0; i < numel(t); ++i)
    if (!std::isfinite(read_float(t, i)))
      return invalid_argument("tensor " + t.name + ": element " + std::to_string(i) +
                              " is not finite");
  return Status::ok();
}

// Resolves group_size (-1 = per channel) against k and the internal block constraint.
Result<int64_t> resolve_group(const std::string& prefix, const char* method, int64_t group_size,
                              int64_t k) {
  const int64_t g = group_size == -1 ? k : group_size;
  if (g <= 0 || k % g != 0)
    return invalid_argument(std::string(method) + " quantization_config.group_size = " +
                            std::to_string(group_size) + " does not divide in_features " +
                            std::to_string(k) + " of " + prefix);
  if (g % kBlock != 0 && g != k)
    return unsupported(std::string(method) + " quantization_config.group_size = " +
                       std::to_string(group_size) + " of " + prefix +
                       " is not supported (a multiple of 32, or -1 for per channel)");
  return g;
}

#define FRUGAL_TRY(expr)                  \
  do {                                    \
    Status _s = (expr);                   \
    if (!_s.is_ok()) return _s;           \
  } while (0)

// AutoAWQ's nibble order: nibble f of a word holds output 8c + kAwqOrder[f].
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

}  // namespace

Result<QuantWeight> from_awq_gemm(const AwqConfig& c, const RawTensor* qweight,
                                  const RawTensor* qzeros, const RawTensor* scales) {
  if (c.bits != 4)
    return unsupported("awq quantization_config.bits = " + std::to_string(c.bits) + " of " +
                       c.prefix + " is not supported (4 only)");
  if (!c.zero_point)
    return unsupported("awq quantization_config.zero_point = false of " + c.prefix +
                       " is not supported");
  FRUGAL_TRY(require(qweight, c.prefix, "qweight", "awq"));
  FRUGAL_TRY(require(qzeros, c.prefix, "qzeros", "awq with zero_point"));
  FRUGAL_TRY(require(scales, c.prefix, "scales", "awq"));
  FRUGAL_TRY(check_dtype(*qweight, {DType::kI32}));
  FRUGAL_TRY(check_dtype(*qzeros, {DType::kI32}));
  FRUGAL_TRY(check_dtype(*scales, {DType::kF16, DType::kBF16, DType::kF32}));
  if (qweight->shape.size() != 2 || qweight->shape[0] <= 0 || qweight->shape[1] <= 0)
    return invalid_argument("tensor " + qweight->name + ": shape " + shape_str(qweight->shape) +
                            ", expected [in_features, out_features / 8]");
  const int64_t k = qweight->shape[0], n = qweight->shape[1] * 8;
  Result<int64_t> g = resolve_group(c.prefix, "awq", c.group_size, k);
  if (!g) return g.status();
  const int64_t ng = k / *g;
  FRUGAL_TRY(check_shape(*scales, {ng, n}, "[in/group, out] for awq"));
  FRUGAL_TRY(check_shape(*qzeros, {ng, n / 8}, "[in/group, out/8] for awq"));
  FRUGAL_TRY(check_scales(*scales));

  QuantWeight w = make_quant_weight(CodeKind::kQ4, n, k, *g, 1);
  w.name = c.prefix;
  w.spec = QuantSpec{.source = SourceFormat::kAwqGemm, .bits = 4, .group_size = *g,
                     .symmetric = false, .act_order = false, .scale_dtype = scales->dtype};
  w.lut.resize(16);
  std::iota(w.lut.begin(), w.lut.end(), 0.0f);
  w.offset.assign(static_cast<size_t>(n * ng), 0.0f);
  for (int64_t gi = 0; gi < ng; ++gi)
    for (int64_t word = 0; word < n / 8; ++word) {
      const uint32_t z = read_u32(*qzeros, gi * (n / 8) + word);
      for (int f = 0; f < 8; ++f) {
        const int64_t o = word * 8 + kAwqOrder[f];
        const float s = read_float(*scales, gi * n + o);
        w.scale[static_cast<size_t>(o * ng + gi)] = s;
        w.offset[static_cast<size_t>(o * ng + gi)] = -s * static_cast<float>((z >> (4 * f)) & 0xf);
      }
    }
  for (int64_t i = 0; i < k; ++i)
    for (int64_t word = 0; word < n / 8; ++word) {
      const uint32_t q = read_u32(*qweight, i * (n / 8) + word);
      for (int f = 0; f < 8; ++f) set_code(w, word * 8 + kAwqOrder[f], i, (q >> (4 * f)) & 0xf);
    }
  return w;
}

Result<QuantWeight> from_gptq(const GptqConfig& c, const RawTensor* qweight,
                              const RawTensor* qzeros, const RawTensor* scales,
                              const RawTensor* g_idx) {
  if (c.bits != 4 && c.bits != 8)
    return unsupported("gptq quantization_config.bits = " + std::to_string(c.bits) + " of " +
                       c.prefix + " is not supported (4 or 8)");
  FRUGAL_TRY(require(qweight, c.prefix, "qweight", "gptq"));
  FRUGAL_TRY(require(qzeros, c.prefix, "qzeros", "gptq"));
  FRUGAL_TRY(require(scales, c.prefix, "scales", "gptq"));
  if (c.desc_act) FRUGAL_TRY(require(g_idx, c.prefix, "g_idx", "gptq with desc_act = true"));
  FRUGAL_TRY(check_dtype(*qweight, {DType::kI32}));
  FRUGAL_TRY(check_dtype(*qzeros, {DType::kI32}));
  FRUGAL_TRY(check_dtype(*scales, {DType::kF16, DType::kBF16, DType::kF32}));
  const int per = 32 / c.bits;
  if (qweight->shape.size() != 2 || qweight->shape[0] <= 0 || qweight->shape[1] <= 0)
    return invalid_argument("tensor " + qweight->name + ": shape " + shape_str(qweight->shape) +
                            ", expected [in_features * bits / 32, out_features]");
  const int64_t k = qweight->shape[0] * per, n = qweight->shape[1];
  if (n % per != 0)
    return invalid_argument("tensor " + qweight->name + ": out_features " + std::to_string(n) +
                            " is not a multiple of " + std::to_string(per) +
                            " (qzeros packs that many per int32)");
  Result<int64_t> g = resolve_group(c.prefix, "gptq", c.group_size, k);
  if (!g) return g.status();
  const int64_t ng = k / *g;
  FRUGAL_TRY(check_shape(*scales, {ng, n}, "[in/group, out] for gptq"));
  FRUGAL_TRY(check_shape(*qzeros, {ng, n / per}, "[in/group, out*bits/32] for gptq"));
  FRUGAL_TRY(check_scales(*scales));

  // Group of each input row; act order sorts inputs by group (stable) so groups are contiguous.
  std::vector<int64_t> group_of(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) group_of[static_cast<size_t>(i)] = i / *g;
  bool permuted = false;
  if (g_idx != nullptr && g_idx->data != nullptr) {
    FRUGAL_TRY(check_dtype(*g_idx, {DType::kI32, DType::kI64}));
    FRUGAL_TRY(check_shape(*g_idx, {k}, "[in_features] for gptq"));
    std::vector<int64_t> count(static_cast<size_t>(ng), 0);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t v = read_index(*g_idx, i);
      if (v < 0 || v >= ng)
        return invalid_argument("tensor " + g_idx->name + ": element " + std::to_string(i) +
                                " = " + std::to_string(v) + " is outside [0, " +
                                std::to_string(ng) + ")");
      ++count[static_cast<size_t>(v)];
      group_of[static_cast<size_t>(i)] = v;
      if (v != i / *g) permuted = true;
    }
    for (int64_t gi = 0; gi < ng; ++gi)
      if (count[static_cast<size_t>(gi)] != *g)
        return invalid_argument("tensor " + g_idx->name + ": group " + std::to_string(gi) +
                                " has " + std::to_string(count[static_cast<size_t>(gi)]) +
                                " inputs, expected group_size " + std::to_string(*g));
  }
  std::vector<int32_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  if (permuted)
    std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) {
      return group_of[static_cast<size_t>(a)] < group_of[static_cast<size_t>(b)];
    });

  const CodeKind kind = c.bits == 4 ? CodeKind::kQ4 : CodeKind::kQ8;
  QuantWeight w = make_quant_weight(kind, n, k, *g, 1);
  w.name = c.prefix;
  w.spec = QuantSpec{.source = SourceFormat::kGptq, .bits = c.bits, .group_size = *g,
                     .symmetric = c.sym, .act_order = permuted, .scale_dtype = scales->dtype};
  if (permuted) w.k_perm = perm;
  if (kind == CodeKind::kQ4) {
    w.lut.resize(16);
    std::iota(w.lut.begin(), w.lut.end(), 0.0f);
  }
  // 8-bit codes are stored as int8 (q - 128); the 128 moves into the offset.
  const int bias = c.bits == 8 ? 128 : 0;
  const uint32_t mask = (1u << c.bits) - 1;
  w.offset.assign(static_cast<size_t>(n * ng), 0.0f);
  for (int64_t gi = 0; gi < ng; ++gi)
    for (int64_t o = 0; o < n; ++o) {
      const uint32_t word = read_u32(*qzeros, gi * (n / per) + o / per);
      // Classic GPTQ stores zero - 1 and adds the 1 back after unpacking, without masking.
      const int zero = static_cast<int>((word >> (c.bits * (o % per))) & mask) + (c.zeros_v2 ? 0 : 1);
      const float s = read_float(*scales, gi * n + o);
      w.scale[static_cast<size_t>(o * ng + gi)] = s;
      w.offset[static_cast<size_t>(o * ng + gi)] = s * static_cast<float>(bias - zero);
    }
  for (int64_t j = 0; j < k; ++j) {
    const int64_t i = perm[static_cast<size_t>(j)];  // original input row
    for (int64_t o = 0; o < n; ++o) {
      const uint32_t word = read_u32(*qweight, (i / per) * n + o);
      set_code(w, o, j, static_cast<int>((word >> (c.bits * (i % per))) & mask) - bias);
    }
  }
  return w;
}

namespace {

Status check_fp8_weight(const std::string& prefix, const RawTensor* weight) {
  FRUGAL_TRY(require(weight, prefix, "weight", "fp8"));
  FRUGAL_TRY(check_dtype(*weight, {DType::kF8E4M3}));
  if (weight->shape.size() != 2 || weight->shape[0] <= 0 || weight->shape[1] <= 0)
    return invalid_argument("tensor " + weight->name + ": shape " + shape_str(weight->shape) +
                            ", expected [out_features, in_features]");
  const auto* p = static_cast<const uint8_t*>(weight->data);
  for (int64_t i = 0; i < numel(*weight); ++i)
    if ((p[i] & 0x7f) == 0x7f)
      return invalid_argument("tensor " + weight->name + ": element " + std::to_string(i) +
                              " is an F8_E4M3 NaN");
  return Status::ok();
}

}  // namespace

Result<QuantWeight> from_fp8(const Fp8Config& c, const RawTensor* weight, const RawTensor* scale) {
  FRUGAL_TRY(check_fp8_weight(c.prefix, weight));
  const bool block = c.scaling == Fp8Scaling::kBlock;
  FRUGAL_TRY(require(scale, c.prefix, block ? "weight_scale_inv" : "weight_scale", "fp8"));
  FRUGAL_TRY(check_dtype(*scale, {DType::kF32, DType::kBF16, DType::kF16}));
  const int64_t n = weight->shape[0], k = weight->shape[1];
  int64_t row_block = 1, group = k;
  SourceFormat src = SourceFormat::kFp8Channel;
  switch (c.scaling) {
    case Fp8Scaling::kTensor:
      if (numel(*scale) != 1)
        return invalid_argument("tensor " + scale->name + ": shape " + shape_str(scale->shape) +
                                ", expected one element (per-tensor scale)");
      row_block = n;
      src = SourceFormat::kFp8Tensor;
      break;
    case Fp8Scaling::kChannel:
      if (scale->shape != std::vector<int64_t>{n, 1} && scale->shape != std::vector<int64_t>{n})
        return invalid_argument("tensor " + scale->name + ": shape " + shape_str(scale->shape) +
                                ", expected [" + std::to_string(n) + ", 1] (per-channel scale)");
      break;
    case Fp8Scaling::kBlock: {
      if (c.block_n <= 0 || c.block_k <= 0)
        return invalid_argument("fp8 quantization_config.weight_block_size of " + c.prefix +
                                " must be positive");
      if (c.block_k % kBlock != 0)
        return unsupported("fp8 quantization_config.weight_block_size[1] = " +
                           std::to_string(c.block_k) + " of " + c.prefix +
                           " is not supported (a multiple of 32)");
      const int64_t nb = (n + c.block_n - 1) / c.block_n, kb = (k + c.block_k - 1) / c.block_k;
      FRUGAL_TRY(check_shape(*scale, {nb, kb}, "[ceil(out/block_n), ceil(in/block_k)]"));
      row_block = c.block_n;
      group = c.block_k;
      src = SourceFormat::kFp8Block;
      break;
    }
  }
  FRUGAL_TRY(check_scales(*scale));
  QuantWeight w = make_quant_weight(CodeKind::kF8, n, k, group, row_block);
  w.name = c.prefix;
  w.spec = QuantSpec{.source = src, .bits = 8, .group_size = group, .symmetric = true,
                     .act_order = false, .scale_dtype = scale->dtype, .block_n = row_block};
  for (size_t i = 0; i < w.scale.size(); ++i) w.scale[i] = read_float(*scale, static_cast<int64_t>(i));
  const auto* p = static_cast<const uint8_t*>(weight->data);
  for (int64_t r = 0; r < n; ++r) std::memcpy(w.q.data() + r * w.ld_q(), p + r * k, static_cast<size_t>(k));
  return w;
}

Result<QuantWeight> from_int8_channel(const std::string& prefix, const RawTensor* weight,
                                      const RawTensor* weight_scale) {
  FRUGAL_TRY(require(weight, prefix, "weight", "int8"));
  FRUGAL_TRY(require(weight_scale, prefix, "weight_scale", "int8"));
  FRUGAL_TRY(check_dtype(*weight, {DType::kI8}));
  FRUGAL_TRY(check_dtype(*weight_scale, {DType::kF32, DType::kBF16, DType::kF16}));
  if (weight->shape.size() != 2 || weight->shape[0] <= 0 || weight->shape[1] <= 0)
    return invalid_argument("tensor " + weight->name + ": shape " + shape_str(weight->shape) +
                            ", expected [out_features, in_features]");
  const int64_t n = weight->shape[0], k = weight->shape[1];
  if (weight_scale->shape != std::vector<int64_t>{n, 1} && weight_scale->shape != std::vector<int64_t>{n})
    return invalid_argument("tensor " + weight_scale->name + ": shape " +
                            shape_str(weight_scale->shape) + ", expected [" + std::to_string(n) +
                            ", 1] (per-channel scale)");
  FRUGAL_TRY(check_scales(*weight_scale));
  QuantWeight w = make_quant_weight(CodeKind::kQ8, n, k, k, 1);
  w.name = prefix;
  w.spec = QuantSpec{.source = SourceFormat::kInt8Channel, .bits = 8, .group_size = k,
                     .symmetric = true, .act_order = false, .scale_dtype = weight_scale->dtype};
  for (int64_t r = 0; r < n; ++r) w.scale[static_cast<size_t>(r)] = read_float(*weight_scale, r);
  const auto* p = static_cast<const uint8_t*>(weight->data);
  for (int64_t r = 0; r < n; ++r) std::memcpy(w.q.data() + r * w.ld_q(), p + r * k, static_cast<size_t>(k));
  return w;
}

Result<QuantWeight> from_nf4(const Nf4Config& c, const RawTensor* weight, const RawTensor* absmax,
                             const RawTensor* quant_map) {
  FRUGAL_TRY(require(weight, c.prefix, "weight", "nf4"));
  FRUGAL_TRY(require(absmax, c.prefix, "weight.absmax", "nf4"));
  FRUGAL_TRY(check_dtype(*weight, {DType::kU8}));
  FRUGAL_TRY(check_dtype(*absmax, {DType::kF32}));
  if (c.n <= 0 || c.k <= 0)
    return invalid_argument("nf4 quant_state.shape of " + c.prefix + " must be two positive sizes");
  if (c.blocksize <= 0 || c.k % c.blocksize != 0 || c.blocksize % kBlock != 0)
    return unsupported("nf4 quant_state.blocksize = " + std::to_string(c.blocksize) + " of " +
                       c.prefix + " is not supported (a multiple of 32 dividing in_features " +
                       std::to_string(c.k) + ")");
  const int64_t total = c.n * c.k;
  if (numel(*weight) != (total + 1) / 2)
    return invalid_argument("tensor " + weight->name + ": shape " + shape_str(weight->shape) +
                            " holds " + std::to_string(numel(*weight)) + " bytes, expected " +
                            std::to_string((total + 1) / 2) + " for quant_state.shape [" +
                            std::to_string(c.n) + ", " + std::to_string(c.k) + "]");
  FRUGAL_TRY(check_shape(*absmax, {total / c.blocksize}, "[out*in/blocksize] for nf4"));
  FRUGAL_TRY(check_scales(*absmax));
  QuantWeight w = make_quant_weight(CodeKind::kQ4, c.n, c.k, c.blocksize, 1);
  w.name = c.prefix;
  w.spec = QuantSpec{.source = SourceFormat::kNf4, .bits = 4, .group_size = c.blocksize,
                     .symmetric = true, .act_order = false, .scale_dtype = DType::kF32};
  w.lut.assign(kNf4Table, kNf4Table + 16);
  if (quant_map != nullptr && quant_map->data != nullptr) {
    FRUGAL_TRY(check_dtype(*quant_map, {DType::kF32}));
    FRUGAL_TRY(check_shape(*quant_map, {16}, "16 code values for nf4"));
    FRUGAL_TRY(check_scales(*quant_map));
    for (int i = 0; i < 16; ++i) w.lut[static_cast<size_t>(i)] = read_float(*quant_map, i);
  }
  for (size_t i = 0; i < w.scale.size(); ++i) w.scale[i] = read_float(*absmax, static_cast<int64_t>(i));
  const auto* p = static_cast<const uint8_t*>(weight->data);
  for (int64_t f = 0; f < total; ++f) {
    const uint8_t byte = p[f / 2];
    set_code(w, f / c.k, f % c.k, (f % 2 == 0) ? (byte >> 4) : (byte & 0xf));
  }
  return w;
}

}  // namespace frugal::quant
