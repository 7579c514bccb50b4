// A host-only stand-in for the engine step: it writes each scheduled token (and its position)
// into a simulated paged KV arena through slot_mapping, then "samples" the next token from the
// context it reads back through the block table. A wrong block table, slot mapping or prefix hit
// therefore changes the output, and reference_generate() (which never touches the scheduler)
// gives the output each prompt must produce alone.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sched/scheduler.h"

namespace frugal::sched::testing {

// The toy model: next token from the whole context (order-sensitive), in [1000, 1000 + 997).
// Values stay far from the small ids tests use for prompts, eos and stop tokens.
inline int32_t toy_next_token(const std::vector<int32_t>& context) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < context.size(); ++i) {
    h ^= static_cast<uint64_t>(context[i]) + 0x9e3779b97f4a7c15ull * (i + 1);
    h *= 1099511628211ull;
  }
  return 1000 + static_cast<int32_t>((h >> 17) % 997);
}

// Output of the toy model for `prompt` run alone (stops only on max_tokens).
inline std::vector<int32_t> reference_generate(std::vector<int32_t> prompt, int32_t max_tokens) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    const int32_t t = toy_next_token(prompt);
    out.push_back(t);
    prompt.push_back(t);
  }
  return out;
}

class FakeEngine {
 public:
  FakeEngine(int32_t n_blocks, int32_t block_size)
      : block_size_(block_size), slots_(static_cast<size_t>(n_blocks) * block_size) {}

  // Runs one batch: writes KV for every scheduled token, then samples for needs_logits sequences.
  std::vector<SampledToken> run(const ScheduledBatch& batch) {
    for (const ScheduledSeq& s : batch.seqs) {
      EXPECT_EQ(s.slot_mapping.size(), s.token_ids.size());
      for (size_t i = 0; i < s.token_ids.size(); ++i) {
        slots_.at(s.slot_mapping[i]) = Slot{s.token_ids[i], s.start_pos + static_cast<int32_t>(i)};
      }
    }
    std::vector<SampledToken> sampled;
    for (const ScheduledSeq& s : batch.seqs) {
      if (!s.needs_logits) continue;
      sampled.push_back(SampledToken{.id = s.id, .token = toy_next_token(read_context(s))});
    }
    return sampled;
  }

 private:
  struct Slot {
    int32_t token = -1;
    int32_t pos = -1;
  };

  std::vector<int32_t> read_context(const ScheduledSeq& s) const {
    std::vector<int32_t> ctx;
    for (int32_t p = 0; p < s.context_len; ++p) {
      const int32_t slot = s.block_table.at(p / block_size_) * block_size_ + p % block_size_;
      const Slot& kv = slots_.at(slot);
      EXPECT_EQ(kv.pos, p) << "sequence " << s.id << " reads a slot written for another position";
      ctx.push_back(kv.token);
    }
    return ctx;
  }

  int32_t block_size_;
  std::vector<Slot> slots_;
};

}  // namespace frugal::sched::testing
