// CUDA ops against ops::ref on odd shapes, padded strides, bf16 and f32, with guard bytes and
// NaN-filled outputs. (The shared harness in tests/ops runs too, through cuda_harness_test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace frugal::cuda::testing {
namespace {

using ops::ref::load;

TEST(CudaOps, Embedding) {
  for (DType t : {DType::kBF16, DType::kF32}) {
    for (int64_t dim : {13, 4096}) {
      std::mt19937 rng(static_cast<unsigned>(dim));
      const int64_t vocab = 37, n_tok = 9;
      Tensor table(t, vocab * dim), out(t, n_tok * dim);
      table.fill_uniform(rng, -1, 1);
      out.fill_nan();
      table.to_device();
      out.to_device();
      std::vector<int32_t> ids(n_tok);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
      DevInts di;
      ops::EmbeddingParams p{table.dev, t, di(ids), out.dev, t, n_tok, dim, vocab};
      ASSERT_TRUE(backend()->embedding(p).is_ok());
      std::vector<uint8_t> want = out.host;
      ops::ref::embedding({table.host.data(), t, ids.data(), want.data(), t, n_tok, dim, vocab});
      expect_close(out, want, 0.f, "embedding");
    }
  }
}

void check_rms_norm(DType t, int64_t rows, int64_t dim, bool residual) {
  std::mt19937 rng(static_cast<unsigned>(rows * 31 + dim));
  const int64_t ld_x = dim + 3, ld_res = dim + 5, ld_y = dim + 1;
  Tensor x(t, rows * ld_x), res(t, rows * ld_res), y(t, rows * ld_y), w(DType::kBF16, dim);
  x.fill_uniform(rng, -2, 2);
  res.fill_uniform(rng, -2, 2);
  w.fill_uniform(rng, 0.5f, 1.5f);
  y.fill_nan();
  for (auto* tt : {&x, &res, &y, &w}) tt->to_device();
  ops::RmsNormParams p{x.dev, residual ? res.dev : nullptr, y.dev, w.dev, t, DType::kBF16, rows, dim, ld_x, ld_res, ld_y, 1e-6f};
  ASSERT_TRUE(backend()->rms_norm(p).is_ok());
  std::vector<uint8_t> want_y = y.host, want_res = res.host;
  ops::ref::rms_norm({x.host.data(), residual ? want_res.data() : nullptr, want_y.data(), w.host.data(), t,
                      DType::kBF16, rows, dim, ld_x, ld_res, ld_y, 1e-6f});
  std::vector<bool> mask_y(static_cast<size_t>(y.n)), mask_r(static_cast<size_t>(res.n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < dim; ++j) {
      mask_y[static_cast<size_t>(r * ld_y + j)] = true;
      mask_r[static_cast<size_t>(r * ld_res + j)] = true;
    }
  expect_close(y, want_y, tol_for(t), "rms_norm y", mask_y);
  expect_close(res, want_res, tol_for(t), "rms_norm residual");  // padding must stay untouched too
}

TEST(CudaOps, RmsNorm) {
  for (DType t : {DType::kBF16, DType::kF32})
    for (int64_t dim : {7, 1000, 3584})
      for (bool residual : {false, true}) check_rms_norm(t, 5, dim, residual);
}

struct MatmulCase {
  int64_t m, n, k;
  bool bias;
  bool accumulate;
  DType y;
  int64_t pad_x;
  DType bias_dtype = DType::kBF16;
};

// The device matmul p (already run) against ops::ref::matmul on the host copies of its
// operands, y's host contents as the starting y (accumulate); the rows [0, m) x [0, n) are
// compared, and everything else of y (rows past m, the padding) must be untouched.
void expect_matmul_matches_reference(const ops::MatmulParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                                     const Tensor& y, float tol, const std::string& what) {
  std::vector<uint8_t> want = y.host;
  ops::MatmulParams r = p;
  r.x = x.host.data();
  r.w.data = w.host.data();
  r.bias = p.bias ? b.host.data() : nullptr;
  r.y = want.data();
  ops::ref::matmul(r);
  std::vector<bool> mask(static_cast<size_t>(y.n));
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) mask[static_cast<size_t>(i * p.ld_y + j)] = true;
  expect_close(y, want, tol, what, mask);
}

void check_matmul(const MatmulCase& c) {
  SCOPED_TRACE(::testing::Message() << "m=" << c.m << " n=" << c.n << " k=" << c.k << " bias=" << c.bias
                                    << " acc=" << c.accumulate << " y=" << dtype_name(c.y) << " pad_x=" << c.pad_x);
  std::mt19937 rng(static_cast<unsigned>(c.m * 7919 + c.n * 31 + c.k));
  const int64_t ld_x = c.k + c.pad_x, ld_y = c.n + 2;
  Tensor x(DType::kBF16, c.m * ld_x), w(DType::kBF16, c.n * c.k), b(c.bias_dtype, c.n), y(c.y, c.m * ld_y);
  x.fill_uniform(rng, -1, 1);
  w.fill_uniform(rng, -1, 1);
  b.fill_uniform(rng, -1, 1);
  if (c.accumulate) y.fill_uniform(rng, -4, 4); else y.fill_nan();
  for (auto* t : {&x, &w, &b, &y}) t->to_device();
  ops::MatmulParams p{x.dev, DType::kBF16, ld_x, ops::dense_weight(w.dev, DType::kBF16), c.bias ? b.dev : nullptr, c.bias_dtype,
                      y.dev, c.y, ld_y, c.m, c.n, c.k, c.accumulate};
  ASSERT_TRUE(backend()->matmul(p).is_ok());
  expect_matmul_matches_reference(p, x, w, b, y, c.y == DType::kF32 ? 1e-3f : 2e-2f, "matmul");
}

TEST(CudaOps, MatmulGemvRange) {
  for (int64_t m : {1, 2, 3, 5, 8})
    for (int64_t n : {7, 64, 259})
      for (int64_t k : {8, 264, 3584}) check_matmul({m, n, k, m % 2 == 1, m >= 3, DType::kBF16, 8});
  check_matmul({4, 100, 512, true, false, DType::kF32, 0});
  check_matmul({1, 33, 64, true, true, DType::kBF16, 0, DType::kF32});  // bias dtype != y
}

// The dense GEMV called directly (the backend may measure cuBLASLt faster at m >= 2) under
// set_gemv_tuning; restores the defaults when it goes.
struct GemvTuning {
  GemvTuning(int split, int early) { set_gemv_tuning(split, early); }
  ~GemvTuning() { set_gemv_tuning(-1, -1); }
};

std::vector<uint8_t> run_gemv(const ops::MatmulParams& p, const Tensor& out, const SiluMulOut* silu = nullptr) {
  EXPECT_EQ(launch_gemv(p, backend()->stream(), silu), cudaSuccess);
  std::vector<uint8_t> got;
  out.from_device(&got, "gemv");
  return got;
}

// k split over 1, 2 and 4 warps (forced, and the default rule on a long-k shape it splits), with
// and without the weight loads before the PDL wait, on odd shapes (k not a multiple of 256, so
// split ranges and rounds end mid-way; n not a multiple of 4), m = 1..8, bias and accumulate,
// against ops::ref::matmul. Batch invariance: every token's row of an m-token launch equals the
// m = 1 launch of that token alone, bit for bit, and the early loads change no bit.
TEST(CudaOps, GemvSplitKMatchesReferenceAndIsBatchInvariant) {
  struct Shape {
    int64_t n, k;
  };
  for (const Shape s : {Shape{7, 8}, Shape{259, 264}, Shape{1001, 1032}, Shape{130, 8200}}) {
    std::mt19937 rng(static_cast<unsigned>(s.n * 31 + s.k));
    const int64_t ld_x = s.k + 8, ld_y = s.n + 2, m_max = kGemvMaxM;
    Tensor x(DType::kBF16, m_max * ld_x), w(DType::kBF16, s.n * s.k), b(DType::kBF16, s.n), y0(DType::kF32, m_max * ld_y);
    Tensor y(DType::kF32, m_max * ld_y), yb(DType::kBF16, m_max * ld_y);
    x.fill_uniform(rng, -1, 1);
    w.fill_uniform(rng, -1, 1);
    b.fill_uniform(rng, -1, 1);
    yb.fill_uniform(rng, -4, 4);
    for (auto* t : {&x, &w, &b, &yb}) t->to_device();
    for (int split : {0, 1, 2, 4}) {  // 0: the default rule (splits only the 130 x 8200 shape)
      const std::string what = "n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + " split=" + std::to_string(split) +
                               " (runs " + std::to_string(split == 0 ? gemv_split_k(s.n, s.k) : split) + ")";
      std::vector<uint8_t> solo(static_cast<size_t>(m_max * s.n * 4));  // each token alone, f32, no bias
      {
        GemvTuning tune(split == 0 ? -1 : split, 0);
        for (int64_t t = 0; t < m_max; ++t) {
          const ops::MatmulParams p{static_cast<const uint8_t*>(x.dev) + 2 * t * ld_x, DType::kBF16, ld_x,
                                    ops::dense_weight(w.dev, DType::kBF16), nullptr, DType::kBF16, y0.dev, DType::kF32, ld_y, 1, s.n, s.k, false};
          const std::vector<uint8_t> got = run_gemv(p, y0);
          std::memcpy(solo.data() + t * s.n * 4, got.data(), static_cast<size_t>(s.n * 4));
        }
      }
      for (int early : {0, 1, 2}) {
        GemvTuning tune(split == 0 ? -1 : split, early);
        for (int64_t m = 1; m <= m_max; ++m) {
          SCOPED_TRACE(what + " early=" + std::to_string(early) + " m=" + std::to_string(m));
          ops::MatmulParams p{x.dev, DType::kBF16, ld_x, ops::dense_weight(w.dev, DType::kBF16), nullptr, DType::kBF16,
                              y.dev, DType::kF32, ld_y, m, s.n, s.k, false};
          std::vector<uint8_t> got = run_gemv(p, y);
          for (int64_t t = 0; t < m; ++t)
            ASSERT_EQ(std::memcmp(got.data() + t * ld_y * 4, solo.data() + t * s.n * 4, static_cast<size_t>(s.n * 4)), 0)
                << "token " << t << " of " << m << " differs from its m = 1 launch";
          // bf16 y with bias (odd m) and accumulate (m % 3 == 0) against the reference.
          yb.to_device();
          p.y = yb.dev;
          p.y_dtype = DType::kBF16;
          p.bias = m % 2 == 1 ? b.dev : nullptr;
          p.accumulate = m % 3 == 0;
          ASSERT_EQ(launch_gemv(p, backend()->stream()), cudaSuccess);
          expect_matmul_matches_reference(p, x, w, b, yb, 2e-2f, "gemv");
        }
      }
    }
  }
}

// The gate_up silu epilogue stays unsplit and right whatever split is forced: against the
// reference matmul (rounded to bf16, as y would hold it) then silu_mul, m = 1..8.
TEST(CudaOps, GemvSiluEpilogueUnderForcedSplit) {
  const int64_t half = 131, n = 2 * half, k = 4104;
  std::mt19937 rng(3);
  Tensor x(DType::kBF16, kGemvMaxM * k), w(DType::kBF16, n * k), b(DType::kBF16, n), out(DType::kBF16, kGemvMaxM * half);
  x.fill_uniform(rng, -1, 1);
  w.fill_uniform(rng, -0.1f, 0.1f);
  b.fill_uniform(rng, -1, 1);
  for (auto* t : {&x, &w, &b}) t->to_device();
  for (int split : {1, 4})
    for (int64_t m = 1; m <= kGemvMaxM; ++m) {
      SCOPED_TRACE(::testing::Message() << "split=" << split << " m=" << m);
      GemvTuning tune(split, 1);
      out.fill_nan();
      out.to_device();
      const ops::MatmulParams p{x.dev, DType::kBF16, k, ops::dense_weight(w.dev, DType::kBF16), b.dev, DType::kBF16,
                                nullptr, DType::kBF16, n, m, n, k, false};
      const SiluMulOut silu{.out = out.dev, .ld_out = half};
      run_gemv(p, out, &silu);
      std::vector<uint8_t> gu(static_cast<size_t>(2 * m * n)), want = out.host;
      ops::MatmulParams r = p;
      r.x = x.host.data();
      r.w.data = w.host.data();
      r.bias = b.host.data();
      r.y = gu.data();
      ops::ref::matmul(r);
      ops::ref::silu_mul({gu.data(), gu.data() + 2 * half, want.data(), DType::kBF16, m, half, n, n, half});
      std::vector<bool> mask(static_cast<size_t>(out.n));
      for (int64_t i = 0; i < m * half; ++i) mask[static_cast<size_t>(i)] = true;
      expect_close(out, want, 2e-2f, "gemv silu", mask);
    }
}

TEST(CudaOps, MatmulCublasLt) {
  for (int64_t m : {9, 16, 33, 128})
    for (int64_t n : {64, 257})
      for (int64_t k : {64, 520}) check_matmul({m, n, k, n == 257, m == 33, DType::kBF16, 8});
  check_matmul({40, 96, 128, true, true, DType::kF32, 0});
  check_matmul({17, 64, 64, true, false, DType::kBF16, 0, DType::kF32});
}

TEST(CudaOps, MatmulGenericOddK) {
  check_matmul({3, 11, 13, true, false, DType::kBF16, 1});   // k % 8 != 0: neither fast path
  check_matmul({12, 5, 7, false, true, DType::kF32, 0});
}

// Weight formats the backend has no kernels for are refused by name, never run as another
// format (issue 14): an unknown scheme, dense with a non-float dtype, dense with quantization fields.
TEST(CudaOps, MatmulUnknownWeightFormatIsNamed) {
  Tensor x(DType::kBF16, 2 * 16), w(DType::kBF16, 3 * 16), y(DType::kBF16, 2 * 3);
  for (auto* t : {&x, &w, &y}) t->to_device();
  ops::MatmulParams p{x.dev, DType::kBF16, 16, ops::dense_weight(w.dev, DType::kBF16), nullptr, DType::kBF16,
                      y.dev, DType::kBF16, 3, 2, 3, 16, false};
  ASSERT_TRUE(backend()->matmul(p).is_ok());
  p.w.format.scheme = static_cast<ops::WeightScheme>(77);
  Status st = backend()->matmul(p);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("weight format 'scheme#77 bf16'"), std::string::npos) << st.to_string();
  EXPECT_NE(st.message().find("unknown weight scheme 77"), std::string::npos) << st.to_string();
  p.w.format = ops::dense_format(DType::kI8);
  st = backend()->matmul(p);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("weight format 'dense i8'"), std::string::npos) << st.to_string();
  p.w.format = ops::dense_format(DType::kBF16);
  p.w.format.group_k = 128;
  st = backend()->matmul(p);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("group_k=128"), std::string::npos) << st.to_string();
}

