#include "ops/quant/quant_weight.h"

#include <cstring>

#include "core/status.h"

namespace frugal::quant {

const float kNf4Table[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

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
  return static_cast<int64_t>(q.size() + 4 * (scale.size() + offset.size() + lut.size() +
                                              k_perm.size()));
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
