// MLA's two per-head projections with DeepSeek-V2-Lite's shapes and layouts (deepseek.cpp):
// past the batched GEMV (m > 16) each is ONE strided-batched cuBLASLt matmul over the 16 heads,
// not a loop of per-head launches; it matches ops::ref and replays from a CUDA graph with new
// inputs. The op harness checks odd shapes and dtypes; this checks which path the real shapes take.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cuda/graph.h"
#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace frugal::cuda::testing {
namespace {

constexpr int64_t kHeads = 16, kRank = 512, kRope = 64, kNope = 128, kVdim = 128;
constexpr int64_t kQk = kNope + kRope, kLat = kRank + kRope;

// The buffers of one MLA layer for m tokens: q [m, H * qk], W_abs [H, lat, qk], qcat / ocat
// [m, H * lat], kv_b [H * (nope + v), rank] (W_UV[h] its rows h (nope + v) + nope ..), attn [m, H * v].
struct Mla {
  int64_t m;
  Tensor q, w_abs, qcat, ocat, kv_b, attn;
  explicit Mla(int64_t tokens)
      : m(tokens), q(DType::kBF16, tokens * kHeads * kQk), w_abs(DType::kBF16, kHeads * kLat * kQk),
        qcat(DType::kBF16, tokens * kHeads * kLat), ocat(DType::kBF16, tokens * kHeads * kLat),
        kv_b(DType::kBF16, kHeads * (kNope + kVdim) * kRank), attn(DType::kBF16, tokens * kHeads * kVdim) {}