void check_rope(DType t, int rotary_dim, float factor) {
  std::mt19937 rng(static_cast<unsigned>(rotary_dim));
  const int64_t n_tok = 6;
  const int n_head = 4, n_kv = 2, hd = 64;
  const int64_t ld_q = n_head * hd + 8, ld_k = n_kv * hd + 8;
  Tensor q(t, n_tok * ld_q), k(t, n_tok * ld_k);
  q.fill_uniform(rng, -1, 1);
  k.fill_uniform(rng, -1, 1);
  q.to_device();
  k.to_device();
  std::vector<int32_t> pos(n_tok);
  for (auto& v : pos) v = static_cast<int32_t>(rng() % 5000);
  std::vector<float> inv(static_cast<size_t>(rotary_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.f, -2.f * static_cast<float>(i) / static_cast<float>(rotary_dim));
  DevInts di;
  ops::RopeParams p{q.dev, k.dev, t, di(pos), di.floats(inv), n_tok, ld_q, ld_k, n_head, n_kv, hd, rotary_dim, factor};
  ASSERT_TRUE(backend()->rope(p).is_ok());
  std::vector<uint8_t> wq = q.host, wk = k.host;
  ops::RopeParams r = p;
  r.q = wq.data();
  r.k = wk.data();
  r.positions = pos.data();
  r.inv_freq = inv.data();
  ops::ref::rope(r);
  // fp32 angles at position ~5000 differ from double ones by ~5e-4 rad, as in PyTorch.
  expect_close(q, wq, t == DType::kF32 ? 2e-3f : 2e-2f, "rope q");
  expect_close(k, wk, t == DType::kF32 ? 2e-3f : 2e-2f, "rope k");
}

TEST(CudaOps, Rope) {
  for (DType t : {DType::kBF16, DType::kF32}) {
    check_rope(t, 64, 1.f);
    check_rope(t, 32, 1.f);
    check_rope(t, 64, 1.2f);
  }
}

TEST(CudaOps, SiluMulAndGather) {
  for (DType t : {DType::kBF16, DType::kF32}) {
    std::mt19937 rng(5);
    const int64_t n_tok = 7, dim = 1001, ld = 2 * dim + 4;
    Tensor gu(t, n_tok * ld), out(t, n_tok * dim);
    gu.fill_uniform(rng, -6, 6);
    out.fill_nan();
    gu.to_device();
    out.to_device();
    auto* g = static_cast<uint8_t*>(gu.dev);
    ops::SiluMulParams p{gu.dev, g + dtype_bytes(t, dim), out.dev, t, n_tok, dim, ld, ld, dim};
    ASSERT_TRUE(backend()->silu_mul(p).is_ok());
    std::vector<uint8_t> want = out.host;
    ops::ref::silu_mul({gu.host.data(), gu.host.data() + dtype_bytes(t, dim), want.data(), t, n_tok, dim, ld, ld, dim});
    expect_close(out, want, tol_for(t), "silu_mul");

    Tensor rows_out(DType::kF32, 3 * (dim + 1));
    rows_out.fill_nan();
    rows_out.to_device();
    std::vector<int32_t> rows = {6, 0, 3};
    DevInts di;
    ops::GatherRowsParams gp{out.dev, t, dim, di(rows), rows_out.dev, DType::kF32, dim + 1, 3, dim};
    ASSERT_TRUE(backend()->gather_rows(gp).is_ok());
    std::vector<uint8_t> want_rows = rows_out.host;
    ops::ref::gather_rows({want.data(), t, dim, rows.data(), want_rows.data(), DType::kF32, dim + 1, 3, dim});
    std::vector<bool> mask(static_cast<size_t>(rows_out.n));
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < dim; ++j) mask[static_cast<size_t>(i * (dim + 1) + j)] = true;
    expect_close(rows_out, want_rows, tol_for(t), "gather_rows", mask);
  }
}

