// CPU quant matmul (every ISA this machine runs) against the ops reference matmul (double
// accumulation) on the dequantized weights: every format, odd M / N / K where the format allows,
// every group size, act order, bias and accumulate, GEMV (m <= 8) and GEMM (m > 8) paths.
// Weights are random packed tensors pushed through the checkpoint converters, so the whole path
// from a checkpoint's bytes to y is covered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/quant_matmul.h"
#include "ops/quant/checkpoint_layouts.h"
#include "ops/reference.h"

namespace frugal::cpu {
namespace {

using quant::QuantWeight;
using quant::RawTensor;

std::mt19937& rng() {
  static std::mt19937 g(1234);
  return g;
}
uint32_t rand_u32() { return rng()(); }
float rand_f(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng()); }

// Random tensors of one linear, kept alive with their RawTensor views.
struct Packed {
  std::vector<uint32_t> qweight, qzeros;
  std::vector<uint16_t> scales16;
  std::vector<float> scales32;
  std::vector<int32_t> g_idx;
  std::vector<uint8_t> bytes;
};

std::vector<uint16_t> rand_f16(size_t n) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_f16(rand_f(-0.02f, 0.02f));
  return v;
}

Result<QuantWeight> make_awq(Packed& p, int64_t n, int64_t k, int64_t group) {
  const int64_t g = group == -1 ? k : group, ng = k / g;
  p.qweight.resize(static_cast<size_t>(k * n / 8));
  p.qzeros.resize(static_cast<size_t>(ng * n / 8));
  for (auto& w : p.qweight) w = rand_u32();
  for (auto& w : p.qzeros) w = rand_u32();
  p.scales16 = rand_f16(static_cast<size_t>(ng * n));
  RawTensor q{"a.qweight", DType::kI32, {k, n / 8}, p.qweight.data()};
  RawTensor z{"a.qzeros", DType::kI32, {ng, n / 8}, p.qzeros.data()};
  RawTensor s{"a.scales", DType::kF16, {ng, n}, p.scales16.data()};
  return quant::from_awq_gemm({.prefix = "a", .bits = 4, .group_size = group}, &q, &z, &s);
}

Result<QuantWeight> make_gptq(Packed& p, int bits, int64_t n, int64_t k, int64_t group, bool act_order) {
  const int per = 32 / bits;
  const int64_t g = group == -1 ? k : group, ng = k / g;
  p.qweight.resize(static_cast<size_t>(k / per * n));
  p.qzeros.resize(static_cast<size_t>(ng * n / per));
  for (auto& w : p.qweight) w = rand_u32();
  for (auto& w : p.qzeros) w = rand_u32();
  p.scales16 = rand_f16(static_cast<size_t>(ng * n));
  p.g_idx.resize(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) p.g_idx[static_cast<size_t>(i)] = static_cast<int32_t>(i / g);
  if (act_order) std::shuffle(p.g_idx.begin(), p.g_idx.end(), rng());
  RawTensor q{"g.qweight", DType::kI32, {k / per, n}, p.qweight.data()};
  RawTensor z{"g.qzeros", DType::kI32, {ng, n / per}, p.qzeros.data()};
  RawTensor s{"g.scales", DType::kF16, {ng, n}, p.scales16.data()};
  RawTensor gi{"g.g_idx", DType::kI32, {k}, p.g_idx.data()};
  return quant::from_gptq({.prefix = "g", .bits = bits, .group_size = group, .sym = false,
                           .desc_act = act_order}, &q, &z, &s, &gi);
}

