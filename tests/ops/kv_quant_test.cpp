// ops/kv_quant.h, the quantization rule of fp8 and int8 KV caches, against independent oracles:
// core's table-scan e4m3 rounding (every representable value and the midpoints between them)
// and hand-computed int8 cases.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "ops/kv_quant.h"

namespace frugal::ops {
namespace {

TEST(KvQuantTest, E4m3MatchesCoreOnEveryCodeAndMidpoint) {
  for (int b = 0; b < 256; ++b) {
    const auto code = static_cast<uint8_t>(b);
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(kv_e4m3_to_f32(code)));
      continue;
    }
    const float v = f8e4m3_to_f32(code);
    EXPECT_EQ(kv_e4m3_to_f32(code), v) << b;
    EXPECT_EQ(kv_f32_to_e4m3(v), f32_to_f8e4m3(v)) << v;
    // Midpoints to the next magnitude (ties to even) and points just beside them.
    if ((code & 0x7f) < 0x7e) {
      const float next = f8e4m3_to_f32(static_cast<uint8_t>(code + 1));
      for (float x : {(v + next) / 2, std::nextafter((v + next) / 2, 0.0f), std::nextafter((v + next) / 2, 1e9f),
                      -(v + next) / 2})
        EXPECT_EQ(kv_f32_to_e4m3(x), f32_to_f8e4m3(x)) << x;
    }
  }
  EXPECT_EQ(kv_f32_to_e4m3(1000.0f), 0x7e);  // saturates at 448
  EXPECT_EQ(kv_f32_to_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(kv_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(kv_e4m3_to_f32(0x01), 0.001953125f);  // 2^-9, the smallest subnormal
}

TEST(KvQuantTest, Int8HandCases) {
  // Row {0.5, -1.27, 0.2}: scale 1.27 / 127 = 0.01; codes 50, -127, 20.
  const float scale = kv_int8_scale(1.27f);
  EXPECT_FLOAT_EQ(scale, 0.01f);
  EXPECT_EQ(kv_int8_quantize(0.5f, scale), 50);
  EXPECT_EQ(kv_int8_quantize(-1.27f, scale), -127);
  EXPECT_EQ(kv_int8_quantize(0.2f, scale), 20);
  EXPECT_EQ(kv_int8_quantize(0.0f, 0.0f), 0);         // all-zero row
  EXPECT_EQ(kv_int8_quantize(2.0f, 1.0f / 127), 127);  // clamps to the symmetric range
  EXPECT_EQ(kv_int8_quantize(2.5f, 1.0f), 2);          // ties to even
  EXPECT_EQ(kv_int8_quantize(-3.5f, 1.0f), -4);
}

}  // namespace
}  // namespace frugal::ops