TEST(CudaOps, KvWriteSkipsNegativeSlots) {
  std::mt19937 rng(9);
  const int n_blocks = 5, bs = 4, n_kv = 2, hd = 64;
  const int64_t n_tok = 6, row = n_kv * hd, ld = row + 8;
  Tensor k(DType::kBF16, n_tok * ld), v(DType::kBF16, n_tok * ld);
  Tensor kc(DType::kBF16, int64_t{n_blocks} * bs * row), vc(DType::kBF16, int64_t{n_blocks} * bs * row);
  for (auto* t : {&k, &v, &kc, &vc}) {
    t->fill_uniform(rng, -1, 1);
    t->to_device();
  }
  std::vector<int32_t> slots = {3, -1, 17, 0, 19, -1};
  DevInts di;
  ops::KvWriteParams p{{kc.dev, vc.dev, DType::kBF16, n_blocks, bs, n_kv, hd}, k.dev, v.dev, DType::kBF16, ld, ld, di(slots), n_tok};
  ASSERT_TRUE(backend()->kv_write(p).is_ok());
  std::vector<uint8_t> wk = kc.host, wv = vc.host;
  ops::KvWriteParams r = p;
  r.cache.k_cache = wk.data();
  r.cache.v_cache = wv.data();
  r.k = k.host.data();
  r.v = v.host.data();
  r.slot_mapping = slots.data();
  ops::ref::kv_write(r);
  expect_close(kc, wk, 0.f, "kv_write k");
  expect_close(vc, wv, 0.f, "kv_write v");
}

