// Scheduler timelines. Each table was worked out by hand from the policy in docs/scheduler.md;
// the comment above a table shows the arithmetic. Block size is 4 everywhere so block counts are
// easy to follow. Outputs are checked against each prompt's solo run at the end of every test.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "timeline.h"

namespace frugal::sched::testing {
namespace {

constexpr SeqId A = 1, B = 2, C = 3, D = 4, E = 5;

SeqParams max_tokens(int32_t n) { return SeqParams{.max_tokens = n}; }

// Budget 8 tokens. A (3-token prompt, 4 outputs) decodes while B's 20-token prompt is prefilled
// in chunks of what the decodes leave: 8 - 1 = 7, 7, then the last 6 (with logits).
//   step 1: A prefill 3 (first output)          step 2: A decode 1 (out 2), B chunk 7 [0,7)
//   step 3: A decode 1 (out 3), B chunk 7 [7,14)  step 4: A decode 1 (out 4: done), B 6 [14,20)
//   step 5: B decode 1 (B's 2nd output: done)
TEST(SchedulerTimeline, ChunkedPrefillNextToDecodes) {
  Timeline t({.max_num_batched_tokens = 8, .max_num_seqs = 4},
             {.n_blocks = 32, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1, .arrivals = {{A, tokens(1, 3), max_tokens(4)}}, .scheduled = {{A, 3}}},
      {.step = 2, .arrivals = {{B, tokens(100, 20), max_tokens(2)}}, .scheduled = {{A, 1}, {B, 7}}},
      {.step = 3, .scheduled = {{A, 1}, {B, 7}}},
      {.step = 4, .scheduled = {{A, 1}, {B, 6}}, .finished = {A}},
      {.step = 5, .scheduled = {{B, 1}}, .finished = {B}},
      {.step = 6, .scheduled = {}},
  });
  t.expect_clean_end();
}

TEST(SchedulerTimeline, ChunkPositionsAndLogitsFlags) {
  Timeline t({.max_num_batched_tokens = 8, .max_num_seqs = 4},
             {.n_blocks = 32, .block_size = 4, .enable_prefix_caching = false});
  t.add({B, tokens(100, 10), max_tokens(1)});
  ASSERT_NO_FATAL_FAILURE(t.schedule_and_check({.step = 1, .scheduled = {{B, 8}}}));
  const ScheduledSeq& first = t.last_batch().seqs[0];
  EXPECT_EQ(first.start_pos, 0);
  EXPECT_EQ(first.context_len, 8);
  EXPECT_FALSE(first.needs_logits);
  EXPECT_EQ(first.block_table, (std::vector<kv::BlockId>{0, 1}));
  EXPECT_EQ(first.slot_mapping, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  t.complete({});
  ASSERT_NO_FATAL_FAILURE(t.schedule_and_check({.step = 2, .scheduled = {{B, 2}}}));
  const ScheduledSeq& second = t.last_batch().seqs[0];
  EXPECT_EQ(second.start_pos, 8);
  EXPECT_EQ(second.context_len, 10);
  EXPECT_TRUE(second.needs_logits);
  EXPECT_EQ(second.token_ids, (std::vector<int32_t>{108, 109}));
  EXPECT_EQ(second.slot_mapping, (std::vector<int32_t>{8, 9}));  // block 2, offsets 0 and 1
  t.complete({B});
  t.expect_clean_end();
}

// Budget 16 but at most 4 prefill tokens per sequence per step: the budget is shared among
// several prompts instead of one long prompt taking it all.
//   step 1: A 2 (whole prompt), B 4, C 4   step 2: A decode, B 4, C 2 (C done: 1 output)
//   step 3: A decode, B 2 (B done)         steps 4-5: A decodes to its 5th output
TEST(SchedulerTimeline, PrefillChunkCap) {
  Timeline t({.max_num_batched_tokens = 16, .max_num_seqs = 8, .max_prefill_chunk_tokens = 4},
             {.n_blocks = 32, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1,
       .arrivals = {{A, tokens(1, 2), max_tokens(5)}, {B, tokens(10, 10), max_tokens(1)},
                    {C, tokens(30, 6), max_tokens(1)}},
       .scheduled = {{A, 2}, {B, 4}, {C, 4}}},
      {.step = 2, .scheduled = {{A, 1}, {B, 4}, {C, 2}}, .finished = {C}},
      {.step = 3, .scheduled = {{A, 1}, {B, 2}}, .finished = {B}},
      {.step = 4, .scheduled = {{A, 1}}},
      {.step = 5, .scheduled = {{A, 1}}, .finished = {A}},
  });
  t.expect_clean_end();
}

// Long prompts next to decodes (threshold 8, chunk 4): B (20 tokens) gets 4 tokens per step
// while A decodes, C (8 tokens, not long) is computed whole in the same step, and once A is
// done B's last 8 tokens run in one step (no decodes to protect).
//   step 1: A 3 (prompt)   step 2: A decode, B 4, C 8 (C done)   steps 3-4: A decode, B 4
//   step 5: B 8 (alone)    step 6: B decode
TEST(SchedulerTimeline, LongPromptSmallChunksOnlyNextToDecodes) {
  Timeline t({.max_num_batched_tokens = 32, .max_num_seqs = 4, .long_prefill_token_threshold = 8,
              .long_prefill_chunk_tokens = 4},
             {.n_blocks = 64, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1, .arrivals = {{A, tokens(1, 3), max_tokens(4)}}, .scheduled = {{A, 3}}},
      {.step = 2,
       .arrivals = {{B, tokens(100, 20), max_tokens(2)}, {C, tokens(200, 8), max_tokens(1)}},
       .scheduled = {{A, 1}, {B, 4}, {C, 8}},
       .finished = {C}},
      {.step = 3, .scheduled = {{A, 1}, {B, 4}}},
      {.step = 4, .scheduled = {{A, 1}, {B, 4}}, .finished = {A}},
      {.step = 5, .scheduled = {{B, 8}}},
      {.step = 6, .scheduled = {{B, 1}}, .finished = {B}},
  });
  t.expect_clean_end();
}

