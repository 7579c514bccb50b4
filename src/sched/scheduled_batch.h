// What one schedule() hands the engine, and what the engine hands back after the step.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_pool.h"
#include "sched/sequence.h"

namespace frugal::sched {

// One sequence's share of a step. Positions [start_pos, context_len) are computed this step;
// [0, start_pos) are already in the cache (earlier steps or prefix-cache hits).
struct ScheduledSeq {
  SeqId id = 0;
  std::vector<int32_t> token_ids = {};        // tokens to compute, positions start_pos, start_pos + 1, ...
  int32_t start_pos = 0;
  int32_t context_len = 0;               // start_pos + token_ids.size(): cache length after the step
  bool needs_logits = false;             // the last token completes the sequence: sample from it
  std::vector<kv::BlockId> block_table = {};  // covers positions [0, context_len)
  std::vector<int32_t> slot_mapping = {};     // per token: block_id * block_size + offset
  int32_t n_prefix_hit_tokens = 0;       // tokens skipped thanks to the prefix cache (admission only)
  int32_t n_recomputed_tokens = 0;       // tokens computed again after a preemption
};

struct ScheduledBatch {
  uint64_t step = 0;                // step id, increasing from 1
  std::vector<ScheduledSeq> seqs = {};   // decodes first (FCFS), then prefill chunks (FCFS)
  int32_t n_tokens = 0;             // sum of token_ids sizes <= max_num_batched_tokens
  std::vector<SeqId> preempted = {};     // sequences preempted while building this batch
  bool empty() const { return seqs.empty(); }
};

// One sampled token for a sequence that had needs_logits in the in-flight batch.
struct SampledToken {
  SeqId id = 0;
  int32_t token = 0;
};

struct FinishedSeq {
  SeqId id = 0;
  FinishReason reason = FinishReason::kLength;
  std::vector<int32_t> output_tokens = {};  // everything sampled, the eos/stop token included
  int32_t n_prompt = 0;
  int32_t n_cached_prompt = 0;
};

}  // namespace frugal::sched
