// Random quantized weights on the device for the CUDA tests (cuda_quant_gemm_test, cuda_fused_test):
// codes, scales and zero points of a format, uploaded, and their dequantization on the host in
// double precision (the oracle's weight).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "ops/quant/quant_weight.h"

namespace frugal::cuda::testing {

struct QFormat {
  const char* name;
  quant::CodeKind kind;
  int64_t group;      // 0: per channel
  int64_t row_block;  // fp8 rows per scale
  bool offsets;
};

inline quant::QuantWeight random_weight(const QFormat& f, int64_t n, int64_t k, std::mt19937& rng) {
  const int64_t k_pad = (k + 31) / 32 * 32;
  quant::QuantWeight w = quant::make_quant_weight(f.kind, n, k, f.group > 0 ? f.group : k_pad, f.row_block);
  w.name = "qgemm";
  if (f.kind == quant::CodeKind::kQ4)
    for (int i = 0; i < 16; ++i) w.lut.push_back(static_cast<float>(i));
  if (f.kind == quant::CodeKind::kF8) w.spec.source = quant::SourceFormat::kFp8Block;
  std::uniform_int_distribution<int> code8(-127, 127), code4(0, 15), fp8(0, 0xfe);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      int code = 0;
      switch (f.kind) {
        case quant::CodeKind::kQ8: code = code8(rng); break;
        case quant::CodeKind::kQ4: code = code4(rng); break;
        case quant::CodeKind::kF8:
          do code = fp8(rng) & 0xbf; while ((code & 0x7f) == 0x7f);  // |v| < 2, never NaN
          break;
      }
      quant::set_code(w, r, j, code);
    }
  const float unit = f.kind == quant::CodeKind::kQ8 ? 1.0f / 64 : f.kind == quant::CodeKind::kQ4 ? 1.0f / 8 : 1.0f;
  std::uniform_real_distribution<float> s(0.5f * unit, 1.5f * unit), z(-1.0f, 1.0f);
  for (float& v : w.scale) v = s(rng);
  if (f.offsets) {
    w.offset.resize(static_cast<size_t>(n * w.n_groups));
    for (float& v : w.offset) v = z(rng);
  }
  return w;
}

// A random weight of format f on the device (codes, scales, zero points) and its dequantization
// on the host in double precision (the oracle's weight).
struct DeviceWeight {
  explicit DeviceWeight(quant::QuantWeight qw) : w(std::move(qw)), codes(DType::kU8, static_cast<int64_t>(w.q.size())) {}
  quant::QuantWeight w;
  DevInts dev;
  Tensor codes;
  ops::WeightView view;
  std::vector<float> deq;
};

// dequantize false: deq stays empty (bit-for-bit tests of large weights need no oracle).
inline std::unique_ptr<DeviceWeight> device_weight(const QFormat& f, int64_t n, int64_t k, std::mt19937& rng,
                                                  bool dequantize = true) {
  auto d = std::make_unique<DeviceWeight>(random_weight(f, n, k, rng));
  Result<ops::WeightView> view = quant::weight_view_of(d->w);
  EXPECT_TRUE(view.is_ok()) << view.status().to_string();
  if (!view.is_ok()) return nullptr;
  if (dequantize) d->deq = quant::dequantize(d->w);
  std::memcpy(d->codes.host.data(), d->w.q.data(), d->w.q.size());
  d->codes.to_device();
  d->view = *view;
  d->view.data = d->codes.dev;
  d->view.scales = d->dev.floats(d->w.scale);
  d->view.zeros = d->w.offset.empty() ? nullptr : d->dev.floats(d->w.offset);
  return d;
}

}  // namespace frugal::cuda::testing