// The same arrivals with long_prefill_chunk_tokens 0 (off): B takes what the budget leaves.
TEST(SchedulerTimeline, LongPromptChunkingOff) {
  Timeline t({.max_num_batched_tokens = 32, .max_num_seqs = 4, .long_prefill_token_threshold = 8,
              .long_prefill_chunk_tokens = 0},
             {.n_blocks = 64, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1, .arrivals = {{A, tokens(1, 3), max_tokens(4)}}, .scheduled = {{A, 3}}},
      {.step = 2,
       .arrivals = {{B, tokens(100, 20), max_tokens(2)}, {C, tokens(200, 8), max_tokens(1)}},
       .scheduled = {{A, 1}, {B, 20}, {C, 8}},
       .finished = {C}},
      {.step = 3, .scheduled = {{A, 1}, {B, 1}}, .finished = {B}},
      {.step = 4, .scheduled = {{A, 1}}, .finished = {A}},
  });
  t.expect_clean_end();
}

// A chunked prompt is admitted only when its whole prompt fits next to what the running prompts
// still need (8 blocks of 4). A (16 tokens) takes 4 tokens a step; B (24 tokens = 6 blocks)
// would fit its first chunk at once, but its whole prompt only once A is done, so it waits
// instead of being admitted and preempted.
TEST(SchedulerTimeline, ChunkedAdmissionNeedsTheWholePrompt) {
  Timeline t({.max_num_batched_tokens = 8, .max_num_seqs = 4, .max_prefill_chunk_tokens = 4},
             {.n_blocks = 8, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1, .arrivals = {{A, tokens(1, 16), max_tokens(2)}, {B, tokens(100, 24), max_tokens(2)}},
       .scheduled = {{A, 4}}},
      {.step = 2, .scheduled = {{A, 4}}},
      {.step = 3, .scheduled = {{A, 4}}},
      {.step = 4, .scheduled = {{A, 4}}},
      {.step = 5, .scheduled = {{A, 1}}, .finished = {A}},
      {.step = 6, .scheduled = {{B, 4}}},
      {.step = 7, .scheduled = {{B, 4}}},
      {.step = 8, .scheduled = {{B, 4}}},
      {.step = 9, .scheduled = {{B, 4}}},
      {.step = 10, .scheduled = {{B, 4}}},
      {.step = 11, .scheduled = {{B, 4}}},
      {.step = 12, .scheduled = {{B, 1}}, .finished = {B}},
  });
  EXPECT_EQ(t.sched().stats().n_preemptions, 0);
  t.expect_clean_end();
}

