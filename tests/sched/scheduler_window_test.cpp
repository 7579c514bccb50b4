// Window + sinks in the scheduler (--kv-window W --kv-sinks S, docs/kv_cache.md): blocks wholly
// behind the window that hold no sink go back to the pool as a sequence grows, so a sequence
// longer than the pool runs when its window fits. Block size 4; the expected steps and tables
// below were worked out by hand from the rule "the next query at p sees [0, S) and (p - W, p]".
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "sched/scheduler.h"

namespace frugal::sched {
namespace {

std::vector<int32_t> prompt(int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 100);
  return v;
}

struct WindowRun {
  std::vector<ScheduledBatch> batches;
  std::vector<int32_t> live_blocks;  // blocks held by the sequence in each step
  std::vector<FinishedSeq> finished;
};

// Drives one sequence to its end, sampling token 7 every time.
WindowRun run_one(Scheduler& s, kv::BlockPool& pool) {
  WindowRun r;
  for (int guard = 0; guard < 1000 && s.has_unfinished(); ++guard) {
    ScheduledBatch b = s.schedule();
    EXPECT_FALSE(b.empty());
    if (b.empty()) break;
    std::vector<SampledToken> sampled;
    for (const auto& q : b.seqs) {
      if (q.needs_logits) sampled.push_back({q.id, 7});
      r.live_blocks.push_back(static_cast<int32_t>(
          std::count_if(q.block_table.begin(), q.block_table.end(), [](kv::BlockId id) { return id != kv::kNoBlock; })));
    }
    r.batches.push_back(b);
    auto done = s.on_step_done(sampled);
    EXPECT_TRUE(done.is_ok());
    for (auto& f : *done) r.finished.push_back(f);
    EXPECT_TRUE(pool.check_invariants().is_ok());
  }
  return r;
}

// W = 8, S = 2, budget 16: a 10-token prompt and 12 outputs. Step 1 computes positions 0..9;
// step k >= 2 decodes position 8 + k. After the step that computed up to c (exclusive), blocks
// i >= 1 with 4 (i + 1) <= c - 7 go back: block 1 (4..7) once c >= 15 (after step 6), block 2
// (8..11) once c >= 19 (after step 10). Block 0 holds the sinks and stays.
TEST(SchedulerWindow, BlocksBehindTheWindowGoBack) {
  auto pool = kv::BlockPool::create({.n_blocks = 16, .block_size = 4, .enable_prefix_caching = true});
  ASSERT_TRUE(pool.is_ok());
  auto s = Scheduler::create({.max_num_batched_tokens = 16, .max_num_seqs = 4, .kv_window = 8, .kv_sinks = 2}, &*pool);
  ASSERT_TRUE(s.is_ok());
  ASSERT_TRUE(s->add_request(1, prompt(10), {.max_tokens = 12}).is_ok());
  WindowRun r = run_one(*s, *pool);
  ASSERT_EQ(r.batches.size(), 12u);
  ASSERT_EQ(r.finished.size(), 1u);
  EXPECT_EQ(r.finished[0].output_tokens.size(), 12u);
  // Step 7 (index 6) decodes position 14 with ctx 15: table 0, -, 2, 3.
  const auto& t7 = r.batches[6].seqs[0].block_table;
  ASSERT_EQ(t7.size(), 4u);
  EXPECT_NE(t7[0], kv::kNoBlock);
  EXPECT_EQ(t7[1], kv::kNoBlock);
  EXPECT_NE(t7[2], kv::kNoBlock);
  // Step 6 still had block 1: released only after it.
  EXPECT_NE(r.batches[5].seqs[0].block_table[1], kv::kNoBlock);
  // Step 11 (index 10, position 18, ctx 19... table of 5 blocks): blocks 1 and 2 gone.
  const auto& t11 = r.batches[10].seqs[0].block_table;
  ASSERT_EQ(t11.size(), 5u);
  EXPECT_EQ(t11[1], kv::kNoBlock);
  EXPECT_EQ(t11[2], kv::kNoBlock);
  EXPECT_NE(t11[3], kv::kNoBlock);
  EXPECT_EQ(s->stats().n_window_released_blocks, 2);
  EXPECT_EQ(pool->n_used(), 0);
}

// A sequence of 39 KV tokens (10 + 30 - 1) in a 24-slot pool: refused without a window, run
// with W = 8, S = 2 and 4 tokens per step. Its peak (window_peak_tokens): sink slots 4 + span
// ((8 - 1 + 4 + 3) / 4 + 1) * 4 = 16, i.e. 20 <= 24. Live blocks never pass 5: the sink block
// plus the <= 11 positions (p - 7 .. p + 3) of a step, which touch at most 4 blocks.
TEST(SchedulerWindow, SequenceLongerThanThePoolRunsInItsWindow) {
  auto pool = kv::BlockPool::create({.n_blocks = 6, .block_size = 4, .enable_prefix_caching = true});
  ASSERT_TRUE(pool.is_ok());
  auto no_window = Scheduler::create({.max_num_batched_tokens = 4, .max_num_seqs = 4}, &*pool);
  ASSERT_TRUE(no_window.is_ok());
  const Status refused = no_window->add_request(1, prompt(10), {.max_tokens = 30});
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("needs up to 39 KV tokens"), std::string::npos) << refused.message();

  const SchedulerConfig cfg{.max_num_batched_tokens = 4, .max_num_seqs = 4, .kv_window = 8, .kv_sinks = 2};
  EXPECT_EQ(window_peak_tokens(cfg, 4, 39), 20);
  EXPECT_EQ(window_peak_tokens(cfg, 4, 12), 12);
  auto s = Scheduler::create(cfg, &*pool);
  ASSERT_TRUE(s.is_ok());
  ASSERT_TRUE(s->add_request(1, prompt(10), {.max_tokens = 30}).is_ok());
  WindowRun r = run_one(*s, *pool);
  ASSERT_EQ(r.finished.size(), 1u);
  EXPECT_EQ(r.finished[0].output_tokens.size(), 30u);
  EXPECT_EQ(s->stats().n_preemptions, 0);
  EXPECT_LE(*std::max_element(r.live_blocks.begin(), r.live_blocks.end()), 5);
  EXPECT_EQ(pool->n_used(), 0);
}

TEST(SchedulerWindow, SinksNeedAWindow) {
  auto pool = kv::BlockPool::create({.n_blocks = 4, .block_size = 4});
  ASSERT_TRUE(pool.is_ok());
  auto s = Scheduler::create({.kv_window = 0, .kv_sinks = 4}, &*pool);
  EXPECT_EQ(s.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("kv_sinks"), std::string::npos);
}

}  // namespace
}  // namespace frugal::sched
