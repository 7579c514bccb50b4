// CPU-backend specifics the shared harness does not cover: bad input becomes a Status naming the
// op and field (never a crash), the FRUGAL_ISA cap picks the kernels, and results do not depend
// on the number of threads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/cpu_features.h"

namespace frugal {
namespace {

bool mentions(const Status& st, const char* text) { return st.message().find(text) != std::string::npos; }

TEST(CpuBackendErrors, EmbeddingIdOutsideVocabulary) {
  auto b = make_cpu_backend();
  std::vector<float> table(4 * 3), out(2 * 3);
  std::vector<int32_t> ids = {1, 4};
  Status st = b->embedding({.table = table.data(), .table_dtype = DType::kF32, .ids = ids.data(),
                            .out = out.data(), .out_dtype = DType::kF32, .n_tokens = 2, .dim = 3, .vocab = 4});
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(mentions(st, "ids[1] = 4")) << st.to_string();
}

TEST(CpuBackendErrors, EmbeddingShardChecksTheFullVocabulary) {
  auto b = make_cpu_backend();
  std::vector<float> table(4 * 3), out(2 * 3);
  std::vector<int32_t> ids = {1, 10};  // rows [4, 8) of 10 ids: 1 is another rank's, 10 is no id
  ops::EmbeddingParams p{.table = table.data(), .table_dtype = DType::kF32, .ids = ids.data(), .out = out.data(),
                         .out_dtype = DType::kF32, .n_tokens = 2, .dim = 3, .vocab = 4, .vocab_begin = 4, .full_vocab = 10};
  Status st = b->embedding(p);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(mentions(st, "ids[1] = 10 is outside the vocabulary [0, 10)")) << st.to_string();
  p.vocab_begin = 8;  // [8, 12) is not inside [0, 10)
  ids[1] = 9;
  st = b->embedding(p);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(st, "vocab_begin")) << st.to_string();
}

TEST(CpuBackendErrors, MatmulStridesAndDtypes) {
  auto b = make_cpu_backend();
  std::vector<float> x(16), w(16), y(16);
  ops::MatmulParams p{.x = x.data(), .x_dtype = DType::kF32, .ld_x = 3, .w = ops::dense_weight(w.data(), DType::kF32),
                      .bias = nullptr, .bias_dtype = DType::kF32, .y = y.data(), .y_dtype = DType::kF32,
                      .ld_y = 2, .m = 2, .n = 2, .k = 4, .accumulate = false};
  Status st = b->matmul(p);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(st, "ld_x")) << st.to_string();
  p.ld_x = 4;
  p.w.format.dtype = DType::kI8;
  st = b->matmul(p);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(mentions(st, "weight format 'dense i8'")) << st.to_string();
  p.w.format.dtype = DType::kBF16;
  p.x_dtype = DType::kBF16;
  EXPECT_EQ(b->matmul(p).code(), ErrorCode::kUnsupported);
}

TEST(CpuBackendErrors, KvWriteSlotPastCache) {
  auto b = make_cpu_backend();
  std::vector<float> kc(2 * 4 * 8), vc(2 * 4 * 8), k(8), v(8);
  std::vector<int32_t> slots = {8};
  Status st = b->kv_write({.cache = {.k_cache = kc.data(), .v_cache = vc.data(), .cache_dtype = DType::kF32,
                                     .n_blocks = 2, .block_size = 4, .n_head_kv = 1, .head_dim = 8},
                           .k = k.data(), .v = v.data(), .act_dtype = DType::kF32, .ld_k = 8, .ld_v = 8,
                           .slot_mapping = slots.data(), .n_tokens = 1});
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(mentions(st, "slot_mapping[0] = 8")) << st.to_string();
}

ops::AttentionParams small_attention(std::vector<float>& kc, std::vector<float>& q, std::vector<float>& out,
                                     std::vector<int32_t>& q_start, std::vector<int32_t>& ctx,
                                     std::vector<int32_t>& table) {
  return {.cache = {.k_cache = kc.data(), .v_cache = kc.data(), .cache_dtype = DType::kF32, .n_blocks = 2,
                    .block_size = 4, .n_head_kv = 1, .head_dim = 8},
          .q = q.data(), .out = out.data(), .act_dtype = DType::kF32, .ld_q = 16, .ld_out = 16, .n_seqs = 1,
          .n_tokens = 2, .q_start = q_start.data(), .ctx_len = ctx.data(), .block_tables = table.data(),
          .max_blocks_per_seq = 2, .max_ctx_len = ctx[0], .n_head = 2, .sliding_window = 0, .scale = 0.35f};
}