  // The q absorption (q -> qcat) and W_UV (ocat -> attn) as deepseek.cpp calls them; `host`
  // points them at the host copies (for ops::ref).
  ops::BatchedMatmulParams absorb(bool host) {
    return {.x = host ? q.host.data() : q.dev, .x_dtype = DType::kBF16, .ld_x = kHeads * kQk, .stride_x = kQk,
            .w = host ? w_abs.host.data() : w_abs.dev, .w_dtype = DType::kBF16, .stride_w = kLat * kQk,
            .y = host ? qcat.host.data() : qcat.dev, .y_dtype = DType::kBF16, .ld_y = kHeads * kLat, .stride_y = kLat,
            .batch = kHeads, .m = m, .n = kLat, .k = kQk};
  }
  ops::BatchedMatmulParams w_uv(bool host) {
    const uint8_t* w =
        static_cast<const uint8_t*>(host ? kv_b.host.data() : kv_b.dev) + dtype_bytes(DType::kBF16, kNope * kRank);
    return {.x = host ? ocat.host.data() : ocat.dev, .x_dtype = DType::kBF16, .ld_x = kHeads * kLat, .stride_x = kLat,
            .w = w, .w_dtype = DType::kBF16, .stride_w = (kNope + kVdim) * kRank,
            .y = host ? attn.host.data() : attn.dev, .y_dtype = DType::kBF16, .ld_y = kHeads * kVdim,
            .stride_y = kVdim, .batch = kHeads, .m = m, .n = kVdim, .k = kRank};
  }
  // New inputs, NaN outputs (a cell the op should write and does not stays NaN and fails).
  void refill(std::mt19937& rng) {
    q.fill_uniform(rng, -1, 1);
    ocat.fill_uniform(rng, -1, 1);
    qcat.fill_nan();
    attn.fill_nan();
    for (auto* t : {&q, &ocat, &qcat, &attn}) t->to_device();
  }
  // Both projections on the host copies, compared with the device outputs.
  void check(const std::string& what) {
    std::vector<uint8_t> want_qcat = qcat.host, want_attn = attn.host;
    ops::BatchedMatmulParams a = absorb(true), v = w_uv(true);
    a.y = want_qcat.data();
    v.y = want_attn.data();
    ops::ref::batched_matmul(a);
    ops::ref::batched_matmul(v);
    expect_close(qcat, want_qcat, 2e-2f, what + ": q absorption");
    expect_close(attn, want_attn, 2e-2f, what + ": W_UV");
  }
};

TEST(CudaBatchedMatmul, MlaProjectionsAreOneCublasLtCallEach) {
  std::mt19937 rng(19);
  for (int64_t m : {17, 40, 130}) {  // the oracle's time bounds m (the engine runs up to 256)
    Mla l(m);
    l.w_abs.fill_uniform(rng, -0.1f, 0.1f);
    l.kv_b.fill_uniform(rng, -0.1f, 0.1f);
    l.w_abs.to_device();
    l.kv_b.to_device();
    l.refill(rng);
    const std::string what = "m=" + std::to_string(m);
    const int64_t before = backend()->lt_batched_calls();
    ASSERT_TRUE(backend()->batched_matmul(l.absorb(false)).is_ok()) << what;
    ASSERT_TRUE(backend()->batched_matmul(l.w_uv(false)).is_ok()) << what;
    EXPECT_EQ(backend()->lt_batched_calls(), before + 2)
        << what << ": a projection did not run as one batched cuBLASLt call";
    l.check(what);
  }
}

// At decode sizes (m <= 16) both projections run the batched GEMV: its default variant (2-4 rows
// a warp for W_abs's 16 x 576 rows, two chunks in flight for W_UV's k of 512, mla.cu) against the
// oracle and, bit for bit, against the one-row-a-warp variant (FRUGAL_BATCHED_GEMV=orig); the
// default variant with its first weights loaded before the PDL wait (mode 1, the default) and
// after it (mode 2, FRUGAL_BATCHED_GEMV_EARLY=0); m of 1
// (V2-Lite's batch-1 decode), 4 and 5 (either side of the 4-accumulator kernel) and 16.
TEST(CudaBatchedMatmul, MlaProjectionsBatchedGemvVariantsAgree) {
  std::mt19937 rng(21);
  const int mode_was = batched_gemv_mode();
  const bool early_was = batched_gemv_early();
  for (int64_t m : {1, 4, 5, 16}) {
    Mla l(m);
    l.w_abs.fill_uniform(rng, -0.1f, 0.1f);
    l.kv_b.fill_uniform(rng, -0.1f, 0.1f);
    l.w_abs.to_device();
    l.kv_b.to_device();
    l.refill(rng);
    std::vector<uint8_t> qcat[3], attn[3];
    for (int mode : {0, 1, 2}) {  // 2: mode 1 with the weights loaded after the PDL wait
      const std::string what = "m=" + std::to_string(m) + " batched GEMV mode " + std::to_string(mode);
      set_batched_gemv_mode(mode == 0 ? 0 : 1);
      set_batched_gemv_early(mode != 2);
      const int64_t before = backend()->lt_batched_calls();
      ASSERT_TRUE(backend()->batched_matmul(l.absorb(false)).is_ok()) << what;
      ASSERT_TRUE(backend()->batched_matmul(l.w_uv(false)).is_ok()) << what;
      EXPECT_EQ(backend()->lt_batched_calls(), before) << what << ": not the batched GEMV";
      l.check(what);
      l.qcat.from_device(&qcat[mode], what);
      l.attn.from_device(&attn[mode], what);
      l.qcat.fill_nan();
      l.attn.fill_nan();
      l.qcat.to_device();
      l.attn.to_device();
    }
    for (int mode : {1, 2}) {
      EXPECT_TRUE(qcat[0] == qcat[mode]) << "m=" << m << ": GEMV variant " << mode << " differs on the q absorption";
      EXPECT_TRUE(attn[0] == attn[mode]) << "m=" << m << ": GEMV variant " << mode << " differs on W_UV";
    }
  }
  set_batched_gemv_mode(mode_was);
  set_batched_gemv_early(early_was);
}

// Captured after an eager step (as ModelRunner does), replayed with new inputs in the same buffers.
TEST(CudaBatchedMatmul, MlaProjectionsReplayFromAGraph) {
  std::mt19937 rng(20);
  Mla l(33);
  l.w_abs.fill_uniform(rng, -0.1f, 0.1f);
  l.kv_b.fill_uniform(rng, -0.1f, 0.1f);
  l.w_abs.to_device();
  l.kv_b.to_device();
  auto record = [&]() -> Status {
    FRUGAL_RETURN_IF_ERROR(backend()->batched_matmul(l.absorb(false)));
    return backend()->batched_matmul(l.w_uv(false));
  };
  l.refill(rng);
  ASSERT_TRUE(record().is_ok());
  ASSERT_TRUE(backend()->synchronize().is_ok());
  GraphCache graphs(backend());
  ASSERT_TRUE(graphs.ensure(1, record).is_ok());
  for (int step = 0; step < 2; ++step) {
    l.refill(rng);
    ASSERT_TRUE(graphs.replay(1).is_ok());
    ASSERT_TRUE(backend()->synchronize().is_ok());
    l.check("graph replay " + std::to_string(step));
  }
}

}  // namespace
}  // namespace frugal::cuda::testing
