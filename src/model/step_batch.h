// The one step-input representation from the scheduler down: the engine fills a StepBatch
// once per step from the scheduled batch (reusing its vectors, so no allocation in steady
// state); the ModelRunner pads it in place to a graph bucket and packs it into one upload.
// ForwardBatch / SamplingBatch (forward_batch.h) are views of it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/forward_batch.h"

namespace frugal::model {

struct StepBatch {
  std::vector<int32_t> tokens;        // [n_tokens]
  std::vector<int32_t> positions;     // [n_tokens]
  std::vector<int32_t> q_start{0};    // [n_seqs + 1]
  std::vector<int32_t> ctx_len;       // [n_seqs]
  std::vector<int32_t> block_tables;  // [n_seqs, max_blocks_per_seq], 0 past a sequence's table
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> slot_mapping;  // [n_tokens]
  std::vector<int32_t> logits_rows;   // [n_logit_rows]
  // Per logits row, for forward_sample (SamplingBatch's meaning).
  std::vector<float> temperature;
  std::vector<int32_t> top_k;
  std::vector<float> top_p;
  std::vector<uint64_t> seeds;

  // Empties the batch (keeping capacity) for sequences whose block tables have at most
  // `max_blocks` entries.
  void reset(int32_t max_blocks) {
    tokens.clear();
    positions.clear();
    q_start.assign(1, 0);
    ctx_len.clear();
    block_tables.clear();
    max_blocks_per_seq = max_blocks;
    slot_mapping.clear();
    logits_rows.clear();
    temperature.clear();
    top_k.clear();
    top_p.clear();
    seeds.clear();
  }

  // Appends a sequence computing `new_tokens` at positions start_pos, start_pos + 1, ...,
  // with ctx_len cached tokens after the step; `wants_logits` asks for its last token's logits.
  // `table` has at most max_blocks_per_seq entries, `slots` one per new token.
  void add_seq(std::span<const int32_t> new_tokens, int32_t start_pos, int32_t seq_ctx_len,
               std::span<const int32_t> table, std::span<const int32_t> slots, bool wants_logits) {
    FRUGAL_CHECK(table.size() <= static_cast<size_t>(max_blocks_per_seq) && slots.size() == new_tokens.size());
    for (size_t t = 0; t < new_tokens.size(); ++t) {
      tokens.push_back(new_tokens[t]);
      positions.push_back(start_pos + static_cast<int32_t>(t));
    }
    slot_mapping.insert(slot_mapping.end(), slots.begin(), slots.end());
    q_start.push_back(static_cast<int32_t>(tokens.size()));
    ctx_len.push_back(seq_ctx_len);
    const size_t row = block_tables.size();
    block_tables.resize(row + static_cast<size_t>(max_blocks_per_seq), 0);
    std::copy(table.begin(), table.end(), block_tables.begin() + static_cast<std::ptrdiff_t>(row));
    if (wants_logits) logits_rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
  }

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_seqs() const { return static_cast<int32_t>(ctx_len.size()); }

  ForwardBatch view() const {
    return {.tokens = tokens, .positions = positions, .q_start = q_start, .ctx_len = ctx_len,
            .block_tables = block_tables, .max_blocks_per_seq = max_blocks_per_seq, .slot_mapping = slot_mapping,
            .logits_rows = logits_rows};
  }
  SamplingBatch sampling() const {
    return {.temperature = temperature, .top_k = top_k, .top_p = top_p, .seeds = seeds};
  }
};

}  // namespace frugal::model