// max_num_seqs 2: C waits until A and B (3 outputs each) finish, although tokens are left.
TEST(SchedulerTimeline, SequenceLimit) {
  Timeline t({.max_num_batched_tokens = 10, .max_num_seqs = 2},
             {.n_blocks = 64, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1,
       .arrivals = {{A, tokens(1, 4), max_tokens(3)}, {B, tokens(10, 4), max_tokens(3)},
                    {C, tokens(20, 4), max_tokens(3)}},
       .scheduled = {{A, 4}, {B, 4}}},
  });
  EXPECT_EQ(t.sched().stats().n_running, 2);
  EXPECT_EQ(t.sched().stats().n_waiting, 1);
  t.run({
      {.step = 2, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 3, .scheduled = {{A, 1}, {B, 1}}, .finished = {A, B}},
      {.step = 4, .scheduled = {{C, 4}}},
      {.step = 5, .scheduled = {{C, 1}}},
      {.step = 6, .scheduled = {{C, 1}}, .finished = {C}},
  });
  t.expect_clean_end();
}

// Budget 5: A takes 4, B gets the 1 token left. Step 2: A decode 1 + B chunk 4 (B has 1 token
// left). Step 3: B's last prompt token is a one-token step and runs in the decode pass after A.
TEST(SchedulerTimeline, TokenBudget) {
  Timeline t({.max_num_batched_tokens = 5, .max_num_seqs = 4},
             {.n_blocks = 64, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1,
       .arrivals = {{A, tokens(1, 4), max_tokens(3)}, {B, tokens(10, 6), max_tokens(2)}},
       .scheduled = {{A, 4}, {B, 1}}},
      {.step = 2, .scheduled = {{A, 1}, {B, 4}}},
      {.step = 3, .scheduled = {{A, 1}, {B, 1}}, .finished = {A}},
      {.step = 4, .scheduled = {{B, 1}}, .finished = {B}},
  });
  t.expect_clean_end();
}

// Without chunked prefill a prompt runs whole or waits: B (5 tokens) does not fit next to A's
// decode (budget 5 - 1 = 4) and starts once A is done.
TEST(SchedulerTimeline, NoChunkingPromptWaitsForWholeBudget) {
  Timeline t({.max_num_batched_tokens = 5, .max_num_seqs = 4, .enable_chunked_prefill = false},
             {.n_blocks = 64, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1,
       .arrivals = {{A, tokens(1, 4), max_tokens(2)}, {B, tokens(10, 5), max_tokens(1)}},
       .scheduled = {{A, 4}}},
      {.step = 2, .scheduled = {{A, 1}}, .finished = {A}},
      {.step = 3, .scheduled = {{B, 5}}, .finished = {B}},
  });
  t.expect_clean_end();
  // prompt + max_tokens - 1 = 4 + 3 - 1 = 6 > 5: could never be recomputed in one step.
  EXPECT_EQ(t.sched().add_request(C, tokens(1, 4), max_tokens(3)).code(), ErrorCode::kInvalidArgument);
}

