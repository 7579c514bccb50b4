// Checkpoint-layout converters against cases packed by hand in this file from the published
// layouts (AutoAWQ GEMM, GPTQ v1/v2 with act order, compressed-tensors FP8/INT8, DeepSeek FP8
// blocks, bitsandbytes NF4), independent of the converters' unpacking; plus every bad-input
// error (the tensor and field named, never a crash).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/quant/checkpoint_layouts.h"

namespace frugal::quant {
namespace {

bool mentions(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

template <class T>
RawTensor raw(const std::string& name, DType dt, std::vector<int64_t> shape, const std::vector<T>& v) {
  return RawTensor{.name = name, .dtype = dt, .shape = std::move(shape), .data = v.data()};
}

// Scales exactly representable in f16: halves and quarters.
uint16_t h(float f) { return f32_to_f16(f); }

// ------------------------------------------------------------------ AWQ

// AutoAWQ GEMM: 8 outputs per int32, nibble f (bits 4f..4f+3) holds output {0,2,4,6,1,3,5,7}[f].
uint32_t awq_word(const int* q8) {  // q8[o] = code of output o (0..7) in this word
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  uint32_t w = 0;
  for (int f = 0; f < 8; ++f) w |= static_cast<uint32_t>(q8[order[f]]) << (4 * f);
  return w;
}

TEST(AwqLayout, HandPackedWord) {
  const int q[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(awq_word(q), 0x75316420u);  // the interleaved order, written out
}

TEST(AwqLayout, DequantizesAsPublished) {
  const int64_t n = 8, k = 64, g = 32, ng = 2;
  auto code = [](int64_t i, int64_t o) { return static_cast<int>((i * 5 + o * 3) % 16); };
  auto zero = [](int64_t gi, int64_t o) { return static_cast<int>((gi + 2 * o + 1) % 16); };
  auto scale = [](int64_t gi, int64_t o) { return 0.25f * static_cast<float>(1 + o + 3 * gi); };
  std::vector<uint32_t> qweight(static_cast<size_t>(k)), qzeros(ng);
  std::vector<uint16_t> scales(static_cast<size_t>(ng * n));
  for (int64_t i = 0; i < k; ++i) {
    int q8[8];
    for (int o = 0; o < 8; ++o) q8[o] = code(i, o);
    qweight[static_cast<size_t>(i)] = awq_word(q8);
  }
  for (int64_t gi = 0; gi < ng; ++gi) {
    int z8[8];
    for (int o = 0; o < 8; ++o) z8[o] = zero(gi, o);
    qzeros[static_cast<size_t>(gi)] = awq_word(z8);
    for (int64_t o = 0; o < n; ++o) scales[static_cast<size_t>(gi * n + o)] = h(scale(gi, o));
  }
  RawTensor tq = raw("l.qweight", DType::kI32, {k, n / 8}, qweight);
  RawTensor tz = raw("l.qzeros", DType::kI32, {ng, n / 8}, qzeros);
  RawTensor ts = raw("l.scales", DType::kF16, {ng, n}, scales);
  Result<QuantWeight> w = from_awq_gemm({.prefix = "l", .bits = 4, .group_size = g}, &tq, &tz, &ts);
  ASSERT_TRUE(w) << w.status().to_string();
  EXPECT_EQ(w->n, n);
  EXPECT_EQ(w->k, k);
  const std::vector<float> d = dequantize(*w);
  for (int64_t o = 0; o < n; ++o)
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(d[static_cast<size_t>(o * k + i)],
                static_cast<float>(code(i, o) - zero(i / g, o)) * scale(i / g, o))
          << "o " << o << " i " << i;
}

TEST(AwqLayout, Errors) {
  std::vector<uint32_t> q(64 * 1), z(2), z_bad(3);
  std::vector<uint16_t> s(2 * 8);
  RawTensor tq = raw("l.qweight", DType::kI32, {64, 1}, q);
  RawTensor tz = raw("l.qzeros", DType::kI32, {2, 1}, z);
  RawTensor ts = raw("l.scales", DType::kF16, {2, 8}, s);
  Result<QuantWeight> r = from_awq_gemm({.prefix = "l", .group_size = 48}, &tq, &tz, &ts);
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(r.status(), "group_size = 48")) << r.status().to_string();
  r = from_awq_gemm({.prefix = "l", .group_size = 32}, &tq, nullptr, &ts);
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(r.status(), "l.qzeros is missing")) << r.status().to_string();
  RawTensor tz_bad = raw("l.qzeros", DType::kI32, {3, 1}, z_bad);
  r = from_awq_gemm({.prefix = "l", .group_size = 32}, &tq, &tz_bad, &ts);
  EXPECT_TRUE(mentions(r.status(), "tensor l.qzeros: shape [3, 1], expected [2, 1]")) << r.status().to_string();
  r = from_awq_gemm({.prefix = "l", .bits = 3, .group_size = 32}, &tq, &tz, &ts);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(mentions(r.status(), "bits = 3")) << r.status().to_string();
  RawTensor ts_bf = ts;
  ts_bf.dtype = DType::kI32;
  r = from_awq_gemm({.prefix = "l", .group_size = 32}, &tq, &tz, &ts_bf);
  EXPECT_TRUE(mentions(r.status(), "tensor l.scales: dtype I32")) << r.status().to_string();
}

// ------------------------------------------------------------------ GPTQ

// GPTQ: qweight word (r, o) holds inputs 8r..8r+7 of output o, the first in the lowest nibble;
// qzeros word (g, c) holds outputs 8c..8c+7 of group g, in order.
struct GptqCase {
  int bits;
  int64_t n, k, g;
  bool v2;
  std::vector<int32_t> g_idx;  // empty = i / g
};

void run_gptq_case(const GptqCase& c) {
  const int per = 32 / c.bits;
  const int64_t ng = c.k / c.g;
  const int maxq = (1 << c.bits) - 1;
  auto code = [&](int64_t i, int64_t o) { return static_cast<int>((i * 7 + o * 11 + 3) % (maxq + 1)); };
  // The true zero point; classic checkpoints store zero - 1, so keep zero >= 1 there.
  auto zero = [&](int64_t gi, int64_t o) { return static_cast<int>(1 + (gi * 3 + o) % maxq); };
  auto scale = [](int64_t gi, int64_t o) { return 0.5f * static_cast<float>(1 + (o + gi) % 5); };
  auto group = [&](int64_t i) { return c.g_idx.empty() ? i / c.g : c.g_idx[static_cast<size_t>(i)]; };
  std::vector<uint32_t> qweight(static_cast<size_t>(c.k / per * c.n), 0), qzeros(static_cast<size_t>(ng * c.n / per), 0);
  std::vector<uint16_t> scales(static_cast<size_t>(ng * c.n));
  for (int64_t i = 0; i < c.k; ++i)
    for (int64_t o = 0; o < c.n; ++o)
      qweight[static_cast<size_t>((i / per) * c.n + o)] |= static_cast<uint32_t>(code(i, o)) << (c.bits * (i % per));
  for (int64_t gi = 0; gi < ng; ++gi)
    for (int64_t o = 0; o < c.n; ++o) {
      const int stored = zero(gi, o) - (c.v2 ? 0 : 1);
      qzeros[static_cast<size_t>(gi * (c.n / per) + o / per)] |= static_cast<uint32_t>(stored) << (c.bits * (o % per));
      scales[static_cast<size_t>(gi * c.n + o)] = h(scale(gi, o));
    }
  RawTensor tq = raw("m.qweight", DType::kI32, {c.k / per, c.n}, qweight);
  RawTensor tz = raw("m.qzeros", DType::kI32, {ng, c.n / per}, qzeros);
  RawTensor ts = raw("m.scales", DType::kF16, {ng, c.n}, scales);
  RawTensor tg = raw("m.g_idx", DType::kI32, {c.k}, c.g_idx);
  Result<QuantWeight> w = from_gptq({.prefix = "m", .bits = c.bits, .group_size = c.g, .sym = false,
                                     .desc_act = !c.g_idx.empty(), .zeros_v2 = c.v2},
                                    &tq, &tz, &ts, c.g_idx.empty() ? nullptr : &tg);
  ASSERT_TRUE(w) << w.status().to_string();
  EXPECT_EQ(w->spec.act_order, !c.g_idx.empty());
  const std::vector<float> d = dequantize(*w);
  for (int64_t o = 0; o < c.n; ++o)
    for (int64_t i = 0; i < c.k; ++i) {
      const int64_t gi = group(i);
      ASSERT_EQ(d[static_cast<size_t>(o * c.k + i)], static_cast<float>(code(i, o) - zero(gi, o)) * scale(gi, o))
          << "bits " << c.bits << " o " << o << " i " << i;
    }
}

TEST(GptqLayout, HandPackedWords) {
  // Inputs 0..7 of one output, low nibble first; symmetric 4-bit zero 8 stored as 7 per nibble.
  uint32_t w = 0;
  for (int j = 0; j < 8; ++j) w |= static_cast<uint32_t>(j) << (4 * j);
  EXPECT_EQ(w, 0x76543210u);
  std::vector<uint32_t> qweight(8 * 8, 0x76543210u), qzeros(1, 0x77777777u);
  std::vector<uint16_t> scales(8, h(0.5f));
  RawTensor tq = raw("s.qweight", DType::kI32, {4, 8}, qweight);  // k = 32, n = 8
  RawTensor tz = raw("s.qzeros", DType::kI32, {1, 1}, qzeros);
  RawTensor ts = raw("s.scales", DType::kF16, {1, 8}, scales);
  Result<QuantWeight> r = from_gptq({.prefix = "s", .bits = 4, .group_size = 32, .sym = true}, &tq, &tz, &ts, nullptr);
  ASSERT_TRUE(r) << r.status().to_string();
  const std::vector<float> d = dequantize(*r);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(d[static_cast<size_t>(i)], 0.5f * static_cast<float>(i % 8 - 8)) << i;
}

TEST(GptqLayout, Classic4Bit) { run_gptq_case({.bits = 4, .n = 16, .k = 96, .g = 32, .v2 = false}); }
TEST(GptqLayout, V2Zeros4Bit) { run_gptq_case({.bits = 4, .n = 8, .k = 64, .g = 64, .v2 = true}); }
TEST(GptqLayout, Classic8Bit) { run_gptq_case({.bits = 8, .n = 12, .k = 64, .g = 32, .v2 = false}); }
TEST(GptqLayout, ActOrderShuffledGroups) {
  std::vector<int32_t> g_idx(96);
  for (int64_t i = 0; i < 96; ++i) g_idx[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % 3);  // 32 each
  run_gptq_case({.bits = 4, .n = 8, .k = 96, .g = 32, .v2 = false, .g_idx = g_idx});
}

TEST(GptqLayout, Errors) {
  std::vector<uint32_t> q(8 * 8), z(2);
  std::vector<uint16_t> s(2 * 8);
  std::vector<int32_t> g(64, 0);
  RawTensor tq = raw("p.qweight", DType::kI32, {8, 8}, q);  // k = 64, n = 8
  RawTensor tz = raw("p.qzeros", DType::kI32, {2, 1}, z);
  RawTensor ts = raw("p.scales", DType::kF16, {2, 8}, s);
  RawTensor tg = raw("p.g_idx", DType::kI32, {64}, g);
  Result<QuantWeight> r = from_gptq({.prefix = "p", .group_size = 32, .desc_act = true}, &tq, &tz, &ts, nullptr);
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(r.status(), "p.g_idx is missing (gptq with desc_act = true")) << r.status().to_string();
  r = from_gptq({.prefix = "p", .group_size = 32, .desc_act = true}, &tq, &tz, &ts, &tg);
  EXPECT_TRUE(mentions(r.status(), "tensor p.g_idx: group 0 has 64 inputs, expected group_size 32")) << r.status().to_string();
  g[5] = 9;
  r = from_gptq({.prefix = "p", .group_size = 32, .desc_act = true}, &tq, &tz, &ts, &tg);
  EXPECT_TRUE(mentions(r.status(), "tensor p.g_idx: element 5 = 9 is outside [0, 2)")) << r.status().to_string();
  r = from_gptq({.prefix = "p", .bits = 3, .group_size = 32}, &tq, &tz, &ts, nullptr);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  r = from_gptq({.prefix = "p", .group_size = 24}, &tq, &tz, &ts, nullptr);
  EXPECT_TRUE(mentions(r.status(), "group_size = 24 does not divide in_features 64")) << r.status().to_string();
  r = from_gptq({.prefix = "p", .group_size = 16}, &tq, &tz, &ts, nullptr);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  r = from_gptq({.prefix = "p", .group_size = 32}, &tq, &tz, nullptr, nullptr);
  EXPECT_TRUE(mentions(r.status(), "p.scales is missing")) << r.status().to_string();
  RawTensor ts_bad = raw("p.scales", DType::kF16, {1, 8}, s);
  r = from_gptq({.prefix = "p", .group_size = 32}, &tq, &tz, &ts_bad, nullptr);
  EXPECT_TRUE(mentions(r.status(), "tensor p.scales: shape [1, 8], expected [2, 8]")) << r.status().to_string();
  s[3] = 0x7e00;  // f16 NaN
  r = from_gptq({.prefix = "p", .group_size = 32}, &tq, &tz, &ts, nullptr);
  EXPECT_TRUE(mentions(r.status(), "tensor p.scales: element 3 is not finite")) << r.status().to_string();
}

// ------------------------------------------------------------------ FP8 / INT8 / NF4

// E4M3 bit patterns and their values (sign, 4 exponent bits with bias 7, 3 mantissa bits;
// exponent 0 is subnormal: m/8 * 2^-6).
struct F8Pair { uint8_t bits; float value; };
const F8Pair kF8[] = {{0x38, 1.0f}, {0x40, 2.0f}, {0xb8, -1.0f}, {0x3c, 1.5f}, {0x7e, 448.0f},
                      {0x01, 1.0f / 512}, {0x07, 7.0f / 512}, {0x08, 1.0f / 64}, {0x00, 0.0f},
                      {0xfe, -448.0f}, {0x30, 0.5f}, {0x81, -1.0f / 512}};
constexpr int kNF8 = sizeof(kF8) / sizeof(kF8[0]);

TEST(Fp8Layout, TensorChannelAndBlockScales) {
  const int64_t n = 5, k = 64;
  std::vector<uint8_t> wt(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n * k; ++i) wt[static_cast<size_t>(i)] = kF8[(i * 5) % kNF8].bits;
  auto value = [&](int64_t r, int64_t c) { return kF8[((r * k + c) * 5) % kNF8].value; };
  RawTensor tw = raw("f.weight", DType::kF8E4M3, {n, k}, wt);

  std::vector<float> s1 = {0.25f};
  RawTensor t1 = raw("f.weight_scale", DType::kF32, {1}, s1);
  Result<QuantWeight> w = from_fp8({.prefix = "f", .scaling = Fp8Scaling::kTensor}, &tw, &t1);
  ASSERT_TRUE(w) << w.status().to_string();
  std::vector<float> d = dequantize(*w);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) ASSERT_EQ(d[static_cast<size_t>(r * k + c)], value(r, c) * 0.25f);

