// Scheduler API: request validation, finish reasons, and the step protocol's error paths.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "timeline.h"

namespace frugal::sched::testing {
namespace {

struct Fixture {
  explicit Fixture(SchedulerConfig sc, int32_t n_blocks = 16)
      : pool(std::move(kv::BlockPool::create({.n_blocks = n_blocks, .block_size = 4})).value()),
        sched(std::move(Scheduler::create(sc, &pool)).value()) {}
  kv::BlockPool pool;
  Scheduler sched;
};

TEST(SchedulerApi, ConfigValidation) {
  auto pool = std::move(kv::BlockPool::create({.n_blocks = 4})).value();
  EXPECT_FALSE(Scheduler::create({.max_num_batched_tokens = 0}, &pool).is_ok());
  EXPECT_FALSE(Scheduler::create({.max_num_seqs = 0}, &pool).is_ok());
  EXPECT_FALSE(Scheduler::create({}, nullptr).is_ok());
  EXPECT_FALSE(Scheduler::create({.max_num_batched_tokens = 8, .max_num_seqs = 9}, &pool).is_ok());
  EXPECT_TRUE(Scheduler::create({.max_num_batched_tokens = 8, .max_num_seqs = 8}, &pool).is_ok());
  auto bad_chunk = Scheduler::create({.long_prefill_chunk_tokens = -1}, &pool);
  ASSERT_FALSE(bad_chunk.is_ok());
  EXPECT_NE(bad_chunk.status().message().find("--long-prefill-chunk-tokens"), std::string::npos);
  auto bad_threshold = Scheduler::create({.long_prefill_token_threshold = -1}, &pool);
  ASSERT_FALSE(bad_threshold.is_ok());
  EXPECT_NE(bad_threshold.status().message().find("--long-prefill-token-threshold"), std::string::npos);
}

TEST(SchedulerApi, RejectsBadRequestsWithoutState) {
  Fixture f({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 10}, /*n_blocks=*/4);
  EXPECT_EQ(f.sched.add_request(1, {}, {}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(f.sched.add_request(1, {1, 2}, {.max_tokens = 0}).code(), ErrorCode::kInvalidArgument);
  // 10 prompt tokens leave no room under max_model_len 10.
  EXPECT_EQ(f.sched.add_request(1, tokens(1, 10), {}).code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(f.sched.add_request(1, {1, 2}, {}).is_ok());
  EXPECT_EQ(f.sched.add_request(1, {1, 2}, {}).code(), ErrorCode::kInvalidArgument);  // duplicate id
  EXPECT_EQ(f.sched.stats().n_waiting, 1);

  // 16 KV slots: prompt 10 + 8 outputs needs 17 without max_model_len.
  Fixture g({.max_num_batched_tokens = 64, .max_num_seqs = 8}, /*n_blocks=*/4);
  const Status s = g.sched.add_request(2, tokens(1, 10), {.max_tokens = 8});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pool holds 16"), std::string::npos) << s.message();
  EXPECT_TRUE(g.sched.add_request(2, tokens(1, 10), {.max_tokens = 7}).is_ok());  // exactly 16
}

// max_model_len 6. Step 1 samples A->7 (eos), B->7 (eos ignored), C->8; step 2 samples B->9
// (stop token) and C->8, which makes C 6 tokens long: length.
TEST(SchedulerApi, FinishReasons) {
  Fixture f({.max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 6});
  ASSERT_TRUE(f.sched.add_request(1, {1, 2, 3}, {.max_tokens = 10, .eos_token_ids = {7}}).is_ok());
  ASSERT_TRUE(f.sched
                  .add_request(2, {1, 2, 3},
                               {.max_tokens = 10, .eos_token_ids = {7}, .ignore_eos = true, .stop_token_ids = {9}})
                  .is_ok());
  ASSERT_TRUE(f.sched.add_request(3, {4, 5, 6, 7}, {.max_tokens = 10, .eos_token_ids = {2}}).is_ok());
  ASSERT_EQ(f.sched.schedule().seqs.size(), 3u);
  const SampledToken step1[] = {{1, 7}, {2, 7}, {3, 8}};
  auto done = f.sched.on_step_done(step1);
  ASSERT_TRUE(done.is_ok());
  ASSERT_EQ(done->size(), 1u);
  EXPECT_EQ((*done)[0].id, 1u);
  EXPECT_EQ((*done)[0].reason, FinishReason::kEos);
  EXPECT_EQ((*done)[0].output_tokens, (std::vector<int32_t>{7}));

  ASSERT_EQ(f.sched.schedule().seqs.size(), 2u);
  const SampledToken step2[] = {{3, 8}, {2, 9}};
  done = f.sched.on_step_done(step2);
  ASSERT_TRUE(done.is_ok());
  ASSERT_EQ(done->size(), 2u);
  EXPECT_EQ((*done)[0].id, 2u);  // in batch order
  EXPECT_EQ((*done)[0].reason, FinishReason::kStopToken);
  EXPECT_EQ((*done)[0].output_tokens, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ((*done)[1].id, 3u);
  EXPECT_EQ((*done)[1].reason, FinishReason::kLength);
  EXPECT_EQ(f.pool.n_used(), 0);
  EXPECT_STREQ(finish_reason_name(FinishReason::kStopToken), "stop_token");
}

TEST(SchedulerApi, MalformedStepOutputChangesNothing) {
  Fixture f({.max_num_batched_tokens = 64, .max_num_seqs = 8});
  EXPECT_FALSE(f.sched.on_step_done({}).is_ok());  // nothing in flight
  ASSERT_TRUE(f.sched.add_request(1, tokens(1, 6), {.max_tokens = 2}).is_ok());
  ASSERT_TRUE(f.sched.add_request(2, tokens(1, 3), {.max_tokens = 2}).is_ok());
  ASSERT_EQ(f.sched.schedule().seqs.size(), 2u);
  EXPECT_TRUE(f.sched.step_in_flight());
  const SampledToken missing[] = {{1, 5}};
  EXPECT_FALSE(f.sched.on_step_done(missing).is_ok());
  const SampledToken twice[] = {{1, 5}, {1, 5}};
  EXPECT_FALSE(f.sched.on_step_done(twice).is_ok());
  const SampledToken stranger[] = {{1, 5}, {9, 5}};
  EXPECT_FALSE(f.sched.on_step_done(stranger).is_ok());
  EXPECT_EQ(f.sched.find(1)->n_computed, 0);
  const SampledToken good[] = {{2, 5}, {1, 5}};
  ASSERT_TRUE(f.sched.on_step_done(good).is_ok());
  EXPECT_EQ(f.sched.find(1)->n_computed, 6);
  EXPECT_EQ(f.sched.find(1)->n_output(), 1);
  EXPECT_FALSE(f.sched.step_in_flight());
}

// A failed forward: the engine cancels the whole batch and completes the step with no tokens.
TEST(SchedulerApi, CancelledSequencesNeedNoSampledToken) {
  Fixture f({.max_num_batched_tokens = 64, .max_num_seqs = 8});
  ASSERT_TRUE(f.sched.add_request(1, tokens(1, 5), {.max_tokens = 2}).is_ok());
  ASSERT_TRUE(f.sched.add_request(2, tokens(1, 3), {.max_tokens = 2}).is_ok());
  ASSERT_TRUE(f.sched.add_request(3, tokens(9, 3), {.max_tokens = 2}).is_ok());
  ASSERT_EQ(f.sched.schedule().seqs.size(), 3u);
  ASSERT_TRUE(f.sched.cancel(1).is_ok());
  ASSERT_TRUE(f.sched.cancel(2).is_ok());
  EXPECT_FALSE(f.sched.on_step_done({}).is_ok());  // 3 is not cancelled: its token is required
  const SampledToken only3[] = {{3, 5}};
  auto done = f.sched.on_step_done(only3);
  ASSERT_TRUE(done.is_ok()) << done.status().to_string();
  EXPECT_TRUE(done->empty());
  EXPECT_EQ(f.sched.find(1), nullptr);
  EXPECT_EQ(f.sched.find(3)->n_output(), 1);
  ASSERT_EQ(f.sched.schedule().seqs.size(), 1u);
  ASSERT_TRUE(f.sched.cancel(3).is_ok());
  const SampledToken ignored[] = {{3, 6}};  // a token for a cancelled sequence is allowed too
  ASSERT_TRUE(f.sched.on_step_done(ignored).is_ok());
  EXPECT_FALSE(f.sched.has_unfinished());
  EXPECT_EQ(f.pool.n_used(), 0);
}

TEST(SchedulerApiDeathTest, ScheduleTwiceWithoutStepDoneAborts) {
  Fixture f({.max_num_batched_tokens = 64, .max_num_seqs = 8});
  ASSERT_TRUE(f.sched.add_request(1, {1, 2}, {}).is_ok());
  ASSERT_FALSE(f.sched.schedule().empty());
  EXPECT_DEATH((void)f.sched.schedule(), "before on_step_done");
}

TEST(SchedulerApi, EmptyBatchIsNotInFlight) {
  Fixture f({.max_num_batched_tokens = 64, .max_num_seqs = 8});
  EXPECT_TRUE(f.sched.schedule().empty());
  EXPECT_FALSE(f.sched.step_in_flight());
  EXPECT_TRUE(f.sched.schedule().empty());  // allowed: nothing was in flight
  EXPECT_EQ(f.sched.stats().n_steps, 0);
}

}  // namespace
}  // namespace frugal::sched::testing