// moe_experts on an expert-parallel rank (experts 2..3 of 6): the range fields are checked on
// the host with messages naming them; on the device an id outside [0, n_routed) (which the
// host cannot see) is read as another rank's expert and adds nothing, never out of bounds.
// The routing kernel's two top-k selections (the one-pass ranks up to 64 values, the arg-max
// rounds) against each other and the reference: the same experts, order and weights, bit for bit
// between the two, on distinct logits, on logits with four-way ties (the lower id wins), and for
// the group choice of the group-limited methods. NaN logits: the rank selection still returns
// distinct ids in range (the lowest ids, as all scores are NaN), which the experts can index.
TEST(CudaOps, MoeRouteRankSelection) {
  struct Restore { ~Restore() { set_moe_route_rank(-1); } } restore;
  struct Case { ops::MoeScoring scoring; ops::MoeTopk method; int32_t E, K, G, TG; };
  const Case cases[] = {{ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 64, 6, 1, 1},
                        {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 37, 16, 1, 1},
                        {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, 8, 8, 1, 1},
                        {ops::MoeScoring::kSigmoid, ops::MoeTopk::kNoauxTc, 64, 8, 8, 3},
                        {ops::MoeScoring::kSoftmax, ops::MoeTopk::kGroupLimitedGreedy, 48, 4, 16, 5}};
  std::mt19937 rng(42);
  for (const Case& c : cases)
    for (int kind = 0; kind < 3; ++kind) {  // distinct, ties, NaN
      const int64_t T = 9, E = c.E, K = c.K;
      const std::string what = "E=" + std::to_string(E) + " K=" + std::to_string(K) + " kind=" + std::to_string(kind);
      std::vector<float> logits(static_cast<size_t>(T * E));
      std::vector<int32_t> perm(static_cast<size_t>(E));
      for (int64_t t = 0; t < T; ++t) {
        for (int32_t e = 0; e < E; ++e) perm[static_cast<size_t>(e)] = kind == 1 ? e / 4 * 4 : e;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int32_t e = 0; e < E; ++e)
          logits[static_cast<size_t>(t * E + e)] = -3.7f + 7.0f * static_cast<float>(perm[static_cast<size_t>(e)]) / static_cast<float>(E);
        if (kind == 2) logits[static_cast<size_t>(t * E + t % E)] = NAN;
      }
      DevInts di;
      float* dl = di.floats(logits);
      auto run = [&](int rank, std::vector<int32_t>* idx, std::vector<float>* w) {
        set_moe_route_rank(rank);
        int32_t* didx = di(std::vector<int32_t>(static_cast<size_t>(T * K), -1));
        float* dw = di.floats(std::vector<float>(static_cast<size_t>(T * K), -1.f));
        ops::MoeRouteParams p{.logits = dl, .ld_logits = E, .bias = nullptr, .bias_dtype = DType::kF32, .n_tokens = T,
                              .n_experts = c.E, .top_k = c.K, .n_group = c.G, .topk_group = c.TG, .scoring = c.scoring,
                              .method = c.method, .norm_topk_prob = true, .routed_scaling_factor = 1.5f,
                              .topk_idx = didx, .topk_weight = dw, .dense_weight = nullptr};
        ASSERT_TRUE(backend()->moe_route(p).is_ok()) << what;
        idx->resize(static_cast<size_t>(T * K));
        w->resize(static_cast<size_t>(T * K));
        ASSERT_TRUE(backend()->download(idx->data(), didx, idx->size() * 4).is_ok());
        ASSERT_TRUE(backend()->download(w->data(), dw, w->size() * 4).is_ok());
      };
      std::vector<int32_t> idx_rank, idx_rounds;
      std::vector<float> w_rank, w_rounds;
      run(1, &idx_rank, &w_rank);
      if (kind == 2) {
        for (int64_t t = 0; t < T; ++t) {
          std::vector<int32_t> row(idx_rank.begin() + t * K, idx_rank.begin() + (t + 1) * K);
          for (int32_t i : row) EXPECT_TRUE(i >= 0 && i < E) << what << " token " << t << " id " << i;
          std::sort(row.begin(), row.end());
          EXPECT_TRUE(std::adjacent_find(row.begin(), row.end()) == row.end()) << what << " token " << t;
        }
        continue;
      }
      run(0, &idx_rounds, &w_rounds);
      EXPECT_EQ(idx_rank, idx_rounds) << what;
      EXPECT_EQ(0, std::memcmp(w_rank.data(), w_rounds.data(), w_rank.size() * 4)) << what;
      std::vector<int32_t> want_idx(static_cast<size_t>(T * K));
      std::vector<float> want_w(static_cast<size_t>(T * K));
      ops::ref::moe_route({.logits = logits.data(), .ld_logits = E, .bias = nullptr, .bias_dtype = DType::kF32, .n_tokens = T,
                           .n_experts = c.E, .top_k = c.K, .n_group = c.G, .topk_group = c.TG, .scoring = c.scoring,
                           .method = c.method, .norm_topk_prob = true, .routed_scaling_factor = 1.5f,
                           .topk_idx = want_idx.data(), .topk_weight = want_w.data(), .dense_weight = nullptr});
      EXPECT_EQ(idx_rank, want_idx) << what;
      for (size_t i = 0; i < want_w.size(); ++i) EXPECT_NEAR(w_rank[i], want_w[i], 1e-5) << what << " weight " << i;
    }
}