  std::vector<uint16_t> sc(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) sc[static_cast<size_t>(r)] = f32_to_bf16(0.5f + static_cast<float>(r));
  RawTensor tc = raw("f.weight_scale", DType::kBF16, {n, 1}, sc);
  w = from_fp8({.prefix = "f", .scaling = Fp8Scaling::kChannel}, &tw, &tc);
  ASSERT_TRUE(w) << w.status().to_string();
  d = dequantize(*w);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(d[static_cast<size_t>(r * k + c)], value(r, c) * (0.5f + static_cast<float>(r)));

  // Blocks of 2 rows x 32 columns: scale_inv [ceil(5/2), 64/32] = [3, 2]; it multiplies.
  std::vector<float> sb = {1, 2, 3, 4, 5, 6};
  RawTensor tb = raw("f.weight_scale_inv", DType::kF32, {3, 2}, sb);
  w = from_fp8({.prefix = "f", .scaling = Fp8Scaling::kBlock, .block_n = 2, .block_k = 32}, &tw, &tb);
  ASSERT_TRUE(w) << w.status().to_string();
  d = dequantize(*w);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(d[static_cast<size_t>(r * k + c)], value(r, c) * sb[static_cast<size_t>((r / 2) * 2 + c / 32)]);
}

TEST(Fp8Layout, Errors) {
  std::vector<uint8_t> wt(4 * 64, 0x38);
  RawTensor tw = raw("e.weight", DType::kF8E4M3, {4, 64}, wt);
  std::vector<float> sb(2);
  RawTensor tb = raw("e.weight_scale_inv", DType::kF32, {1, 2}, sb);
  Result<QuantWeight> r = from_fp8({.prefix = "e", .scaling = Fp8Scaling::kBlock, .block_n = 2, .block_k = 32}, &tw, &tb);
  EXPECT_TRUE(mentions(r.status(), "tensor e.weight_scale_inv: shape [1, 2], expected [2, 2]")) << r.status().to_string();
  r = from_fp8({.prefix = "e", .scaling = Fp8Scaling::kBlock}, &tw, nullptr);
  EXPECT_TRUE(mentions(r.status(), "e.weight_scale_inv is missing")) << r.status().to_string();
  r = from_fp8({.prefix = "e", .scaling = Fp8Scaling::kBlock, .block_n = 128, .block_k = 100}, &tw, &tb);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  RawTensor tc = raw("e.weight_scale", DType::kF32, {2}, sb);
  r = from_fp8({.prefix = "e", .scaling = Fp8Scaling::kChannel}, &tw, &tc);
  EXPECT_TRUE(mentions(r.status(), "tensor e.weight_scale: shape [2], expected [4, 1]")) << r.status().to_string();
  wt[70] = 0xff;
  std::vector<float> s4(4, 1.0f);
  RawTensor t4 = raw("e.weight_scale", DType::kF32, {4, 1}, s4);
  r = from_fp8({.prefix = "e", .scaling = Fp8Scaling::kChannel}, &tw, &t4);
  EXPECT_TRUE(mentions(r.status(), "tensor e.weight: element 70 is an F8_E4M3 NaN")) << r.status().to_string();
  RawTensor tw16 = tw;
  tw16.dtype = DType::kBF16;
  r = from_fp8({.prefix = "e", .scaling = Fp8Scaling::kChannel}, &tw16, &t4);
  EXPECT_TRUE(mentions(r.status(), "tensor e.weight: dtype BF16, expected F8_E4M3")) << r.status().to_string();
}