Result<QuantWeight> make_fp8(Packed& p, quant::Fp8Scaling scaling, int64_t n, int64_t k) {
  p.bytes.resize(static_cast<size_t>(n * k));
  for (auto& b : p.bytes) {
    b = static_cast<uint8_t>(rand_u32());
    if ((b & 0x7f) == 0x7f) b = 0x3f;  // no NaNs
  }
  RawTensor w{"f.weight", DType::kF8E4M3, {n, k}, p.bytes.data()};
  int64_t bn = 128, bk = 128;
  std::vector<int64_t> sshape;
  switch (scaling) {
    case quant::Fp8Scaling::kTensor: sshape = {1}; break;
    case quant::Fp8Scaling::kChannel: sshape = {n, 1}; break;
    case quant::Fp8Scaling::kBlock: bn = 4; bk = 64; sshape = {(n + bn - 1) / bn, (k + bk - 1) / bk}; break;
  }
  int64_t ns = 1;
  for (int64_t d : sshape) ns *= d;
  p.scales32.resize(static_cast<size_t>(ns));
  for (auto& s : p.scales32) s = rand_f(1e-4f, 2e-3f);
  RawTensor s{"f.scale", DType::kF32, sshape, p.scales32.data()};
  return quant::from_fp8({.prefix = "f", .scaling = scaling, .block_n = bn, .block_k = bk}, &w, &s);
}

Result<QuantWeight> make_int8(Packed& p, int64_t n, int64_t k) {
  p.bytes.resize(static_cast<size_t>(n * k));
  for (auto& b : p.bytes) b = static_cast<uint8_t>(rand_u32());
  p.scales32.resize(static_cast<size_t>(n));
  for (auto& s : p.scales32) s = rand_f(1e-4f, 1e-3f);
  RawTensor w{"i.weight", DType::kI8, {n, k}, p.bytes.data()};
  RawTensor s{"i.weight_scale", DType::kF32, {n, 1}, p.scales32.data()};
  return quant::from_int8_channel("i", &w, &s);
}

Result<QuantWeight> make_nf4(Packed& p, int64_t n, int64_t k) {
  p.bytes.resize(static_cast<size_t>((n * k + 1) / 2));
  for (auto& b : p.bytes) b = static_cast<uint8_t>(rand_u32());
  p.scales32.resize(static_cast<size_t>(n * k / 64));
  for (auto& s : p.scales32) s = rand_f(0.01f, 0.05f);
  RawTensor w{"n.weight", DType::kU8, {static_cast<int64_t>(p.bytes.size()), 1}, p.bytes.data()};
  RawTensor a{"n.weight.absmax", DType::kF32, {n * k / 64}, p.scales32.data()};
  return quant::from_nf4({.prefix = "n", .n = n, .k = k, .blocksize = 64}, &w, &a, nullptr);
}

std::vector<const QuantKernelTable*> tables() {
  std::vector<const QuantKernelTable*> t;
  for (const char* isa : {"scalar", "avx2", "avx512", "avx512_vnni"}) {
    Result<const QuantKernelTable*> r = quant_kernels_for(isa);
    if (r) t.push_back(*r);
  }
  return t;
}

