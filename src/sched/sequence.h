// A request as the scheduler sees it: token ids in, token ids out, and its KV block table.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_pool.h"

namespace frugal::sched {

// Engine-assigned request id (runtime::Engine uses uint64_t request ids).
using SeqId = uint64_t;

struct SeqParams {
  int32_t max_tokens = 16;               // output tokens, >= 1
  std::vector<int32_t> eos_token_ids = {};    // finish on these unless ignore_eos
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids = {};   // finish on these always
};

enum class SeqStatus : uint8_t {
  kWaiting,  // not admitted, or preempted and waiting to be recomputed
  kRunning,  // holds blocks; prefilling (possibly in chunks) or decoding
};

enum class FinishReason : uint8_t {
  kLength,     // max_tokens reached or the sequence reached max_model_len
  kEos,        // sampled one of eos_token_ids (and !ignore_eos)
  kStopToken,  // sampled one of stop_token_ids
};
const char* finish_reason_name(FinishReason r);

struct Sequence {
  SeqId id = 0;
  uint64_t arrival = 0;  // add_request order: FCFS priority, lower is older
  SeqParams params;
  std::vector<int32_t> tokens = {};  // prompt, then sampled outputs
  int32_t n_prompt = 0;
  // Tokens whose KV is in the cache (advanced by on_step_done; prefix hits count as computed).
  int32_t n_computed = 0;
  // Highest n_computed reached before a preemption: tokens below it computed again are recompute.
  int32_t n_computed_before_preemption = 0;
  int32_t n_cached_prompt = -1;  // prompt tokens served by the prefix cache at first admission
  int32_t n_preemptions = 0;
  SeqStatus status = SeqStatus::kWaiting;
  kv::BlockTable table;
  uint64_t scheduled_step = 0;  // step id of the last batch that included it (0: never)
  bool cancel_pending = false;  // cancelled while in the in-flight batch
  // Scheduler scratch for matching on_step_done's tokens without building a hash map each step.
  bool wants_sample = false;    // needs_logits in the in-flight batch
  uint64_t sample_epoch = 0;    // on_step_done call that matched a token to it
  int32_t sampled_token = 0;

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_output() const { return n_tokens() - n_prompt; }
  int32_t n_uncomputed() const { return n_tokens() - n_computed; }
};

}  // namespace frugal::sched