TEST(Int8Layout, PerChannel) {
  const int64_t n = 3, k = 37;  // odd k: padding must not leak into the weight
  std::vector<int8_t> wt(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n * k; ++i) wt[static_cast<size_t>(i)] = static_cast<int8_t>((i * 37) % 255 - 127);
  std::vector<float> s = {0.5f, 0.25f, 2.0f};
  RawTensor tw = raw("i.weight", DType::kI8, {n, k}, wt);
  RawTensor ts = raw("i.weight_scale", DType::kF32, {n, 1}, s);
  Result<QuantWeight> w = from_int8_channel("i", &tw, &ts);
  ASSERT_TRUE(w) << w.status().to_string();
  const std::vector<float> d = dequantize(*w);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      ASSERT_EQ(d[static_cast<size_t>(r * k + c)], static_cast<float>(wt[static_cast<size_t>(r * k + c)]) * s[static_cast<size_t>(r)]);
  RawTensor ts_bad = raw("i.weight_scale", DType::kF32, {1, 3}, s);
  EXPECT_TRUE(mentions(from_int8_channel("i", &tw, &ts_bad).status(), "tensor i.weight_scale: shape [1, 3]"));
  EXPECT_TRUE(mentions(from_int8_channel("i", &tw, nullptr).status(), "i.weight_scale is missing"));
}