TEST(CudaOps, MoeExpertsSubsetRanges) {
  std::mt19937 rng(22);
  const int64_t n_tok = 3, hidden = 16, inter = 8;
  const int32_t n_local = 2, first = 2, n_routed = 6, top_k = 2;
  Tensor x(DType::kBF16, n_tok * hidden), out(DType::kBF16, n_tok * hidden);
  std::vector<std::unique_ptr<Tensor>> w;  // gate[2], up[2], down[2]
  std::vector<ops::WeightView> views;
  for (int m = 0; m < 3 * n_local; ++m) {
    w.push_back(std::make_unique<Tensor>(DType::kBF16, hidden * inter));
    views.push_back(ops::dense_weight(w.back()->dev, DType::kBF16));
  }
  for (Tensor* t : {&x, &out}) t->fill_uniform(rng, -1, 1);
  for (auto& t : w) t->fill_uniform(rng, -0.5f, 0.5f);
  for (Tensor* t : {&x, &out}) t->to_device();
  for (auto& t : w) t->to_device();
  Tensor dviews(DType::kF32, static_cast<int64_t>((views.size() * sizeof(ops::WeightView) + 3) / 4));
  std::memcpy(dviews.host.data(), views.data(), views.size() * sizeof(ops::WeightView));
  dviews.to_device();
  const int64_t scratch_bytes = ops::moe_experts_scratch_bytes(n_tok, top_k, n_local, hidden, inter);
  Tensor scratch(DType::kF32, scratch_bytes / 4);
  // token 0: local expert 2 and another rank's 0; token 1: bad -4 and local 3; token 2: bad only.
  const std::vector<int32_t> idx = {2, 0, -4, 3, 9, 1000};
  const std::vector<float> wt = {0.75f, 0.25f, 0.5f, 0.5f, 1.0f, 1.0f};
  DevInts di;
  const auto* dv = static_cast<const ops::WeightView*>(dviews.dev);
  ops::MoeExpertsParams p{.x = x.dev, .act_dtype = DType::kBF16, .ld_x = hidden, .out = out.dev, .ld_out = hidden,
                          .n_tokens = n_tok, .hidden = hidden, .inter = inter, .n_experts = n_local, .top_k = top_k,
                          .topk_idx = di(idx), .topk_weight = di.floats(wt), .gate = dv, .up = dv + n_local,
                          .down = dv + 2 * n_local, .format = views[0].format, .scratch = scratch.dev,
                          .scratch_bytes = scratch_bytes, .first_expert = first, .n_routed = n_routed};
  auto refused = [&](ops::MoeExpertsParams q, const char* field) {
    q.n_tokens = 0;  // the load-time probe's form: nothing launched either way
    const Status st = backend()->moe_experts(q);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << field << ": " << st.to_string();
    EXPECT_NE(st.message().find(field), std::string::npos) << st.to_string();
  };
  for (const auto& [f, r] : {std::pair{-1, n_routed}, {5, n_routed}, {first, 3}, {first, ops::kMoeMaxExperts + 1}}) {
    ops::MoeExpertsParams q = p;
    q.first_expert = f, q.n_routed = r;
    refused(q, "first_expert");
  }
  ops::MoeExpertsParams q = p;
  q.top_k = n_routed + 1;
  refused(q, "top_k");
  q.top_k = 3;  // more than this rank's 2 experts, fewer than the 6 routed: valid
  q.n_tokens = 0;
  EXPECT_TRUE(backend()->moe_experts(q).is_ok());

  // The oracle with the bad ids replaced by another rank's valid one (what the kernels do).
  std::vector<int32_t> ref_idx = idx;
  for (auto& g : ref_idx)
    if (g < 0 || g >= n_routed) g = 0;
  std::vector<ops::WeightView> hviews;
  for (auto& t : w) hviews.push_back(ops::dense_weight(t->host.data(), DType::kBF16));
  std::vector<uint8_t> want = out.host;
  ops::MoeExpertsParams r = p;
  r.x = x.host.data(), r.out = want.data(), r.topk_idx = ref_idx.data(), r.topk_weight = wt.data();
  r.gate = hviews.data(), r.up = hviews.data() + n_local, r.down = hviews.data() + 2 * n_local;
  ops::ref::moe_experts(r);
  // The tiny path (6 pairs), the GEMVs (1 row per routed expert on average), then the streaming
  // kernels (asked for at every size): all skip the bad ids.
  const MoeStream stream_was = moe_stream();
  for (const auto& [mode, tiny, path] : {std::tuple{MoeStream::kDecode, kMoeTinyPairs, MoePath::kTiny},
                                         {MoeStream::kDecode, 0, MoePath::kGemv}, {MoeStream::kAll, 0, MoePath::kStream}}) {
    const std::string what = std::string("moe_experts subset ") + moe_path_name(path);
    out.to_device();  // the starting values again
    set_moe_stream(mode);
    set_moe_tiny_pairs(tiny);
    EXPECT_EQ(moe_experts_path(p), path) << what;
    const Status st = backend()->moe_experts(p);
    set_moe_stream(stream_was);
    set_moe_tiny_pairs(-1);
    ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
    expect_close(out, want, tol_for(DType::kBF16), what);
    std::vector<uint8_t> got;
    out.from_device(&got, what);
    const size_t row = static_cast<size_t>(hidden) * 2;  // token 2 (only bad ids): untouched, bit for bit
    EXPECT_TRUE(std::equal(got.begin() + 2 * row, got.end(), out.host.begin() + 2 * row)) << what;
    EXPECT_FALSE(std::equal(got.begin(), got.begin() + row, out.host.begin())) << what;  // token 0 got expert 2
  }
}