TEST(CpuBackendErrors, AttentionIndexArrays) {
  auto b = make_cpu_backend();
  std::vector<float> kc(2 * 4 * 8), q(2 * 16), out(2 * 16);
  std::vector<int32_t> q_start = {0, 2}, ctx = {6}, table = {1, 2};
  Status st = b->attention(small_attention(kc, q, out, q_start, ctx, table));
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(mentions(st, "block_tables[1] = 2")) << st.to_string();
  table = {1, 0};
  ctx = {1};
  st = b->attention(small_attention(kc, q, out, q_start, ctx, table));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(st, "ctx_len 1")) << st.to_string();
  ctx = {9};
  st = b->attention(small_attention(kc, q, out, q_start, ctx, table));
  EXPECT_TRUE(mentions(st, "max_blocks_per_seq")) << st.to_string();
  ctx = {6};
  auto p = small_attention(kc, q, out, q_start, ctx, table);
  p.cache.n_head_kv = 2;
  p.n_head = 3;
  EXPECT_TRUE(mentions(b->attention(p), "multiple of n_head_kv"));
  EXPECT_TRUE(b->attention(small_attention(kc, q, out, q_start, ctx, table)).is_ok());
}

TEST(CpuBackendErrors, RopeRotaryDim) {
  auto b = make_cpu_backend();
  std::vector<float> q(16), inv(4);
  std::vector<int32_t> pos = {0};
  Status st = b->rope({.q = q.data(), .k = nullptr, .act_dtype = DType::kF32, .positions = pos.data(),
                       .inv_freq = inv.data(), .n_tokens = 1, .ld_q = 16, .ld_k = 0, .n_head = 2,
                       .n_head_kv = 1, .head_dim = 8, .rotary_dim = 7, .attention_factor = 1.0f});
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(st, "rotary_dim")) << st.to_string();
}

TEST(CpuBackendIsa, FrugalIsaCapsKernels) {
  auto b = make_cpu_backend();
  const char* cap = std::getenv("FRUGAL_ISA");
  if (cap && std::strcmp(cap, "scalar") == 0) {
    EXPECT_EQ(b->name(), "cpu-scalar");
  }
  if (cap && std::strcmp(cap, "avx2") == 0 && cpu_features().avx2) {
    EXPECT_EQ(b->name(), "cpu-avx2");
  }
  if (!cap && cpu_features().avx512f && cpu_features().avx512bw) {
    EXPECT_EQ(b->name(), "cpu-avx512");
  }
  std::printf("  kernels: %s\n", b->name().c_str());
}

// Work is split at fixed block boundaries and every output is summed in one fixed order, so the
// thread count must not change a single bit (a prerequisite for batch-invariant results).
TEST(CpuBackendThreads, MatmulBitIdenticalAcrossThreadCounts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t m : {1, 5, 40}) {
    const int64_t n = 301, k = 200;
    std::vector<float> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k));
    for (auto& v : x) v = dist(rng);
    for (auto& v : w) v = dist(rng);
    std::vector<std::vector<float>> ys;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      auto b = make_cpu_backend(&pool);
      std::vector<float> y(static_cast<size_t>(m * n));
      ASSERT_TRUE(b->matmul({.x = x.data(), .x_dtype = DType::kF32, .ld_x = k, .w = ops::dense_weight(w.data(), DType::kF32),
                             .bias = nullptr, .bias_dtype = DType::kF32, .y = y.data(),
                             .y_dtype = DType::kF32, .ld_y = n, .m = m, .n = n, .k = k, .accumulate = false})
                      .is_ok());
      ys.push_back(y);
    }
    EXPECT_EQ(ys[0], ys[1]) << "m=" << m;
    EXPECT_EQ(ys[0], ys[2]) << "m=" << m;
  }
}

}  // namespace
}  // namespace frugal