TEST(Nf4Layout, HighNibbleFirst) {
  const int64_t n = 2, k = 64;
  std::vector<uint8_t> wt(static_cast<size_t>(n * k / 2));
  for (size_t i = 0; i < wt.size(); ++i) wt[i] = static_cast<uint8_t>((i * 29 + 7) % 256);
  wt[0] = 0xf0;  // element 0: code 15 (+1.0), element 1: code 0 (-1.0)
  std::vector<float> absmax = {0.5f, 3.0f};
  RawTensor tw = raw("q.weight", DType::kU8, {n * k / 2, 1}, wt);
  RawTensor ta = raw("q.weight.absmax", DType::kF32, {2}, absmax);
  Result<QuantWeight> w = from_nf4({.prefix = "q", .n = n, .k = k, .blocksize = 64}, &tw, &ta, nullptr);
  ASSERT_TRUE(w) << w.status().to_string();
  const std::vector<float> d = dequantize(*w);
  EXPECT_EQ(d[0], 0.5f);
  EXPECT_EQ(d[1], -0.5f);
  for (int64_t f = 0; f < n * k; ++f) {
    const uint8_t b = wt[static_cast<size_t>(f / 2)];
    const int code = f % 2 == 0 ? b >> 4 : b & 0xf;
    ASSERT_EQ(d[static_cast<size_t>(f)], kNf4Table[code] * absmax[static_cast<size_t>(f / 64)]) << f;
  }
  EXPECT_EQ(kNf4Table[7], 0.0f);
  RawTensor tw_bad = raw("q.weight", DType::kU8, {60, 1}, wt);
  Result<QuantWeight> r = from_nf4({.prefix = "q", .n = n, .k = k, .blocksize = 64}, &tw_bad, &ta, nullptr);
  EXPECT_TRUE(mentions(r.status(), "tensor q.weight: shape [60, 1] holds 60 bytes, expected 64")) << r.status().to_string();
  r = from_nf4({.prefix = "q", .n = 1, .k = 96, .blocksize = 64}, &tw, &ta, nullptr);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  r = from_nf4({.prefix = "q", .n = n, .k = k, .blocksize = 64}, &tw, nullptr, nullptr);
  EXPECT_TRUE(mentions(r.status(), "q.weight.absmax is missing")) << r.status().to_string();
}

}  // namespace
}  // namespace frugal::quant