// Prefix caching, block size 4. A = 1..10 computes everything and caches blocks [1..4], [5..8].
// B shares 8 tokens: both blocks hit, only its 3-token suffix is computed. C is exactly 1..8: only
// blocks ending before its last token may hit, so [1..4] hits and [5..8] is computed again.
// Hit rate: A queries 9/4 = 2 blocks (0 hits), B 10/4 = 2 (2), C 7/4 = 1 (1): 3 / 5.
TEST(SchedulerTimeline, PrefixHitComputesOnlyTheSuffix) {
  Timeline t({.max_num_batched_tokens = 64, .max_num_seqs = 8}, {.n_blocks = 16, .block_size = 4});
  const auto p = tokens(1, 10);
  t.run({
      {.step = 1, .arrivals = {{A, p, max_tokens(1)}}, .scheduled = {{A, 10}}, .finished = {A}},
      {.step = 2,
       .arrivals = {{B, concat(tokens(1, 8), {50, 51, 52}), max_tokens(2)}},
       .scheduled = {{B, 3}}},
  });
  EXPECT_EQ(t.last_batch().seqs[0].start_pos, 8);
  EXPECT_EQ(t.last_batch().seqs[0].n_prefix_hit_tokens, 8);
  EXPECT_EQ(t.last_batch().seqs[0].block_table[0], 0);  // A's blocks, shared
  EXPECT_EQ(t.last_batch().seqs[0].block_table[1], 1);
  t.run({
      {.step = 3, .arrivals = {{C, tokens(1, 8), max_tokens(1)}}, .scheduled = {{B, 1}, {C, 4}},
       .finished = {B, C}},
  });
  EXPECT_EQ(t.finished(B).n_cached_prompt, 8);
  EXPECT_EQ(t.finished(C).n_cached_prompt, 4);
  const SchedulerStats s = t.sched().stats();
  EXPECT_EQ(s.n_prefix_queried_blocks, 5);
  EXPECT_EQ(s.n_prefix_hit_blocks, 3);
  EXPECT_DOUBLE_EQ(s.prefix_hit_rate, 0.6);
  t.expect_clean_end();
}

uint64_t colliding_hash(uint64_t, std::span<const int32_t>) { return 7; }

// Every block key collides: B's first block finds A's entry, the tokens differ, so B computes
// everything and still produces its solo output.
TEST(SchedulerTimeline, PrefixHitIsVerifiedAgainstTokens) {
  Timeline t({.max_num_batched_tokens = 64, .max_num_seqs = 8},
             {.n_blocks = 16, .block_size = 4, .hash_fn = colliding_hash});
  t.run({
      {.step = 1, .arrivals = {{A, tokens(1, 9), max_tokens(1)}}, .scheduled = {{A, 9}}, .finished = {A}},
      {.step = 2, .arrivals = {{B, tokens(101, 9), max_tokens(1)}}, .scheduled = {{B, 9}}, .finished = {B}},
      // Same first block as A: a verified hit.
      {.step = 3, .arrivals = {{C, tokens(1, 6), max_tokens(1)}}, .scheduled = {{C, 2}}, .finished = {C}},
      // A's first block twice: the second copy's key and tokens match A's block 0, but a block
      // computed at positions 0..3 under no parent cannot serve positions 4..7.
      {.step = 4,
       .arrivals = {{D, concat(tokens(1, 4), tokens(1, 5)), max_tokens(1)}},
       .scheduled = {{D, 5}},
       .finished = {D}},
  });
  t.expect_clean_end();
}

// LRU by recency, pool of 8 blocks. A (1..8) and B (101..108) each cache 2 blocks: LRU [a1 a0 b1 b0]
// after their releases (a table is released tail first). D reuses A's prefix, so A's blocks become
// the most recent: LRU [b1 b0 a1 a0]. C needs 5 blocks: the 4 never-used ones plus the oldest
// cached block, B's second one. E then hits B's first block only and computes 5 of its 9 tokens.
TEST(SchedulerTimeline, LruEvictsLeastRecentlyUsedBlocks) {
  Timeline t({.max_num_batched_tokens = 64, .max_num_seqs = 8}, {.n_blocks = 8, .block_size = 4});
  const auto a = tokens(1, 8);
  const auto b = tokens(101, 8);
  t.run({
      {.step = 1, .arrivals = {{A, a, max_tokens(1)}}, .scheduled = {{A, 8}}, .finished = {A}},
      {.step = 2, .arrivals = {{B, b, max_tokens(1)}}, .scheduled = {{B, 8}}, .finished = {B}},
      {.step = 3, .arrivals = {{D, concat(a, {9}), max_tokens(1)}}, .scheduled = {{D, 1}}, .finished = {D}},
      {.step = 4, .arrivals = {{C, tokens(201, 20), max_tokens(1)}}, .scheduled = {{C, 20}}, .finished = {C}},
  });
  EXPECT_EQ(t.pool().stats().n_evictions, 1);
  EXPECT_EQ(t.pool().match_prefix(a).size(), 2u);  // A's prefix survived
  EXPECT_EQ(t.pool().match_prefix(b).size(), 1u);  // B lost its second block
  t.run({
      {.step = 5, .arrivals = {{E, concat(b, {109}), max_tokens(1)}}, .scheduled = {{E, 5}}, .finished = {E}},
  });
  t.expect_clean_end();
}

