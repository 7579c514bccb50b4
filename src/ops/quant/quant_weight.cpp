#include "ops/quant/quant_weight.h"

#include <algorithm>
#include <cstring>

#include "core/status.h"

namespace frugal::quant {

const float kNf4Table[16] = {FRUGAL_NF4_CODEBOOK};

const char* source_format_name(SourceFormat f) {
  switch (f) {
    case SourceFormat::kInt8Channel: return "int8-channel";
    case SourceFormat::kAwqGemm: return "awq-gemm";
    case SourceFormat::kGptq: return "gptq";
    case SourceFormat::kFp8Tensor: return "fp8-tensor";
    case SourceFormat::kFp8Channel: return "fp8-channel";
    case SourceFormat::kFp8Block: return "fp8-block";
    case SourceFormat::kNf4: return "nf4";
  }
  return "?";
}

QuantWeightView QuantWeight::view() const {
  return QuantWeightView{
      .kind = kind, .n = n, .k = k, .k_pad = k_pad, .ld_q = ld_q(), .group = group,
      .n_groups = n_groups, .row_block = row_block, .q = q.data(), .scale = scale.data(),
      .offset = offset.empty() ? nullptr : offset.data(),
      .lut = lut.empty() ? nullptr : lut.data(),
      .lut_is_identity = kind == CodeKind::kQ4 && [&] {
        for (int c = 0; c < 16; ++c)
          if (lut[static_cast<size_t>(c)] != static_cast<float>(c)) return false;
        return true;
      }(),
      .k_perm = k_perm.empty() ? nullptr : k_perm.data()};
}

int64_t QuantWeight::bytes() const {
  return static_cast<int64_t>(q.size() + 4 * (scale.size() + offset.size() +
                                              k_perm.size()));
}

namespace {
const float kIdentityLut[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
}  // namespace

Result<ops::WeightFormat> weight_format_of(const QuantWeight& w) {
  ops::WeightFormat f;
  f.layout = ops::WeightLayout::kOutIn;
  f.scale_dtype = DType::kF32;
  f.zero_dtype = DType::kF32;
  f.group_k = w.group >= w.k ? 0 : static_cast<int32_t>(w.group);
  f.group_n = 1;
  switch (w.kind) {
    case CodeKind::kQ8: f.scheme = ops::WeightScheme::kInt8; f.dtype = DType::kI8; break;
    case CodeKind::kF8:
      f.scheme = ops::WeightScheme::kFp8;
      f.dtype = DType::kF8E4M3;
      f.group_n = w.spec.source == SourceFormat::kFp8Tensor && w.row_block >= w.n ? 0 : static_cast<int32_t>(w.row_block);
      break;
    case CodeKind::kQ4: {
      f.dtype = DType::kI4;
      f.packing = ops::WeightPacking::kBlock32Nibbles;
      bool identity = w.lut.size() == 16, nf4 = w.lut.size() == 16;
      for (size_t c = 0; c < w.lut.size() && c < 16; ++c) {
        identity = identity && w.lut[c] == static_cast<float>(c);
        nf4 = nf4 && w.lut[c] == ops::kNf4Codebook[c];
      }
      if (identity) {
        f.scheme = ops::WeightScheme::kInt4;
      } else if (nf4) {
        f.scheme = ops::WeightScheme::kNf4;
      } else {
        return unsupported(w.name + ": its 4-bit code table (nf4 weight.quant_map) is neither the NF4 code book nor "
                           "the integers 0..15; no weight format describes it");
      }
      break;
    }
  }
  if (w.kind != CodeKind::kF8 && w.row_block != 1)
    return internal_error(w.name + ": integer scales shared by " + std::to_string(w.row_block) + " rows");
  if (!w.offset.empty()) f.zero = ops::ZeroPoint::kOffset;
  f.act_order = !w.k_perm.empty();
  return f;
}

Result<ops::WeightView> weight_view_of(const QuantWeight& w) {
  FRUGAL_ASSIGN_OR_RETURN(const ops::WeightFormat f, weight_format_of(w));
  ops::WeightView v;
  v.data = w.q.data();
  v.format = f;
  v.scales = w.scale.data();
  v.zeros = w.offset.empty() ? nullptr : w.offset.data();
  v.k_perm = w.k_perm.empty() ? nullptr : w.k_perm.data();
  return v;
}

QuantWeightView kernel_view(const ops::WeightView& w, int64_t n, int64_t k) {
  const ops::WeightFormat& f = w.format;
  QuantWeightView v{};
  v.kind = f.scheme == ops::WeightScheme::kInt8 ? CodeKind::kQ8 : f.scheme == ops::WeightScheme::kFp8 ? CodeKind::kF8 : CodeKind::kQ4;
  v.n = n;
  v.k = k;
  v.k_pad = (k + kBlock - 1) / kBlock * kBlock;
  v.ld_q = v.kind == CodeKind::kQ4 ? v.k_pad / 2 : v.k_pad;
  v.group = f.group_k > 0 ? f.group_k : std::max<int64_t>(v.k_pad, 1);
  v.n_groups = (k + v.group - 1) / v.group;
  v.row_block = f.group_n > 0 ? f.group_n : std::max<int64_t>(n, 1);
  v.q = static_cast<const uint8_t*>(w.data);
  v.scale = static_cast<const float*>(w.scales);
  v.offset = static_cast<const float*>(w.zeros);
  v.lut = f.scheme == ops::WeightScheme::kNf4 ? ops::kNf4Codebook : f.scheme == ops::WeightScheme::kInt4 ? kIdentityLut : nullptr;
  v.lut_is_identity = f.scheme == ops::WeightScheme::kInt4;
  v.k_perm = w.k_perm;
  return v;
}

QuantWeight make_quant_weight(CodeKind kind, int64_t n, int64_t k, int64_t group,
                              int64_t row_block) {
  QuantWeight w;
  w.kind = kind;
  w.n = n;
  w.k = k;
  w.k_pad = (k + kBlock - 1) / kBlock * kBlock;
  w.group = group;
  w.n_groups = (k + group - 1) / group;
  w.row_block = row_block;
  FRUGAL_CHECK_MSG(group % kBlock == 0 || group >= k, "quant group must be whole blocks");
  w.q.assign(static_cast<size_t>(n * w.ld_q()), 0);
  w.scale.assign(static_cast<size_t>((n + row_block - 1) / row_block * w.n_groups), 0.0f);
  return w;
}

void set_code(QuantWeight& w, int64_t r, int64_t j, int code) {
  uint8_t* row = w.q.data() + r * w.ld_q();
  if (w.kind != CodeKind::kQ4) {
    row[j] = static_cast<uint8_t>(code);
    return;
  }
  const int64_t b = j / kBlock, i = j % kBlock;
  uint8_t& byte = row[b * (kBlock / 2) + (i % 16)];
  if (i < 16)
    byte = static_cast<uint8_t>((byte & 0xf0) | (code & 0xf));
  else
    byte = static_cast<uint8_t>((byte & 0x0f) | (code & 0xf) << 4);
}

int get_code(const QuantWeight& w, int64_t r, int64_t j) {
  const uint8_t* row = w.q.data() + r * w.ld_q();
  switch (w.kind) {
    case CodeKind::kQ8: return static_cast<int8_t>(row[j]);
    case CodeKind::kF8: return row[j];
    case CodeKind::kQ4: {
      const int64_t b = j / kBlock, i = j % kBlock;
      const uint8_t byte = row[b * (kBlock / 2) + (i % 16)];
      return i < 16 ? (byte & 0xf) : (byte >> 4);
    }
  }
  return 0;
}

std::vector<float> dequantize(const QuantWeight& w) {
  std::vector<float> out(static_cast<size_t>(w.n * w.k));
  for (int64_t r = 0; r < w.n; ++r) {
    for (int64_t j = 0; j < w.k; ++j) {
      const int c = get_code(w, r, j);
      double v = 0;
      switch (w.kind) {
        case CodeKind::kQ8: v = c; break;
        case CodeKind::kQ4: v = w.lut[static_cast<size_t>(c)]; break;
        case CodeKind::kF8: v = f8e4m3_to_f32(static_cast<uint8_t>(c)); break;
      }
      const int64_t g = j / w.group;
      double x = static_cast<double>(w.scale[static_cast<size_t>((r / w.row_block) * w.n_groups + g)]) * v;
      if (!w.offset.empty()) x += w.offset[static_cast<size_t>(r * w.n_groups + g)];
      const int64_t col = w.k_perm.empty() ? j : w.k_perm[static_cast<size_t>(j)];
      out[static_cast<size_t>(r * w.k + col)] = static_cast<float>(x);
    }
  }
  return out;
}

}  // namespace frugal::quant
