// FP8 W8A8 (issue 18): FP8 weights with per-tensor, per-channel and DeepSeek-V3 128 x 128 block
// scales times activations quantized to FP8 on the fly, through cuBLASLt's FP8 GEMM, against a
// double-precision product of the weight decoded here from the E4M3 bit layout (OCP FP8 spec)
// and the bf16 activations. The bound is the activation rounding: E4M3 keeps 3 mantissa bits, so
// a normal x moves by at most |x| / 16 and a subnormal one by at most scale / 1024 (its spacing
// 2^-9 times the token's scale, halved), plus bf16 rounding of the output. Token counts that
// are not a multiple of 4 run their last 1-3 tokens through the weight-only GEMV.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_fp8.h>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"
#include "ops/weight_format.h"

namespace frugal::cuda::testing {
namespace {

double e4m3(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
  const double v = exp == 0 ? std::ldexp(man / 8.0, -6) : std::ldexp(1.0 + man / 8.0, exp - 7);
  return sign ? -v : v;
}

struct W8a8Case {
  int32_t group_k, group_n;  // 0/0 per tensor, 0/1 per channel, 128/128 blocks
  int64_t m, n, k;
  bool bias, accumulate;
  bool must_run;  // shapes cuBLASLt's FP8 GEMM takes (k a multiple of 128 for blocks)
  bool aligned_y = true;  // output rows 16-byte aligned (else the dequantizing path runs)
};

void check_w8a8(const W8a8Case& c, std::mt19937& rng) {
  ops::WeightFormat f;
  f.scheme = ops::WeightScheme::kFp8;
  f.dtype = DType::kF8E4M3;
  f.group_k = c.group_k;
  f.group_n = c.group_n;
  const int64_t row_bytes = ops::weight_row_bytes(f, c.k), srows = ops::weight_scale_rows(f, c.n),
                scols = ops::weight_groups_k(f, c.k);
  const std::string what = "w8a8 m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                           " scales " + std::to_string(c.group_k) + "x" + std::to_string(c.group_n);
  std::vector<uint8_t> codes(static_cast<size_t>(c.n * row_bytes), 0);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t o = 0; o < c.n; ++o)
    for (int64_t j = 0; j < c.k; ++j) {
      uint8_t b;
      do b = static_cast<uint8_t>(byte(rng)); while ((b & 0x7f) == 0x7f);  // no NaN
      codes[static_cast<size_t>(o * row_bytes + j)] = b;
    }
  std::vector<float> scales(static_cast<size_t>(srows * scols));
  std::uniform_real_distribution<float> sd(0.5f / 256, 1.5f / 256);
  for (float& s : scales) s = sd(rng);
  const int64_t ld_x = c.k + 8, ld_y = c.aligned_y ? (c.n + 3 + 7) / 8 * 8 : c.n + 3;
  Tensor x(DType::kBF16, c.m * ld_x), y(DType::kBF16, c.m * ld_y), bias(DType::kBF16, c.n);
  x.fill_uniform(rng, -1.f, 1.f);
  for (int64_t i = 0; i < c.m; i += 7) x.set(i * ld_x + (i % c.k), 12.f);  // an outlier per few tokens
  y.fill_uniform(rng, -1.f, 1.f);
  bias.fill_uniform(rng, -1.f, 1.f);
  const std::vector<uint8_t> y0 = y.host;
  for (auto* t : {&x, &y, &bias}) t->to_device();
  DevInts keep;
  void* dcodes = backend()->alloc(codes.size() + 16).value();
  keep.ptrs.push_back(dcodes);
  ASSERT_TRUE(backend()->upload(dcodes, codes.data(), codes.size()).is_ok());
  ops::WeightView w{.data = dcodes, .format = f, .scales = keep.floats(scales)};
  ops::MatmulParams p{x.dev, DType::kBF16, ld_x, w, c.bias ? bias.dev : nullptr, DType::kBF16,
                      y.dev, DType::kBF16, ld_y, c.m, c.n, c.k, c.accumulate};
  const int64_t before = backend()->w8a8_calls();
  Status st = backend()->matmul(p);
  ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
  if (c.must_run) {
    EXPECT_EQ(backend()->w8a8_calls(), before + 1) << what << ": did not take the FP8 GEMM ("
                                                   << backend()->w8a8_fallback() << ")";
  }
  std::vector<uint8_t> got;
  y.from_device(&got, what);
  int64_t bad = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t o = 0; o < ld_y; ++o) {
      const float g = ops::ref::load(DType::kBF16, got.data(), i * ld_y + o);
      if (o >= c.n) {  // the gap stays as it was
        ASSERT_EQ(g, ops::ref::load(DType::kBF16, y0.data(), i * ld_y + o)) << what;
        continue;
      }
      double want = 0, bound = 0, amax_tok = 0;
      for (int64_t j = 0; j < c.k; ++j) amax_tok = std::max(amax_tok, std::fabs(static_cast<double>(x.get(i * ld_x + j))));
      for (int64_t j = 0; j < c.k; ++j) {
        const double s = scales[static_cast<size_t>((c.group_n ? o / c.group_n : 0) * scols + (c.group_k ? j / c.group_k : 0))];
        const double wv = e4m3(codes[static_cast<size_t>(o * row_bytes + j)]) * s, xv = x.get(i * ld_x + j);
        want += wv * xv;
        bound += std::fabs(wv) * (std::fabs(xv) / 16 + amax_tok / 448 / 1024);
      }
      if (c.bias) want += bias.get(o);
      if (c.accumulate) want += ops::ref::load(DType::kBF16, y0.data(), i * ld_y + o);
      bound += 8e-3 * std::fabs(want) + 1e-3;
      if (!(std::fabs(g - want) <= bound) && bad++ < 5)
        ADD_FAILURE() << what << " at [" << i << ", " << o << "]: got " << g << " want " << want << " bound " << bound;
    }
  EXPECT_EQ(bad, 0) << what;
}