// One way to run the expert GEMMs: the switches, and the path they must give (stream_u: the
// streaming kernels' quads a warp an iteration, 0 for the default; tiny: the tiny path's bound
// in pairs, 0 off).
struct MoeRun {
  MoeStream stream;
  MoeMma mma;
  MoePath path;
  int stream_u = 0;
  int tiny = 0;
};

// moe_experts with chosen rows per expert (counts[e] pairs routed to expert e, top_k = 2), once
// per run in `runs` (each asserting its path), against the reference: tokens shuffled over the expert order, each
// token's two experts in either order. Shapes: K and N multiples of 64; multiples of 8 only (the
// K tail and the column tails of gate_up's 64-column and down's 128-column blocks, with expert
// 3's gate 2 bytes off 16-byte alignment, so its chunks take the scalar loads); odd (every load
// scalar, a padded x row).
void check_moe_rows(const std::vector<int32_t>& counts, const std::vector<MoeRun>& runs) {
  struct Shape { int64_t hidden, inter, ld_x; bool misaligned; };
  const int32_t E = static_cast<int32_t>(counts.size()), top_k = 2;
  int64_t pairs = 0;
  std::string name = "moe_experts rows";
  for (int32_t c : counts) pairs += c, name += " " + std::to_string(c);
  const int64_t n_tok = pairs / top_k;
  std::vector<int32_t> sorted;  // expert ids in order, counts[e] of each
  for (int32_t e = 0; e < E; ++e) sorted.insert(sorted.end(), static_cast<size_t>(counts[static_cast<size_t>(e)]), e);
  std::mt19937 rng(static_cast<unsigned>(pairs));
  std::vector<int32_t> order(static_cast<size_t>(n_tok));
  for (int64_t t = 0; t < n_tok; ++t) order[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  std::shuffle(order.begin(), order.end(), rng);
  // Token order[t] gets sorted[t] and sorted[t + n_tok]: distinct while no count exceeds n_tok.
  std::vector<int32_t> idx(static_cast<size_t>(pairs));
  std::vector<float> wt(static_cast<size_t>(pairs));
  for (int64_t t = 0; t < n_tok; ++t) {
    const size_t tok = static_cast<size_t>(order[static_cast<size_t>(t)]);
    int32_t a = sorted[static_cast<size_t>(t)], b = sorted[static_cast<size_t>(t + n_tok)];
    ASSERT_NE(a, b) << name;
    if (t % 2) std::swap(a, b);
    idx[2 * tok] = a, idx[2 * tok + 1] = b;
    wt[2 * tok] = std::uniform_real_distribution<float>(0.f, 1.f)(rng);
    wt[2 * tok + 1] = std::uniform_real_distribution<float>(0.f, 1.f)(rng);
  }
  for (const Shape s : {Shape{256, 192, 256, false}, Shape{200, 136, 200, true}, Shape{37, 21, 42, false}}) {
    Tensor x(DType::kBF16, n_tok * s.ld_x), out(DType::kBF16, n_tok * s.hidden);
    x.fill_uniform(rng, -1, 1);
    out.fill_uniform(rng, -1, 1);
    x.to_device();
    std::vector<std::unique_ptr<Tensor>> w;  // gate[E], up[E], down[E], one spare element each
    std::vector<ops::WeightView> views, hviews;
    for (int m = 0; m < 3 * E; ++m) {
      w.push_back(std::make_unique<Tensor>(DType::kBF16, s.hidden * s.inter + 1));
      w.back()->fill_uniform(rng, -0.3f, 0.3f);
      w.back()->to_device();
      const size_t off = s.misaligned && m == 3 ? 2 : 0;
      views.push_back(ops::dense_weight(static_cast<uint8_t*>(w.back()->dev) + off, DType::kBF16));
      hviews.push_back(ops::dense_weight(w.back()->host.data() + off, DType::kBF16));
    }
    Tensor dviews(DType::kF32, static_cast<int64_t>((views.size() * sizeof(ops::WeightView) + 3) / 4));
    std::memcpy(dviews.host.data(), views.data(), views.size() * sizeof(ops::WeightView));
    dviews.to_device();
    const int64_t scratch_bytes = ops::moe_experts_scratch_bytes(n_tok, top_k, E, s.hidden, s.inter);
    Tensor scratch(DType::kF32, scratch_bytes / 4);
    DevInts di;
    const auto* dv = static_cast<const ops::WeightView*>(dviews.dev);
    ops::MoeExpertsParams p{.x = x.dev, .act_dtype = DType::kBF16, .ld_x = s.ld_x, .out = out.dev, .ld_out = s.hidden,
                            .n_tokens = n_tok, .hidden = s.hidden, .inter = s.inter, .n_experts = E, .top_k = top_k,
                            .topk_idx = di(idx), .topk_weight = di.floats(wt), .gate = dv, .up = dv + E,
                            .down = dv + 2 * E, .format = views[0].format, .scratch = scratch.dev,
                            .scratch_bytes = scratch_bytes};
    std::vector<uint8_t> want = out.host;
    ops::MoeExpertsParams r = p;
    r.x = x.host.data(), r.out = want.data(), r.topk_idx = idx.data(), r.topk_weight = wt.data();
    r.gate = hviews.data(), r.up = hviews.data() + E, r.down = hviews.data() + 2 * E;
    ops::ref::moe_experts(r);
    const MoeMma mma_was = moe_mma();
    const MoeStream stream_was = moe_stream();
    for (const MoeRun& run : runs) {
      const std::string what = name + " hidden=" + std::to_string(s.hidden) + " inter=" + std::to_string(s.inter) + " " +
                               moe_path_name(run.path) + (run.stream_u ? " u=" + std::to_string(run.stream_u) : "");
      out.to_device();  // the starting values again
      set_moe_stream(run.stream);
      set_moe_mma(run.mma);
      set_moe_stream_u(run.stream_u);
      set_moe_tiny_pairs(run.tiny);
      EXPECT_EQ(moe_experts_path(p), run.path) << what << ": ran " << moe_path_name(moe_experts_path(p));
      const Status st = backend()->moe_experts(p);
      set_moe_stream(stream_was);
      set_moe_mma(mma_was);
      set_moe_stream_u(0);
      set_moe_tiny_pairs(-1);
      ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
      expect_close(out, want, tol_for(DType::kBF16), what);
    }
  }
}

// 0, 1, 17, 33, 64 and 85 rows (none, one, past one and two 8-token n-tiles and 16-row MMA
// tiles, one whole 64-row tile, a 64-row tile and a 21-row one), 33 on average: the streaming
// kernels by default (4 quads a warp an iteration, and 2); the mma.sync kernels where asked
// for (an explicit ask wins); the 16-row WMMA tiles (the A/B baseline) with both off.
TEST(CudaOps, MoeExpertsRowsPerExpert) {
  check_moe_rows({0, 1, 17, 33, 64, 85}, {{MoeStream::kDecode, MoeMma::kOff, MoePath::kStream},
                                         {MoeStream::kDecode, MoeMma::kOff, MoePath::kStream, 2},
                                         {MoeStream::kDecode, MoeMma::kDecode, MoePath::kMma},
                                         {MoeStream::kOff, MoeMma::kOff, MoePath::kWmma16}});
}

// 100 rows per expert on average (130 and 200: three and four 64-row tiles, the last partial):
// the 64-row WMMA tiles by default; the streaming and the mma.sync kernels when asked for at
// every size.
TEST(CudaOps, MoeExpertsRowsPerExpertLarge) {
  check_moe_rows({0, 1, 70, 130, 200, 199}, {{MoeStream::kDecode, MoeMma::kOff, MoePath::kWmma64},
                                             {MoeStream::kAll, MoeMma::kOff, MoePath::kStream},
                                             {MoeStream::kDecode, MoeMma::kAll, MoePath::kMma}});
}

// 4 rows per expert on average (5, 16 and 9: a partial n-tile, two whole ones, two with the
// second partial): the GEMVs by default, the streaming kernels when asked for at every size.
TEST(CudaOps, MoeExpertsRowsPerExpertSmall) {
  check_moe_rows({0, 1, 5, 16, 9, 1, 0, 0}, {{MoeStream::kDecode, MoeMma::kOff, MoePath::kGemv},
                                             {MoeStream::kAll, MoeMma::kOff, MoePath::kStream}});
}

}  // namespace
}  // namespace frugal::cuda::testing
