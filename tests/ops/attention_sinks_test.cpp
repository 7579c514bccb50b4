// Window + sinks attention against a hand-built mask: head_dim 1, all keys 0 (every visible key
// scores the same, so the output is the plain mean of the visible values) and value j = j.
// Context 10, window 3, sinks 2: query position 9 sees {0, 1} and {7, 8, 9}, mean 5; position 3
// sees {0, 1} and {1, 2, 3} = {0, 1, 2, 3} (a sink inside the window counts once), mean 1.5;
// position 1 sees {0, 1}, mean 0.5. Without sinks, position 9 sees {7, 8, 9}, mean 8.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backends.h"
#include "ops/params.h"
#include "ops/reference.h"

namespace frugal::testing {
namespace {

std::vector<float> run(ops::Backend* b, int32_t window, int32_t sinks) {
  constexpr int32_t kCtx = 10, kBlock = 4, kBlocks = 3;
  std::vector<float> kc(kBlocks * kBlock, 0.0f), vc(kBlocks * kBlock, 0.0f), q(kCtx, 1.0f), out(kCtx, -1.0f);
  std::vector<int32_t> table = {2, 0, 1};  // scattered blocks
  for (int32_t j = 0; j < kCtx; ++j) vc[static_cast<size_t>(table[j / kBlock] * kBlock + j % kBlock)] = static_cast<float>(j);
  std::vector<int32_t> q_start = {0, kCtx}, ctx = {kCtx};
  auto up = [&](const void* h, size_t n) {
    auto buf = ops::DeviceBuffer::create(b, n);
    EXPECT_TRUE(buf.is_ok());
    EXPECT_TRUE(b->upload(buf->data(), h, n).is_ok());
    return std::move(buf).value();
  };
  auto dk = up(kc.data(), kc.size() * 4), dv = up(vc.data(), vc.size() * 4), dq = up(q.data(), q.size() * 4);
  auto dout = up(out.data(), out.size() * 4), dqs = up(q_start.data(), 8), dctx = up(ctx.data(), 4);
  auto dtab = up(table.data(), table.size() * 4);
  ops::AttentionParams p{.cache = {.k_cache = dk.data(), .v_cache = dv.data(), .cache_dtype = DType::kF32,
                                   .n_blocks = kBlocks, .block_size = kBlock, .n_head_kv = 1, .head_dim = 1},
                         .q = dq.data(), .out = dout.data(), .act_dtype = DType::kF32, .ld_q = 1, .ld_out = 1,
                         .n_seqs = 1, .n_tokens = kCtx, .q_start = static_cast<const int32_t*>(dqs.data()),
                         .ctx_len = static_cast<const int32_t*>(dctx.data()),
                         .block_tables = static_cast<const int32_t*>(dtab.data()), .max_blocks_per_seq = 3,
                         .max_ctx_len = kCtx, .n_head = 1, .sliding_window = window, .scale = 1.0f,
                         .sink_tokens = sinks};
  EXPECT_TRUE(b->attention(p).is_ok());
  EXPECT_TRUE(b->download(out.data(), dout.data(), out.size() * 4).is_ok());
  return out;
}

TEST(AttentionSinksTest, HandBuiltMask) {
  for (const char* name : {"ref", "cpu"}) {
    SCOPED_TRACE(name);
    auto b = make_backend_by_name(name);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    const std::vector<float> got = run(b->get(), 3, 2);
    // Each position's visible set by hand: sinks {0, 1} below the window (p - 3, p].
    EXPECT_FLOAT_EQ(got[0], 0.0f);   // {0}
    EXPECT_FLOAT_EQ(got[1], 0.5f);   // {0, 1}
    EXPECT_FLOAT_EQ(got[2], 1.0f);   // {0, 1, 2}
    EXPECT_FLOAT_EQ(got[3], 1.5f);   // {0, 1, 2, 3}
    EXPECT_FLOAT_EQ(got[4], 2.0f);   // {0, 1} + {2, 3, 4}: 10 / 5
    EXPECT_FLOAT_EQ(got[5], 2.6f);   // {0, 1} + {3, 4, 5}: 13 / 5
    EXPECT_FLOAT_EQ(got[9], 5.0f);   // {0, 1} + {7, 8, 9}: 25 / 5
    const std::vector<float> plain = run(b->get(), 3, 0);
    EXPECT_FLOAT_EQ(plain[9], 8.0f);  // {7, 8, 9}
    EXPECT_FLOAT_EQ(plain[1], 0.5f);  // {0, 1}
  }
}

}  // namespace
}  // namespace frugal::testing