// The activation quantization alone, byte for byte: codes are the saturating round-to-nearest
// E4M3 of x * 448 / amax (cuda_fp8.h's host conversion as the oracle), zero past k, and the
// scale amax / 448, per token and per (token, 128 inputs). Rows of 36 inputs (k % 8 != 0) and a
// row stride that is not a multiple of 8 take the scalar kernels, the rest the vector kernels
// (1, 2, 4 and 8 vectors a thread: k 200 .. 18944).
TEST(CudaW8a8, ActivationQuantizationExact) {
  std::mt19937 rng(35);
  struct Case { int64_t m, k, ld_x; };
  for (bool per_128 : {false, true})
    for (Case c : {Case{3, 200, 208}, Case{5, 3584, 3592}, Case{2, 4480, 4488}, Case{4, 18944, 18952}, Case{3, 12800, 12808},
                   Case{3, 36, 44}, Case{2, 512, 516}}) {
      const std::string what = std::string(per_128 ? "per 128" : "per token") + " m=" + std::to_string(c.m) +
                               " k=" + std::to_string(c.k) + " ld_x=" + std::to_string(c.ld_x);
      const int64_t k_pad = (c.k + 31) / 32 * 32, kb = (k_pad + 127) / 128, ld_s = (c.m + 3) / 4 * 4;
      Tensor x(DType::kBF16, c.m * c.ld_x);
      x.fill_uniform(rng, -2.f, 2.f);
      x.set(1, 9.f);     // an outlier in token 0
      x.set(c.k, 50.f);  // past k in token 0's row gap: ignored
      x.to_device();
      const int64_t n_scales = per_128 ? kb * ld_s : c.m;
      Tensor xq(DType::kU8, c.m * k_pad), xs(DType::kF32, n_scales);
      xq.to_device();
      xs.to_device();
      ASSERT_EQ(launch_quantize_fp8_act(x.dev, DType::kBF16, c.ld_x, c.m, c.k, k_pad, per_128, static_cast<uint8_t*>(xq.dev),
                                        static_cast<float*>(xs.dev), ld_s, backend()->stream()),
                cudaSuccess) << what;
      std::vector<uint8_t> got_q, got_s;
      xq.from_device(&got_q, what);
      xs.from_device(&got_s, what);
      int64_t bad = 0;
      for (int64_t t = 0; t < c.m; ++t)
        for (int64_t b = 0; b < (per_128 ? kb : 1); ++b) {
          const int64_t j0 = per_128 ? b * 128 : 0, j1 = per_128 ? std::min(k_pad, j0 + 128) : k_pad;
          float amax = 0.f;
          for (int64_t j = j0; j < std::min(j1, c.k); ++j) amax = std::max(amax, std::fabs(x.get(t * c.ld_x + j)));
          const float inv = amax > 0.f ? 448.f / amax : 0.f;
          float got_scale;
          std::memcpy(&got_scale, got_s.data() + 4 * (per_128 ? b * ld_s + t : t), 4);
          EXPECT_EQ(got_scale, amax / 448.f) << what << " token " << t << " block " << b;
          for (int64_t j = j0; j < j1; ++j) {
            const uint8_t want = j < c.k ? static_cast<uint8_t>(__nv_cvt_float_to_fp8(x.get(t * c.ld_x + j) * inv,
                                                                                        __NV_SATFINITE, __NV_E4M3))
                                         : 0;
            if (got_q[static_cast<size_t>(t * k_pad + j)] != want && bad++ < 5)
              ADD_FAILURE() << what << " at [" << t << ", " << j << "]: got " << int(got_q[static_cast<size_t>(t * k_pad + j)])
                            << " want " << int(want);
          }
        }
      EXPECT_EQ(bad, 0) << what;
    }
}