// y = x @ W^T (+ bias) (+ y0) on every ISA vs ops::ref::matmul on dequantize(W).
void check(const QuantWeight& w, int64_t m, bool with_bias, bool accumulate, const std::string& what) {
  const int64_t n = w.n, k = w.k, ld_x = k + 3, ld_y = n + 2;
  std::vector<float> x(static_cast<size_t>(m * ld_x)), bias(static_cast<size_t>(n)), y0(static_cast<size_t>(m * ld_y));
  for (auto& v : x) v = rand_f(-1, 1);
  for (auto& v : bias) v = rand_f(-1, 1);
  for (auto& v : y0) v = rand_f(-1, 1);
  const std::vector<float> wd = quant::dequantize(w);
  std::vector<float> ref = y0;
  ops::ref::matmul({.x = x.data(), .x_dtype = DType::kF32, .ld_x = ld_x, .w = ops::dense_weight(wd.data(), DType::kF32),
                    .bias = with_bias ? bias.data() : nullptr,
                    .bias_dtype = DType::kF32, .y = ref.data(), .y_dtype = DType::kF32,
                    .ld_y = ld_y, .m = m, .n = n, .k = k, .accumulate = accumulate});
  // Tolerance from the magnitude of the terms: fp32 accumulation over k products.
  std::vector<double> mag(static_cast<size_t>(m * n), 0.0), wabs_xmax(mag.size(), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    double xmax = 0;
    for (int64_t j = 0; j < k; ++j) xmax = std::max(xmax, static_cast<double>(std::fabs(x[static_cast<size_t>(i * ld_x + j)])));
    for (int64_t o = 0; o < n; ++o)
      for (int64_t j = 0; j < k; ++j) {
        const double wj = wd[static_cast<size_t>(o * k + j)];
        mag[static_cast<size_t>(i * n + o)] += std::fabs(x[static_cast<size_t>(i * ld_x + j)] * wj);
        wabs_xmax[static_cast<size_t>(i * n + o)] += std::fabs(wj) * xmax;
      }
  }
  // The int8-activation GEMV (m <= 8, VNNI) and GEMM (m > 8, VNNI and AVX2) round x per
  // 32-block: |dx| <= amax(block) / 254 <= amax(row) / 254, times |W| (offsets meet the
  // rounded x too).
  const bool int8_x_kind = w.kind == quant::CodeKind::kQ8 || (w.kind == quant::CodeKind::kQ4 && w.view().lut_is_identity);
  ThreadPool pool(2);
  for (const QuantKernelTable* t : tables()) {
    std::vector<float> y = y0;
    Status st = quant_matmul(pool, {.x = x.data(), .ld_x = ld_x, .w = &w, .bias = with_bias ? bias.data() : nullptr,
                                    .y = y.data(), .ld_y = ld_y, .m = m, .accumulate = accumulate}, *t);
    ASSERT_TRUE(st) << st.to_string();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t o = 0; o < ld_y; ++o) {
        const size_t idx = static_cast<size_t>(i * ld_y + o);
        if (o >= n) {
          ASSERT_EQ(y[idx], y0[idx]) << "wrote past n: " << what;  // padding columns untouched
          continue;
        }
        double tol = 2e-6 * mag[static_cast<size_t>(i * n + o)] + 1e-5 * (1 + std::fabs(ref[idx]));
        const bool int8_x = int8_x_kind && (m <= kGemvMaxTokens ? t->gemv_i8 != nullptr : t->gemm_i8 != nullptr);
        if (int8_x) tol += wabs_xmax[static_cast<size_t>(i * n + o)] / 254.0;
        ASSERT_NEAR(y[idx], ref[idx], tol) << what << " isa " << t->isa << " m " << m << " row " << i << " col " << o;
      }
    }
  }
}

const int64_t kMs[] = {1, 3, 4, 5, 9, 17};

TEST(QuantKernels, AwqEveryGroupSize) {
  // k: blocks of 32 codes fewer than 4, whole quads of blocks (the int8-activation GEMV's
  // unit), and quads plus 1-3 blocks; groups of 32 and 64 scale inside a quad, 96 across two.
  const std::pair<int64_t, std::vector<int64_t>> cases[] = {
      {32, {96, 288, 352}}, {64, {128, 320, 384}}, {96, {192, 480}}, {128, {256, 384, 640}}, {-1, {96, 224, 448}}};
  for (const auto& [group, ks] : cases)
    for (int64_t k : ks) {
      Packed p;
      Result<QuantWeight> w = make_awq(p, 40, k, group);
      ASSERT_TRUE(w) << w.status().to_string();
      for (int64_t m : kMs)
        check(*w, m, m % 2 == 1, m == 4, "awq g" + std::to_string(group) + " k" + std::to_string(k));
    }
}

