// One forward step's inputs, host side (varlen layout of ops/params.h): n_tokens new tokens
// from n_seqs sequences; sequence s owns tokens [q_start[s], q_start[s+1]) and, after this
// step's KV writes, has ctx_len[s] tokens in the cache, addressed through its block table row.
#pragma once

#include <cstdint>
#include <span>

namespace frugal::model {

struct ForwardBatch {
  std::span<const int32_t> tokens;        // [n_tokens] token ids
  std::span<const int32_t> positions;     // [n_tokens] absolute positions
  std::span<const int32_t> q_start;       // [n_seqs + 1] prefix sums of new tokens per sequence
  std::span<const int32_t> ctx_len;       // [n_seqs] cached tokens after this step
  std::span<const int32_t> block_tables;  // [n_seqs, max_blocks_per_seq] KV block ids
  int32_t max_blocks_per_seq = 0;
  std::span<const int32_t> slot_mapping;  // [n_tokens] block * block_size + offset; < 0 skips
  std::span<const int32_t> logits_rows;   // [n_logit_rows] token indices whose logits are wanted

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_seqs() const { return static_cast<int32_t>(ctx_len.size()); }
};

// Per-logits-row sampling parameters for Model::forward_sample (see ops::SampleParams).
struct SamplingBatch {
  std::span<const float> temperature;  // <= 0: greedy
  std::span<const int32_t> top_k;      // <= 0: off
  std::span<const float> top_p;        // >= 1: off
  std::span<const uint64_t> seeds;     // change every step
};

}  // namespace frugal::model