TEST(CudaW8a8, Fp8WeightsFp8Activations) {
  std::mt19937 rng(18);
  // Per-tensor and per-channel scales with cuBLASLt's fast accumulation (the default) and without.
  for (bool fast : {false, true}) {
    backend()->set_fp8_fast_accum(fast);
    for (auto [gk, gn] : {std::pair<int32_t, int32_t>{0, 0}, {0, 1}})
      for (int64_t m : {13, 65, 256})
        for (auto [n, k] : {std::pair<int64_t, int64_t>{304, 512}, {272, 4480}})
          check_w8a8({gk, gn, m, n, k, false, m == 65, true}, rng);
  }
  backend()->set_fp8_fast_accum(true);
  for (auto [gk, gn] : {std::pair<int32_t, int32_t>{0, 0}, {0, 1}, {128, 128}})
    for (int64_t m : {13, 16, 65, 97, 256})  // W8A8 from 9 tokens (kFp8GemvMaxM); 13 = 12 + a GEMV tail
      for (auto [n, k] : {std::pair<int64_t, int64_t>{304, 512}, {272, 4480}, {128, 384}, {257, 512}}) {
        const bool odd = m == 97;
        check_w8a8({gk, gn, m, n, k, odd, m == 65, n % 16 == 0}, rng);  // n % 16: else the fallback
      }
  // k not a multiple of 128: cuBLASLt may refuse 128-block scales; whichever path runs is right.
  check_w8a8({128, 128, 80, 64, 200, true, false, false}, rng);
  check_w8a8({0, 1, 80, 64, 200, false, true, true}, rng);
  check_w8a8({128, 128, 99, 256, 512, true, true, false, false}, rng);  // unaligned rows: the fallback
}

// Random FP8 weights [n, k] in format f (no NaN codes; scales around 1 / 256) on the device.
struct DeviceFp8Weight {
  DevInts keep;
  ops::WeightView view;
  DeviceFp8Weight(const ops::WeightFormat& f, int64_t n, int64_t k, std::mt19937& rng) {
    std::vector<uint8_t> codes(static_cast<size_t>(n * ops::weight_row_bytes(f, k)));
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : codes)
      do b = static_cast<uint8_t>(byte(rng)); while ((b & 0x7f) == 0x7f);
    std::vector<float> scales(static_cast<size_t>(ops::weight_scale_rows(f, n) * ops::weight_groups_k(f, k)));
    std::uniform_real_distribution<float> sd(0.5f / 256, 1.5f / 256);
    for (float& v : scales) v = sd(rng);
    void* dcodes = backend()->alloc(codes.size() + 16).value();
    keep.ptrs.push_back(dcodes);
    EXPECT_TRUE(backend()->upload(dcodes, codes.data(), codes.size()).is_ok());
    view = ops::WeightView{.data = dcodes, .format = f, .scales = keep.floats(scales)};
  }
};

