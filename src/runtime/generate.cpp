#include "runtime/generate.h"

#include <algorithm>
#include <numeric>

#include "runtime/sampler.h"

namespace frugal::runtime {
namespace {

// One sequence's step over the contiguous KV blocks 0..n-1.
struct SeqState {
  std::vector<int32_t> table{};  // block ids
  int32_t block_size = 16;
  std::vector<int32_t> tokens{}, positions{}, slots{}, q_start{}, ctx_len{}, logits_rows{};

  model::ForwardBatch batch(std::span<const int32_t> ids, int32_t start_pos) {
    tokens.assign(ids.begin(), ids.end());
    positions.resize(ids.size());
    slots.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const int32_t pos = start_pos + static_cast<int32_t>(i);
      positions[i] = pos;
      slots[i] = table[static_cast<size_t>(pos / block_size)] * block_size + pos % block_size;
    }
    q_start = {0, static_cast<int32_t>(ids.size())};
    ctx_len = {start_pos + static_cast<int32_t>(ids.size())};
    logits_rows = {static_cast<int32_t>(ids.size()) - 1};
    return model::ForwardBatch{.tokens = tokens, .positions = positions, .q_start = q_start,
                               .ctx_len = ctx_len, .block_tables = table,
                               .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                               .slot_mapping = slots, .logits_rows = logits_rows};
  }
};

}  // namespace

Result<GenerateResult> generate(model::Model& m, std::span<const int32_t> prompt,
                                const SamplingParams& sampling, const TokenCallback& on_token,
                                std::optional<DType> kv_dtype, const LogitsCallback& on_logits) {
  FRUGAL_RETURN_IF_ERROR(validate(sampling));
  if (prompt.empty()) return invalid_argument("generate: empty prompt");
  if (sampling.max_tokens < 0) return invalid_argument("generate: max_tokens must be >= 0");
  const int32_t ctx_cap = m.max_context();
  if (static_cast<int64_t>(prompt.size()) >= ctx_cap)
    return invalid_argument("generate: prompt of " + std::to_string(prompt.size()) +
                            " tokens does not fit the context of " + std::to_string(ctx_cap));
  const int32_t total = static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(prompt.size()) + sampling.max_tokens, ctx_cap));
  const int32_t bs = m.options().block_size;
  SeqState seq{.table = std::vector<int32_t>(static_cast<size_t>((total + bs - 1) / bs)), .block_size = bs};
  std::iota(seq.table.begin(), seq.table.end(), 0);
  FRUGAL_ASSIGN_OR_RETURN(auto kv, model::KvStorage::create(m.backend(), m.config(),
      {.n_blocks = static_cast<int32_t>(seq.table.size()), .block_size = bs, .dtype = kv_dtype}));

  std::vector<int32_t> stop = sampling.stop_token_ids;
  if (!sampling.ignore_eos)
    for (int64_t e : m.generation_config().eos_token_ids) stop.push_back(static_cast<int32_t>(e));
  Sampler sampler(sampling);
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  GenerateResult out;

  // Prefill in chunks of max_batch_tokens; only the last chunk's last row needs logits.
  const int32_t chunk = m.options().max_batch_tokens;
  for (int32_t pos = 0; pos < static_cast<int32_t>(prompt.size()); pos += chunk) {
    const int32_t n = std::min<int32_t>(chunk, static_cast<int32_t>(prompt.size()) - pos);
    FRUGAL_RETURN_IF_ERROR(m.forward(seq.batch(prompt.subspan(static_cast<size_t>(pos), static_cast<size_t>(n)), pos), *kv, logits.data()));
  }
  int32_t pos = static_cast<int32_t>(prompt.size());
  while (true) {
    if (static_cast<int32_t>(out.tokens.size()) >= sampling.max_tokens || pos >= total) {
      out.finish = FinishReason::kLength;
      break;
    }
    if (on_logits) on_logits(logits);
    const int32_t tok = sampler.sample(logits, prompt, out.tokens);
    if (std::find(stop.begin(), stop.end(), tok) != stop.end()) {
      out.finish = FinishReason::kStop;
      break;
    }
    out.tokens.push_back(tok);
    if (on_token && !on_token(tok)) {
      out.finish = FinishReason::kCancelled;
      break;
    }
    if (static_cast<int32_t>(out.tokens.size()) >= sampling.max_tokens || pos + 1 >= total) {
      out.finish = FinishReason::kLength;
      break;
    }
    const int32_t one[] = {tok};
    FRUGAL_RETURN_IF_ERROR(m.forward(seq.batch(one, pos), *kv, logits.data()));
    ++pos;
  }
  return out;
}

}  // namespace frugal::runtime