TEST(QuantKernels, Gptq4EveryGroupSizeAndActOrder) {
  for (int64_t group : {32, 64, 128, -1})
    for (bool act : {false, true}) {
      if (group == -1 && act) continue;
      Packed p;
      const int64_t k = group == -1 ? 160 : 3 * (group == -1 ? 32 : group);
      Result<QuantWeight> w = make_gptq(p, 4, 24, k, group, act);
      ASSERT_TRUE(w) << w.status().to_string();
      EXPECT_EQ(w->spec.act_order, act);
      for (int64_t m : kMs) check(*w, m, true, m == 9, "gptq4 g" + std::to_string(group) + (act ? " act" : ""));
    }
}

TEST(QuantKernels, Gptq8) {
  Packed p;
  Result<QuantWeight> w = make_gptq(p, 8, 20, 192, 64, true);
  ASSERT_TRUE(w) << w.status().to_string();
  for (int64_t m : kMs) check(*w, m, true, false, "gptq8");
}

TEST(QuantKernels, Fp8TensorChannelBlockOddShapes) {
  for (auto s : {quant::Fp8Scaling::kTensor, quant::Fp8Scaling::kChannel, quant::Fp8Scaling::kBlock}) {
    for (int64_t k : {45, 77, 192}) {
      if (s == quant::Fp8Scaling::kBlock && k % 32 != 0 && k < 64) continue;
      Packed p;
      Result<QuantWeight> w = make_fp8(p, s, 13, k);
      ASSERT_TRUE(w) << w.status().to_string();
      for (int64_t m : kMs) check(*w, m, m == 3, m == 17, "fp8 k" + std::to_string(k));
    }
  }
}

TEST(QuantKernels, Int8PerChannelOddShapes) {
  for (int64_t k : {1, 31, 33, 77}) {
    Packed p;
    Result<QuantWeight> w = make_int8(p, 7, k);
    ASSERT_TRUE(w) << w.status().to_string();
    for (int64_t m : kMs) check(*w, m, m == 5, m == 1, "int8 k" + std::to_string(k));
  }
}

TEST(QuantKernels, Nf4) {
  Packed p;
  Result<QuantWeight> w = make_nf4(p, 11, 192);
  ASSERT_TRUE(w) << w.status().to_string();
  for (int64_t m : kMs) check(*w, m, true, m == 3, "nf4");
}

TEST(QuantKernels, ThreadCountDoesNotChangeResults) {
  Packed p;
  Result<QuantWeight> w = make_gptq(p, 4, 64, 256, 128, true);
  ASSERT_TRUE(w);
  std::vector<float> x(static_cast<size_t>(9 * 256));
  for (auto& v : x) v = rand_f(-1, 1);
  for (int64_t m : {1, 9}) {
    std::vector<float> y1(static_cast<size_t>(m * 64)), y3(y1.size());
    ThreadPool p1(1), p3(3);
    ASSERT_TRUE(quant_matmul(p1, {.x = x.data(), .ld_x = 256, .w = &*w, .y = y1.data(), .ld_y = 64, .m = m}));
    ASSERT_TRUE(quant_matmul(p3, {.x = x.data(), .ld_x = 256, .w = &*w, .y = y3.data(), .ld_y = 64, .m = m}));
    EXPECT_EQ(y1, y3) << "m " << m;
  }
}