ops::WeightFormat fp8_format(int32_t group_k, int32_t group_n) {
  ops::WeightFormat f;
  f.scheme = ops::WeightScheme::kFp8;
  f.dtype = DType::kF8E4M3;
  f.group_k = group_k;
  f.group_n = group_n;
  return f;
}

// Two bf16 outputs [m][ld_y] equal bit for bit (the first few differences named).
void expect_same_bf16(const std::vector<uint8_t>& fused, const std::vector<uint8_t>& seq, int64_t m, int64_t ld_y,
                      const std::string& what) {
  int64_t bad = 0;
  for (int64_t i = 0; i < m * ld_y; ++i)
    if (fused[static_cast<size_t>(2 * i)] != seq[static_cast<size_t>(2 * i)] ||
        fused[static_cast<size_t>(2 * i + 1)] != seq[static_cast<size_t>(2 * i + 1)])
      if (bad++ < 5)
        ADD_FAILURE() << what << " at [" << i / ld_y << ", " << i % ld_y << "]: fused "
                      << ops::ref::load(DType::kBF16, fused.data(), i) << ", sequence "
                      << ops::ref::load(DType::kBF16, seq.data(), i);
  EXPECT_EQ(bad, 0) << what;
}

// silu_mul_matmul (SwiGLU's down projection over silu(gate) * up) with FP8 weights: the fused
// path quantizes the product in one kernel without writing it; its output must equal, bit for
// bit, silu_mul then the W8A8 matmul (the sequence, checked against the oracle above), since the
// fused kernel rounds the product to bf16 as silu_mul does before quantizing. 9 and 13 tokens:
// W8A8 for the first 8 / 12, the weight-only GEMV for the rest (the fused path writes those
// product rows); per-tensor, per-channel and 128-block scales; a per-token row of 4480.
// What cuBLASLt's fast accumulation (the default for per-tensor / per-channel scales) costs at the
// depths of DeepSeek-R1-Distill-Qwen-7B's projections (k 3584: q, gate_up; 18944: down), where
// a long dot product in the tensor cores' own accumulator could drift: the same FP8 GEMM with
// and without it, per-channel scales, 64 tokens, against the double-precision product of the
// decoded weights and the bf16 activations. Both errors include the activations' E4M3 rounding
// (the same codes either way); the fast path may add to it but must stay within 1.5x the promoted
// path's RMS error plus 2^-8 of the output's RMS (one bf16 step), and within the activation
// rounding bound of check_w8a8 (run on the same shapes above). The figures are printed.
TEST(CudaW8a8, FastAccumulationAgainstPromotedAtTheModelsDepths) {
  std::mt19937 rng(41);
  for (int64_t k : {3584, 18944}) {
    const int64_t m = 64, n = 256;
    ops::WeightFormat f;
    f.scheme = ops::WeightScheme::kFp8;
    f.dtype = DType::kF8E4M3;
    f.group_n = 1;  // per channel
    const int64_t row_bytes = ops::weight_row_bytes(f, k);
    std::vector<uint8_t> codes(static_cast<size_t>(n * row_bytes), 0);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t o = 0; o < n; ++o)
      for (int64_t j = 0; j < k; ++j) {
        uint8_t b;
        do b = static_cast<uint8_t>(byte(rng)); while ((b & 0x7f) == 0x7f);  // no NaN
        codes[static_cast<size_t>(o * row_bytes + j)] = b;
      }
    std::vector<float> scales(static_cast<size_t>(ops::weight_scale_rows(f, n)));
    std::uniform_real_distribution<float> sd(0.5f / 256, 1.5f / 256);
    for (float& sc : scales) sc = sd(rng);
    Tensor x(DType::kBF16, m * k), y(DType::kBF16, m * n);
    x.fill_uniform(rng, -1.f, 1.f);
    x.to_device();
    DevInts keep;
    void* dcodes = backend()->alloc(codes.size() + 16).value();
    keep.ptrs.push_back(dcodes);
    ASSERT_TRUE(backend()->upload(dcodes, codes.data(), codes.size()).is_ok());
    const ops::WeightView w{.data = dcodes, .format = f, .scales = keep.floats(scales)};
    std::vector<double> want(static_cast<size_t>(m * n));
    double ss = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t o = 0; o < n; ++o) {
        double acc = 0;
        for (int64_t j = 0; j < k; ++j)
          acc += e4m3(codes[static_cast<size_t>(o * row_bytes + j)]) * static_cast<double>(x.get(i * k + j));
        want[static_cast<size_t>(i * n + o)] = acc * scales[static_cast<size_t>(o)];
        ss += want[static_cast<size_t>(i * n + o)] * want[static_cast<size_t>(i * n + o)];
      }
    const double rms = std::sqrt(ss / static_cast<double>(m * n));
    double err[2] = {0, 0}, diff_ss = 0, diff_max = 0;
    std::vector<uint8_t> got[2];
    for (int fast = 0; fast < 2; ++fast) {
      backend()->set_fp8_fast_accum(fast == 1);
      const int64_t before = backend()->w8a8_calls();
      const ops::MatmulParams p{x.dev, DType::kBF16, k, w, nullptr, DType::kBF16, y.dev, DType::kBF16, n, m, n, k, false};
      ASSERT_TRUE(backend()->matmul(p).is_ok());
      ASSERT_EQ(backend()->w8a8_calls(), before + 1) << "k=" << k << ": did not take the FP8 GEMM";
      y.from_device(&got[fast], "k=" + std::to_string(k));
      double e = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        const double d = ops::ref::load(DType::kBF16, got[fast].data(), i) - want[static_cast<size_t>(i)];
        e += d * d;
      }
      err[fast] = std::sqrt(e / static_cast<double>(m * n));
    }
    backend()->set_fp8_fast_accum(true);
    for (int64_t i = 0; i < m * n; ++i) {
      const double d = ops::ref::load(DType::kBF16, got[1].data(), i) - ops::ref::load(DType::kBF16, got[0].data(), i);
      diff_ss += d * d;
      diff_max = std::max(diff_max, std::fabs(d));
    }
    std::printf("k=%lld: RMS error / RMS output: promoted %.3e, fast %.3e; fast - promoted: RMS %.3e, max %.3e\n",
                static_cast<long long>(k), err[0] / rms, err[1] / rms,
                std::sqrt(diff_ss / static_cast<double>(m * n)) / rms, diff_max / rms);
    EXPECT_LE(err[1], 1.5 * err[0] + rms / 256) << "k=" << k << ": fast accumulation adds error";
  }
}