// Pool of 4 blocks (16 slots), no prefix caching. A and B: 6-token prompts, 6 outputs each, so
// each needs 3 blocks at the end and both cannot finish together.
//   step 1: A 6, B 6 (2 blocks each, pool full)      step 2-3: decodes, positions 6 and 7 fit
//   step 4: A needs a 3rd block for position 8: B, the newest running, is preempted (B holds
//           prompt + 3 outputs = 9 tokens); no admissions in a step that preempted
//   step 5: A decode; B needs 3 blocks, 1 free: waits   step 6: A's 6th output: done
//   step 7: B recomputes all 9 tokens (8 of them computed before): 8 recomputed tokens
//   step 8-9: B decodes to its 6th output
TEST(SchedulerTimeline, PreemptionByRecomputeResumesWithSameOutput) {
  Timeline t({.max_num_batched_tokens = 64, .max_num_seqs = 8},
             {.n_blocks = 4, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1,
       .arrivals = {{A, tokens(1, 6), max_tokens(6)}, {B, tokens(11, 6), max_tokens(6)}},
       .scheduled = {{A, 6}, {B, 6}}},
      {.step = 2, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 3, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 4, .scheduled = {{A, 1}}, .preempted = {B}},
      {.step = 5, .scheduled = {{A, 1}}},
      {.step = 6, .scheduled = {{A, 1}}, .finished = {A}},
      {.step = 7, .scheduled = {{B, 9}}},
  });
  EXPECT_EQ(t.last_batch().seqs[0].n_recomputed_tokens, 8);
  t.run({
      {.step = 8, .scheduled = {{B, 1}}},
      {.step = 9, .scheduled = {{B, 1}}, .finished = {B}},
  });
  const SchedulerStats s = t.sched().stats();
  EXPECT_EQ(s.n_preemptions, 1);
  EXPECT_EQ(s.n_recomputed_tokens, 8);
  t.expect_clean_end();
}

// Same with prefix caching: at step 4 B's two full blocks go to the LRU tail first, so A's new
// block evicts B's second block and B's first block ([11..14]) survives. At step 7 B hits it and
// recomputes 9 - 4 = 5 tokens, 4 of them (positions 4..7) computed before.
TEST(SchedulerTimeline, PreemptedSequenceReusesItsCachedPrefix) {
  Timeline t({.max_num_batched_tokens = 64, .max_num_seqs = 8}, {.n_blocks = 4, .block_size = 4});
  t.run({
      {.step = 1,
       .arrivals = {{A, tokens(1, 6), max_tokens(6)}, {B, tokens(11, 6), max_tokens(6)}},
       .scheduled = {{A, 6}, {B, 6}}},
      {.step = 2, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 3, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 4, .scheduled = {{A, 1}}, .preempted = {B}},
      {.step = 5, .scheduled = {{A, 1}}},
      {.step = 6, .scheduled = {{A, 1}}, .finished = {A}},
      {.step = 7, .scheduled = {{B, 5}}},
  });
  EXPECT_EQ(t.last_batch().seqs[0].start_pos, 4);
  EXPECT_EQ(t.last_batch().seqs[0].n_recomputed_tokens, 4);
  t.run({
      {.step = 8, .scheduled = {{B, 1}}},
      {.step = 9, .scheduled = {{B, 1}}, .finished = {B}},
  });
  t.expect_clean_end();
}