TEST(QuantKernels, Int8ActivationsAreOptionalAndClose) {
  Result<const QuantKernelTable*> vnni = quant_kernels_for("avx512_vnni");
  Result<const QuantKernelTable*> plain = quant_kernels_for("avx512");
  if (!vnni || !plain) GTEST_SKIP() << "no AVX-512 VNNI here";
  for (int bits : {4, 8}) {
    Packed p;
    Result<QuantWeight> w = make_gptq(p, bits, 32, 352, 32, false);  // 11 blocks: odd tail
    ASSERT_TRUE(w) << w.status().to_string();
    std::vector<float> x(352);
    for (auto& v : x) v = rand_f(-1, 1);
    std::vector<float> y_exact(32), y_plain(32), y_int(32);
    ThreadPool pool(1);
    QuantMatmulRequest r{.x = x.data(), .ld_x = 352, .w = &*w, .y = y_exact.data(), .ld_y = 32, .m = 1,
                         .exact_activations = true};
    ASSERT_TRUE(quant_matmul(pool, r, **vnni));
    r.y = y_plain.data();
    ASSERT_TRUE(quant_matmul(pool, r, **plain));
    EXPECT_EQ(y_exact, y_plain);  // exact_activations: the f32 kernels, bit for bit
    r.y = y_int.data();
    r.exact_activations = false;
    ASSERT_TRUE(quant_matmul(pool, r, **vnni));
    double err = 0, ref = 0;
    for (size_t o = 0; o < 32; ++o) err += std::fabs(y_int[o] - y_exact[o]), ref += std::fabs(y_exact[o]);
    EXPECT_GT(err, 0.0) << "int8 path not taken";
    EXPECT_LT(err / ref, 0.01) << "bits " << bits;  // measured ~0.3-0.5% mean relative error
    std::printf("int8 activations, %d-bit weights: mean |y - y_f32| / mean |y_f32| = %.4f\n", bits, err / ref);
  }
}

// The prefill GEMM on int8 activations (VNNI and AVX2): taken for int8 and int4, close to the
// f32 path, and exact_activations still selects the f32 path bit for bit.
TEST(QuantKernels, Int8ActivationGemmIsOptionalAndClose) {
  std::vector<const QuantKernelTable*> int_tables;
  for (const QuantKernelTable* t : tables())
    if (t->gemm_i8) int_tables.push_back(t);
  if (int_tables.empty()) GTEST_SKIP() << "no integer GEMM on this CPU";
  for (const QuantKernelTable* t : int_tables)
    for (int bits : {4, 8}) {
      Packed p;
      Result<QuantWeight> w = make_gptq(p, bits, 40, 352, 32, false);  // 11 blocks; 40 rows: a partial panel
      ASSERT_TRUE(w) << w.status().to_string();
      const int64_t m = 13, n = 40, k = 352;
      std::vector<float> x(static_cast<size_t>(m * k));
      for (auto& v : x) v = rand_f(-1, 1);
      std::vector<float> y_exact(static_cast<size_t>(m * n)), y_int(y_exact.size());
      ThreadPool pool(2);
      QuantMatmulRequest r{.x = x.data(), .ld_x = k, .w = &*w, .y = y_exact.data(), .ld_y = n, .m = m,
                           .exact_activations = true};
      ASSERT_TRUE(quant_matmul(pool, r, *t));
      r.y = y_int.data();
      r.exact_activations = false;
      ASSERT_TRUE(quant_matmul(pool, r, *t));
      double err = 0, ref = 0;
      for (size_t o = 0; o < y_exact.size(); ++o) err += std::fabs(y_int[o] - y_exact[o]), ref += std::fabs(y_exact[o]);
      EXPECT_GT(err, 0.0) << t->isa << ": int8 GEMM not taken";
      EXPECT_LT(err / ref, 0.01) << t->isa << " bits " << bits;
      std::printf("%s int8-activation GEMM, %d-bit weights: mean |y - y_f32| / mean |y_f32| = %.4f\n", t->isa, bits,
                  err / ref);
    }
}

TEST(QuantKernels, BadRequests) {
  Packed p;
  Result<QuantWeight> w = make_int8(p, 4, 32);
  ASSERT_TRUE(w);
  ThreadPool pool(1);
  std::vector<float> x(64), y(64);
  Status st = quant_matmul(pool, {.x = x.data(), .ld_x = 16, .w = &*w, .y = y.data(), .ld_y = 4, .m = 1});
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("ld_x 16 < k 32"), std::string::npos) << st.to_string();
  st = quant_matmul(pool, {.x = nullptr, .ld_x = 32, .w = &*w, .y = y.data(), .ld_y = 4, .m = 1});
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(quant_kernels_for("sse9"));
}

}  // namespace
}  // namespace frugal::cpu