TEST(CudaW8a8, SiluMulMatmulEqualsSequence) {
  std::mt19937 rng(36);
  for (auto [gk, gn] : {std::pair<int32_t, int32_t>{0, 0}, {0, 1}, {128, 128}})
    for (int64_t m : {9, 13, 16, 64, 130})
      for (int64_t dim : {512, 4480}) {
        const int64_t n = 272, ld_gu = 2 * dim + 8, ld_y = n + 8;
        const std::string what = "silu_mul_matmul m=" + std::to_string(m) + " n=" + std::to_string(n) + " dim=" +
                                 std::to_string(dim) + " scales " + std::to_string(gk) + "x" + std::to_string(gn);
        const DeviceFp8Weight w(fp8_format(gk, gn), n, dim, rng);
        Tensor gu(DType::kBF16, m * ld_gu), h(DType::kBF16, m * dim), y(DType::kBF16, m * ld_y);
        gu.fill_uniform(rng, -4.f, 4.f);
        y.fill_uniform(rng, -1.f, 1.f);
        for (auto* t : {&gu, &h, &y}) t->to_device();
        const ops::SiluMulMatmulParams p{
            .act = {.gate = gu.dev, .up = static_cast<uint8_t*>(gu.dev) + 2 * dim, .out = h.dev, .act_dtype = DType::kBF16,
                    .n_tokens = m, .dim = dim, .ld_gate = ld_gu, .ld_up = ld_gu, .ld_out = dim},
            .mm = {h.dev, DType::kBF16, dim, w.view, nullptr, DType::kBF16, y.dev, DType::kBF16, ld_y, m, n, dim, true}};
        std::vector<uint8_t> fused, seq;
        const int64_t calls = backend()->fused_silu_quant_calls();
        ASSERT_TRUE(backend()->silu_mul_matmul(p).is_ok()) << what;
        EXPECT_EQ(backend()->fused_silu_quant_calls(), calls + 1) << what << ": the fused quantization did not run";
        y.from_device(&fused, what);
        y.to_device();  // y0 again
        backend()->set_fuse_silu_quant(false);
        const Status st = backend()->silu_mul_matmul(p);
        backend()->set_fuse_silu_quant(true);
        ASSERT_TRUE(st.is_ok()) << what;
        y.from_device(&seq, what);
        expect_same_bf16(fused, seq, m, ld_y, what);
      }
}