// A cancel outside the in-flight step frees blocks at once; inside it, at on_step_done.
TEST(SchedulerTimeline, CancelReleasesBlocksWithinOneStep) {
  Timeline t({.max_num_batched_tokens = 64, .max_num_seqs = 8},
             {.n_blocks = 8, .block_size = 4, .enable_prefix_caching = false});
  t.run({{.step = 1,
          .arrivals = {{A, tokens(1, 5), max_tokens(10)}, {B, tokens(11, 5), max_tokens(10)}},
          .scheduled = {{A, 5}, {B, 5}}}});
  EXPECT_EQ(t.pool().n_used(), 4);  // 2 blocks each for 5 tokens
  EXPECT_DOUBLE_EQ(t.sched().stats().fragmentation, 6.0 / 16.0);  // 16 slots, 10 tokens
  ASSERT_TRUE(t.sched().cancel(A).is_ok());
  EXPECT_EQ(t.pool().n_used(), 2);

  ASSERT_NO_FATAL_FAILURE(t.schedule_and_check({.step = 2, .scheduled = {{B, 1}}}));
  ASSERT_TRUE(t.sched().cancel(B).is_ok());  // B is in the in-flight batch
  EXPECT_EQ(t.pool().n_used(), 2);           // the step may still write its blocks
  t.complete({});                             // B's sampled token is dropped, no finish reported
  EXPECT_EQ(t.pool().n_used(), 0);
  EXPECT_EQ(t.sched().cancel(B).code(), ErrorCode::kNotFound);

  t.add({C, tokens(21, 5), max_tokens(1)});  // waiting, never scheduled
  ASSERT_TRUE(t.sched().cancel(C).is_ok());
  EXPECT_TRUE(t.sched().schedule().empty());
  t.expect_clean_end();
}

// Pool of 5 blocks, A, B, C: 4-token prompts, 8 outputs each (3 blocks each at the end).
//   step 1: one block each (3 used)
//   step 2: A and B take blocks 4 and 5; C finds none and is itself the newest unscheduled
//           running sequence: C preempts itself (prompt + 1 output = 5 tokens to recompute)
//   step 3-5: A, B decode (positions 5..7); C needs 2 blocks, 1 free: waits
//   step 6: A takes the last block for position 8; B finds none and preempts itself
//   step 7: waiting is [B, C] in arrival order; B needs 3 blocks, 2 free, and C (2 blocks would
//           fit) may not overtake it
//   step 8: A's 8th output: done, 5 blocks free
//   step 9: B recomputes 9 tokens (8 before), C 5 (4 before)
//   then B finishes at step 11 (outputs 6, 7, 8 at steps 9-11), C at step 15
TEST(SchedulerTimeline, SelfPreemptionAndFcfsResumption) {
  Timeline t({.max_num_batched_tokens = 64, .max_num_seqs = 8},
             {.n_blocks = 5, .block_size = 4, .enable_prefix_caching = false});
  t.run({
      {.step = 1,
       .arrivals = {{A, tokens(1, 4), max_tokens(8)}, {B, tokens(11, 4), max_tokens(8)},
                    {C, tokens(21, 4), max_tokens(8)}},
       .scheduled = {{A, 4}, {B, 4}, {C, 4}}},
      {.step = 2, .scheduled = {{A, 1}, {B, 1}}, .preempted = {C}},
      {.step = 3, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 4, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 5, .scheduled = {{A, 1}, {B, 1}}},
      {.step = 6, .scheduled = {{A, 1}}, .preempted = {B}},
      {.step = 7, .scheduled = {{A, 1}}},
      {.step = 8, .scheduled = {{A, 1}}, .finished = {A}},
      {.step = 9, .scheduled = {{B, 9}, {C, 5}}},
      {.step = 10, .scheduled = {{B, 1}, {C, 1}}},
      {.step = 11, .scheduled = {{B, 1}, {C, 1}}, .finished = {B}},
      {.step = 12, .scheduled = {{C, 1}}},
      {.step = 13, .scheduled = {{C, 1}}},
      {.step = 14, .scheduled = {{C, 1}}},
      {.step = 15, .scheduled = {{C, 1}}, .finished = {C}},
  });
  const SchedulerStats s = t.sched().stats();
  EXPECT_EQ(s.n_preemptions, 2);
  EXPECT_EQ(s.n_recomputed_tokens, 12);
  t.expect_clean_end();
}

}  // namespace
}  // namespace frugal::sched::testing
