// Continuous-batching scheduler: host-only, deterministic (no clocks, no randomness), driven by
// the engine thread. Policy and contract in docs/scheduler.md; in short, each step:
//   1. running decodes (one token each), oldest first;
//   2. running partially-prefilled sequences, next chunk, oldest first;
//   3. waiting sequences (FCFS, never skipping the head), after prefix-cache lookup;
// all under max_num_batched_tokens and max_num_seqs. When a running sequence needs a block and
// none is free, the newest running sequence not already in this batch is preempted by recompute
// (possibly the one asking) and goes back to the waiting queue in arrival order, i.e. ahead of
// every request that never ran.
//
// Step protocol: batch = schedule(); run it; on_step_done(sampled tokens). At most one batch is
// in flight; schedule() may not be called again before on_step_done(). An empty batch is not in
// flight. add_request() and cancel() may be called at any time on the engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_pool.h"
#include "sched/scheduled_batch.h"
#include "sched/sequence.h"

namespace frugal::sched {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 8192;  // tokens computed per step, all sequences together
  int32_t max_num_seqs = 256;             // running sequences (and so sequences per batch)
  bool enable_chunked_prefill = true;
  int32_t max_model_len = 0;              // prompt + output cap; 0 = limited only by the pool
  // Tokens of one sequence's prefill chunk per step; 0 = only the step budget limits it. A small
  // value (e.g. 512) bounds how much one long prompt slows the decodes that share its steps.
  int32_t max_prefill_chunk_tokens = 0;
  // In a step that carries decodes, a prompt of more than long_prefill_token_threshold tokens
  // is computed at most long_prefill_chunk_tokens per step, so one long prompt cannot stretch
  // the running requests' inter-token latency (a 10k prompt next to 64 decodes); in a step
  // without decodes only the budget (and max_prefill_chunk_tokens) limit it, which keeps its
  // time to first token short. Shorter prompts are not limited: many of them still fill the
  // step budget together. long_prefill_chunk_tokens = 0 turns this off.
  int32_t long_prefill_token_threshold = 1024;
  int32_t long_prefill_chunk_tokens = 64;
  // --kv-window W --kv-sinks S (docs/kv_cache.md): queries see the first S and the last W
  // positions only, so after each step a sequence's blocks wholly behind its window that hold
  // no sink position go back to the pool (kv::BlockPool::release_behind), and a sequence
  // needs at most window_peak_tokens() slots at once. 0 = off.
  int32_t kv_window = 0;
  int32_t kv_sinks = 0;
};

// Slots a sequence of n_tokens (prompt + outputs) holds at once at most under config's window
// and sinks: the sink blocks, the window behind the next query and one step's chunk, plus
// block-alignment slack; n_tokens itself without a window. The planner's concurrency bound
// (plan/planner.cpp) is the decode-phase case of the same count.
int64_t window_peak_tokens(const SchedulerConfig& config, int32_t block_size, int64_t n_tokens);

struct SchedulerStats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;
  int32_t n_blocks_total = 0;
  int32_t n_blocks_used = 0;
  int32_t n_blocks_free = 0;   // allocatable now, evictable cached blocks included
  int64_t n_steps = 0;         // non-empty batches scheduled
  int64_t n_preemptions = 0;
  int64_t n_recomputed_tokens = 0;   // tokens computed again because of preemption
  int64_t n_window_released_blocks = 0;  // blocks returned behind the window (kv_window)
  int64_t n_prompt_tokens = 0;       // prompt tokens of admitted requests (first admission)
  int64_t n_generated_tokens = 0;    // tokens accepted from on_step_done
  int64_t n_prefix_queried_blocks = 0;
  int64_t n_prefix_hit_blocks = 0;
  double prefix_hit_rate = 0;        // hit / queried blocks
  double fragmentation = 0;          // allocated slots not holding a token / allocated slots
};

class Scheduler {
 public:
  // `pool` is not owned and must outlive the scheduler; the scheduler is its only user.
  static Result<Scheduler> create(const SchedulerConfig& config, kv::BlockPool* pool);

  // Queues a request. Errors (duplicate id, empty prompt, max_tokens < 1, a request that could
  // never fit the pool or max_model_len, or one step without chunked prefill) leave no state.
  Status add_request(SeqId id, std::vector<int32_t> prompt, SeqParams params);

  // Builds the next batch. Checks that no batch is in flight.
  ScheduledBatch schedule();

  // Completes the in-flight batch: `sampled` has exactly one token per sequence that had
  // needs_logits (any order; batch order is fastest), except that a token for a sequence
  // cancelled during the step is optional and ignored. Appends them, detects finishes, registers newly full blocks in the
  // prefix cache, frees finished and cancelled sequences' blocks. Returns the finished sequences
  // (cancelled ones are not reported). A malformed `sampled` is an error and changes nothing.
  Result<std::vector<FinishedSeq>> on_step_done(std::span<const SampledToken> sampled);

  // Drops a request. Waiting or running outside the in-flight batch: blocks are released now.
  // Inside the in-flight batch: the step may still read and write its blocks, so they are
  // released in on_step_done (its sampled token is then ignored). Unknown id: kNotFound.
  Status cancel(SeqId id);

  SchedulerStats stats() const;
  const Sequence* find(SeqId id) const;
  bool has_unfinished() const { return !seqs_.empty(); }
  bool step_in_flight() const { return !in_flight_.empty(); }
  const SchedulerConfig& config() const { return config_; }

 private:
  struct InFlight {
    Sequence* seq;
    int32_t n_new;
    bool needs_logits;
  };

  Scheduler(const SchedulerConfig& config, kv::BlockPool* pool) : config_(config), pool_(pool) {}

  void schedule_running(ScheduledBatch& batch, int32_t& budget, bool decodes);
  bool step_has_decodes_ = false;  // the batch being scheduled carries at least one decode
  void admit_waiting(ScheduledBatch& batch, int32_t& budget);
  int32_t chunk_tokens(const Sequence& seq, int32_t left, int32_t budget) const;
  bool reserve(Sequence* seq, int32_t n_tokens, ScheduledBatch& batch);
  void preempt(Sequence* victim, ScheduledBatch& batch);
  void emit(Sequence* seq, int32_t n_new, int32_t n_prefix_hit, ScheduledBatch& batch, int32_t& budget);
  Status match_sampled(std::span<const SampledToken> sampled);
  std::optional<FinishReason> finish_reason(const Sequence& seq) const;
  void insert_running(Sequence* seq);
  void insert_waiting(Sequence* seq);
  void remove_from_queues(Sequence* seq);
  void drop(Sequence* seq);  // releases blocks and forgets the sequence
  // Blocks seq still has to allocate to finish its uncomputed tokens (window-bounded).
  int32_t blocks_owed(const Sequence& seq) const;

  SchedulerConfig config_;
  kv::BlockPool* pool_;
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;   // ordered by arrival
  std::vector<Sequence*> running_;  // ordered by arrival
  std::vector<InFlight> in_flight_;
  uint64_t sample_epoch_ = 0;
  uint64_t next_arrival_ = 0;
  uint64_t step_ = 0;
  bool preempted_this_step_ = false;
  SchedulerStats counters_;         // the cumulative fields only
};

}  // namespace frugal::sched