// rms_norm_matmul (a block's input norm, then its first projection) with FP8 weights: with the
// fusion on, the norm runs inside the W8A8 activation quantization and its bf16 output is never
// written; mm.y must equal, bit for bit, rms_norm then the W8A8 matmul (the sequence), since the
// fused kernel normalizes in rms_norm_bf16_kernel's order and rounds to bf16 before quantizing.
// 9, 13 and 130 tokens: W8A8 for the first 8 / 12 / 128, the weight-only GEMV over the norm's rows
// for the rest (the fused path normalizes those into norm.y); 64 and 2048 (prefill); per-tensor,
// per-channel and 128-block scales; the 7B width (3584) and a 4096 one.
TEST(CudaW8a8, RmsNormMatmulEqualsSequence) {
  std::mt19937 rng(37);
  for (auto [gk, gn] : {std::pair<int32_t, int32_t>{0, 0}, {0, 1}, {128, 128}})
    for (int64_t m : {9, 13, 64, 130, 2048})
      for (int64_t dim : {3584, 4096}) {
        const int64_t n = 272, ld_x = dim + 8, ld_y = n + 8;
        const std::string what = "rms_norm_matmul m=" + std::to_string(m) + " n=" + std::to_string(n) + " dim=" +
                                 std::to_string(dim) + " scales " + std::to_string(gk) + "x" + std::to_string(gn);
        const DeviceFp8Weight w(fp8_format(gk, gn), n, dim, rng);
        Tensor x(DType::kBF16, m * ld_x), nw(DType::kBF16, dim), xn(DType::kBF16, m * ld_x), y(DType::kBF16, m * ld_y);
        x.fill_uniform(rng, -4.f, 4.f);
        nw.fill_uniform(rng, 0.5f, 1.5f);
        y.fill_uniform(rng, -1.f, 1.f);
        for (auto* t : {&x, &nw, &xn, &y}) t->to_device();
        const ops::RmsNormMatmulParams p{
            .norm = {.x = x.dev, .residual = nullptr, .y = xn.dev, .weight = nw.dev, .act_dtype = DType::kBF16,
                     .weight_dtype = DType::kBF16, .rows = m, .dim = dim, .ld_x = ld_x, .ld_res = ld_x, .ld_y = ld_x,
                     .eps = 1e-6f},
            .mm = {xn.dev, DType::kBF16, ld_x, w.view, nullptr, DType::kBF16, y.dev, DType::kBF16, ld_y, m, n, dim, true}};
        std::vector<uint8_t> fused, seq;
        const bool was = backend()->fuse_norm();
        backend()->set_fuse_norm(true);
        const int64_t calls = backend()->fused_norm_quant_calls();
        const Status st_fused = backend()->rms_norm_matmul(p);
        backend()->set_fuse_norm(false);
        ASSERT_TRUE(st_fused.is_ok()) << what << ": " << st_fused.to_string();
        EXPECT_EQ(backend()->fused_norm_quant_calls(), calls + 1) << what << ": the fused quantization did not run";
        y.from_device(&fused, what);
        y.to_device();  // y0 again
        const Status st = backend()->rms_norm_matmul(p);
        backend()->set_fuse_norm(was);
        ASSERT_TRUE(st.is_ok()) << what;
        y.from_device(&seq, what);
        expect_same_bf16(fused, seq, m, ld_y, what);
      }
}

}  // namespace
}  // namespace frugal::cuda::testing
