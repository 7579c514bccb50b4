#include "sched/scheduler.h"

#include <algorithm>
#include <string>

namespace frugal::sched {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopToken: return "stop_token";
  }
  return "?";
}

Result<Scheduler> Scheduler::create(const SchedulerConfig& config, kv::BlockPool* pool) {
  if (pool == nullptr) return invalid_argument("Scheduler: pool is null");
  if (config.max_num_batched_tokens < 1) {
    return invalid_argument("SchedulerConfig.max_num_batched_tokens: expected >= 1, got " +
                            std::to_string(config.max_num_batched_tokens));
  }
  if (config.max_num_seqs < 1) {
    return invalid_argument("SchedulerConfig.max_num_seqs: expected >= 1, got " +
                            std::to_string(config.max_num_seqs));
  }
  // Every running sequence must be able to decode each step, or the newest ones would starve.
  if (config.max_num_batched_tokens < config.max_num_seqs) {
    return invalid_argument("SchedulerConfig.max_num_batched_tokens (" + std::to_string(config.max_num_batched_tokens) +
                            ") must be >= max_num_seqs (" + std::to_string(config.max_num_seqs) + ")");
  }
  if (config.max_model_len < 0) return invalid_argument("SchedulerConfig.max_model_len: expected >= 0");
  if (config.long_prefill_token_threshold < 0) {
    return invalid_argument("long_prefill_token_threshold (--long-prefill-token-threshold) is " +
                            std::to_string(config.long_prefill_token_threshold) + ": expected >= 0");
  }
  if (config.long_prefill_chunk_tokens < 0) {
    return invalid_argument("long_prefill_chunk_tokens (--long-prefill-chunk-tokens) is " +
                            std::to_string(config.long_prefill_chunk_tokens) + ": expected >= 0 (0 = off)");
  }
  if (config.max_prefill_chunk_tokens < 0) {
    return invalid_argument("SchedulerConfig.max_prefill_chunk_tokens: expected >= 0 (0 = no cap)");
  }
  if (config.kv_window < 0 || config.kv_sinks < 0 || (config.kv_sinks > 0 && config.kv_window == 0)) {
    return invalid_argument("SchedulerConfig.kv_window / kv_sinks: expected >= 0, and sinks only with a window (got window " +
                            std::to_string(config.kv_window) + ", sinks " + std::to_string(config.kv_sinks) + ")");
  }
  return Scheduler(config, pool);
}

Status Scheduler::add_request(SeqId id, std::vector<int32_t> prompt, SeqParams params) {
  const std::string who = "request " + std::to_string(id) + ": ";
  if (seqs_.count(id) != 0) return invalid_argument(who + "id already in use");
  if (prompt.empty()) return invalid_argument(who + "empty prompt");
  if (params.max_tokens < 1) return invalid_argument(who + "max_tokens expected >= 1");
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  int64_t final_len = n_prompt + params.max_tokens;
  if (config_.max_model_len > 0) {
    if (n_prompt >= config_.max_model_len) {
      return invalid_argument(who + "prompt has " + std::to_string(n_prompt) + " tokens, max_model_len is " +
                              std::to_string(config_.max_model_len));
    }
    final_len = std::min<int64_t>(final_len, config_.max_model_len);
  }
  // The last sampled token is never fed back, so a sequence holds at most final_len - 1 in KV;
  // under a window, at most the window's peak at once.
  const int64_t kv_tokens = window_peak_tokens(config_, pool_->block_size(), final_len - 1);
  const int64_t pool_tokens = int64_t{pool_->n_blocks()} * pool_->block_size();
  if (kv_tokens > pool_tokens) {
    return invalid_argument(who + "needs up to " + std::to_string(kv_tokens) + " KV tokens, the pool holds " +
                            std::to_string(pool_tokens) + "; lower max_tokens or grow the pool");
  }
  // Without chunking a (re)computation must fit one step; a resumed sequence recomputes its outputs too.
  if (!config_.enable_chunked_prefill && kv_tokens > config_.max_num_batched_tokens) {
    return invalid_argument(who + "prompt + max_tokens - 1 = " + std::to_string(kv_tokens) +
                            " exceeds max_num_batched_tokens " + std::to_string(config_.max_num_batched_tokens) +
                            " and chunked prefill is off");
  }
  auto seq = std::make_unique<Sequence>();
  seq->id = id;
  seq->arrival = next_arrival_++;
  seq->params = std::move(params);
  seq->n_prompt = static_cast<int32_t>(n_prompt);
  seq->tokens = std::move(prompt);
  waiting_.push_back(seq.get());  // newest arrival: the back keeps the queue in arrival order
  seqs_.emplace(id, std::move(seq));
  return Status::ok();
}

int64_t window_peak_tokens(const SchedulerConfig& config, int32_t block_size, int64_t n_tokens) {
  if (config.kv_window <= 0) return n_tokens;
  const int64_t bs = block_size;
  int64_t chunk = config.max_num_batched_tokens;
  if (config.max_prefill_chunk_tokens > 0) chunk = std::min<int64_t>(chunk, config.max_prefill_chunk_tokens);
  // During a step the table spans the sink blocks plus [p - W + 1, p + chunk) for the step's
  // first query p, which may start and end mid-block: one block of slack at each end.
  const int64_t sink_slots = (config.kv_sinks + bs - 1) / bs * bs;
  const int64_t span = ((config.kv_window - 1 + chunk + bs - 1) / bs + 1) * bs;
  return std::min(n_tokens, sink_slots + span);
}

int32_t Scheduler::blocks_owed(const Sequence& seq) const {
  if (config_.kv_window <= 0) return pool_->blocks_needed(seq.table, seq.n_tokens());
  const int64_t peak = window_peak_tokens(config_, pool_->block_size(), seq.n_tokens());
  return std::max(0, pool_->blocks_for_tokens(static_cast<int32_t>(peak)) - pool_->live_blocks(seq.table));
}

ScheduledBatch Scheduler::schedule() {
  FRUGAL_CHECK_MSG(in_flight_.empty(), "schedule() called before on_step_done() of the previous batch");
  ScheduledBatch batch;
  batch.step = step_ + 1;
  preempted_this_step_ = false;
  int32_t budget = config_.max_num_batched_tokens;
  schedule_running(batch, budget, /*decodes=*/true);
  step_has_decodes_ = !batch.seqs.empty();  // only decodes so far
  schedule_running(batch, budget, /*decodes=*/false);
  // Admitting right after a preemption would only hand the freed blocks to a newer request.
  if (!preempted_this_step_) admit_waiting(batch, budget);
  if (!batch.empty()) {
    ++step_;
    ++counters_.n_steps;
  }
  return batch;
}

// One pass over the running sequences in arrival order: decodes (exactly one token left to
// compute) or prefills (more than one). Preemption may remove sequences from running_ as we go.
void Scheduler::schedule_running(ScheduledBatch& batch, int32_t& budget, bool decodes) {
  const std::vector<Sequence*> snapshot = running_;
  for (Sequence* seq : snapshot) {
    if (budget == 0) return;
    if (seq->status != SeqStatus::kRunning || seq->scheduled_step == step_ + 1) continue;
    const int32_t left = seq->n_uncomputed();
    if ((left == 1) != decodes) continue;
    const int32_t n_new = chunk_tokens(*seq, left, budget);
    if (!reserve(seq, seq->n_computed + n_new, batch)) continue;  // it preempted itself
    emit(seq, n_new, 0, batch, budget);
  }
}

void Scheduler::admit_waiting(ScheduledBatch& batch, int32_t& budget) {
  const int32_t bs = pool_->block_size();
  // Blocks the running prompts still need to finish (prompts admitted in chunks). An admission
  // must leave them and must itself fit whole: admitting on the first chunk alone lets small
  // chunks admit more prompts than the pool can finish, and they then preempt one another by
  // recompute over and over (500 mixed requests: 6,515 preemptions instead of ~100).
  int32_t owed = 0;
  for (const Sequence* s : running_) {
    if (s->n_uncomputed() > 1) owed += blocks_owed(*s);
  }
  while (!waiting_.empty() && budget > 0 && static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    // Match only blocks that end before the last token: it must be computed to get logits.
    const std::span<const int32_t> lookup(seq->tokens.data(), seq->tokens.size() - 1);
    const std::vector<kv::BlockId> hits = pool_->match_prefix(lookup);
    const int32_t n_hit = static_cast<int32_t>(hits.size()) * bs;
    const int32_t left = seq->n_tokens() - n_hit;
    const int32_t n_new = chunk_tokens(*seq, left, budget);
    if (n_new < left && !config_.enable_chunked_prefill) return;
    // Under a window the sequence never holds more than its peak at once (hits included).
    const int32_t need_tokens = std::max<int32_t>(
        n_hit + n_new, static_cast<int32_t>(window_peak_tokens(config_, bs, seq->n_tokens())));
    if (!pool_->can_attach(hits, std::min(need_tokens, seq->n_tokens()), owed)) return;  // FCFS: nobody overtakes the head
    if (!pool_->attach(seq->table, hits, n_hit + n_new)) return;
    if (pool_->prefix_caching()) {
      pool_->record_lookup(static_cast<int32_t>(lookup.size()) / bs, static_cast<int32_t>(hits.size()));
    }
    if (seq->n_cached_prompt < 0) {
      seq->n_cached_prompt = std::min(n_hit, seq->n_prompt);
      counters_.n_prompt_tokens += seq->n_prompt;
    }
    owed += blocks_owed(*seq);
    waiting_.pop_front();
    seq->status = SeqStatus::kRunning;
    seq->n_computed = n_hit;
    insert_running(seq);
    emit(seq, n_new, n_hit, batch, budget);
  }
}

// Tokens to compute this step for a sequence with `left` uncomputed tokens. Without chunked
// prefill the caps do not apply: a prompt runs whole or waits.
int32_t Scheduler::chunk_tokens(const Sequence& seq, int32_t left, int32_t budget) const {
  int32_t n = std::min(left, budget);
  if (!config_.enable_chunked_prefill) return n;
  if (config_.max_prefill_chunk_tokens > 0) n = std::min(n, config_.max_prefill_chunk_tokens);
  if (step_has_decodes_ && config_.long_prefill_chunk_tokens > 0 &&
      seq.n_tokens() > config_.long_prefill_token_threshold) {
    n = std::min(n, config_.long_prefill_chunk_tokens);
  }
  return n;
}

// Grows seq's table to n_tokens slots, preempting the newest running sequence that is not in
// this batch until it fits. Returns false when seq itself had to be preempted.
bool Scheduler::reserve(Sequence* seq, int32_t n_tokens, ScheduledBatch& batch) {
  while (!pool_->grow(seq->table, n_tokens)) {
    auto victim = std::find_if(running_.rbegin(), running_.rend(),
                               [&](const Sequence* s) { return s->scheduled_step != step_ + 1; });
    FRUGAL_CHECK(victim != running_.rend());  // seq itself is running and not yet scheduled
    Sequence* v = *victim;
    preempt(v, batch);
    if (v == seq) return false;
  }
  return true;
}

void Scheduler::preempt(Sequence* victim, ScheduledBatch& batch) {
  pool_->release(victim->table);
  victim->n_computed_before_preemption = std::max(victim->n_computed_before_preemption, victim->n_computed);
  victim->n_computed = 0;
  ++victim->n_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  victim->status = SeqStatus::kWaiting;
  insert_waiting(victim);
  batch.preempted.push_back(victim->id);
  ++counters_.n_preemptions;
  preempted_this_step_ = true;
}

void Scheduler::emit(Sequence* seq, int32_t n_new, int32_t n_prefix_hit, ScheduledBatch& batch, int32_t& budget) {
  const int32_t start = seq->n_computed;
  ScheduledSeq out{
      .id = seq->id,
      .token_ids = {seq->tokens.begin() + start, seq->tokens.begin() + start + n_new},
      .start_pos = start,
      .context_len = start + n_new,
      .needs_logits = start + n_new == seq->n_tokens(),
      .block_table = seq->table.blocks,
      .slot_mapping = {},
      .n_prefix_hit_tokens = n_prefix_hit,
      .n_recomputed_tokens = std::max(0, std::min(start + n_new, seq->n_computed_before_preemption) - start),
  };
  out.slot_mapping.reserve(n_new);
  for (int32_t pos = start; pos < start + n_new; ++pos) out.slot_mapping.push_back(pool_->slot_of(seq->table, pos));
  counters_.n_recomputed_tokens += out.n_recomputed_tokens;
  in_flight_.push_back(InFlight{.seq = seq, .n_new = n_new, .needs_logits = out.needs_logits});
  seq->wants_sample = out.needs_logits;
  seq->scheduled_step = step_ + 1;
  budget -= n_new;
  batch.n_tokens += n_new;
  batch.seqs.push_back(std::move(out));
}

// Matches each sampled token to its in-flight sequence. Every sequence with needs_logits must
// have one, except cancelled ones (optional, ignored). Writes only the epoch-stamped scratch
// fields, so a rejected list leaves the scheduler's state unchanged.
Status Scheduler::match_sampled(std::span<const SampledToken> sampled) {
  if (in_flight_.empty()) return invalid_argument("on_step_done: no batch in flight");
  ++sample_epoch_;
  int32_t n_live = 0;  // matched sequences that are not cancelled
  size_t next = 0;     // engines usually answer in batch order: then no lookup is needed
  for (const SampledToken& s : sampled) {
    while (next < in_flight_.size() && !in_flight_[next].needs_logits) ++next;
    Sequence* seq = nullptr;
    if (next < in_flight_.size() && in_flight_[next].seq->id == s.id) {
      seq = in_flight_[next++].seq;
    } else if (const auto it = seqs_.find(s.id); it != seqs_.end()) {
      seq = it->second.get();
    }
    if (seq == nullptr || !seq->wants_sample || seq->sample_epoch == sample_epoch_) {
      return invalid_argument("on_step_done: sequence " + std::to_string(s.id) +
                              " did not ask for logits in this step or appears twice");
    }
    seq->sample_epoch = sample_epoch_;
    seq->sampled_token = s.token;
    n_live += seq->cancel_pending ? 0 : 1;
  }
  int32_t n_required = 0;
  for (const InFlight& f : in_flight_) n_required += f.needs_logits && !f.seq->cancel_pending ? 1 : 0;
  if (n_live != n_required) {
    return invalid_argument("on_step_done: expected a sampled token for each of the " + std::to_string(n_required) +
                            " sequences that asked for logits, got " + std::to_string(n_live));
  }
  return Status::ok();
}

std::optional<FinishReason> Scheduler::finish_reason(const Sequence& seq) const {
  const int32_t last = seq.tokens.back();
  const auto has = [last](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), last) != ids.end();
  };
  if (has(seq.params.stop_token_ids)) return FinishReason::kStopToken;
  if (!seq.params.ignore_eos && has(seq.params.eos_token_ids)) return FinishReason::kEos;
  if (seq.n_output() >= seq.params.max_tokens) return FinishReason::kLength;
  if (config_.max_model_len > 0 && seq.n_tokens() >= config_.max_model_len) return FinishReason::kLength;
  return std::nullopt;
}

Result<std::vector<FinishedSeq>> Scheduler::on_step_done(std::span<const SampledToken> sampled) {
  FRUGAL_RETURN_IF_ERROR(match_sampled(sampled));
  std::vector<FinishedSeq> finished;
  for (const InFlight& f : in_flight_) {
    Sequence* seq = f.seq;
    seq->n_computed += f.n_new;
    pool_->commit_full_blocks(seq->table, seq->tokens, seq->n_computed);
    // The next query sits at n_computed and sees (n_computed - W, n_computed] and the sinks.
    if (config_.kv_window > 0)
      counters_.n_window_released_blocks +=
          pool_->release_behind(seq->table, seq->n_computed - config_.kv_window + 1, config_.kv_sinks);
    seq->wants_sample = false;
    if (seq->cancel_pending) {
      drop(seq);
      continue;
    }
    if (!f.needs_logits) continue;
    seq->tokens.push_back(seq->sampled_token);
    ++counters_.n_generated_tokens;
    const std::optional<FinishReason> reason = finish_reason(*seq);
    if (!reason) continue;
    finished.push_back(FinishedSeq{
        .id = seq->id,
        .reason = *reason,
        .output_tokens = {seq->tokens.begin() + seq->n_prompt, seq->tokens.end()},
        .n_prompt = seq->n_prompt,
        .n_cached_prompt = std::max(0, seq->n_cached_prompt),
    });
    drop(seq);
  }
  in_flight_.clear();
  return finished;
}

Status Scheduler::cancel(SeqId id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return not_found("cancel: no unfinished request " + std::to_string(id));
  Sequence* seq = it->second.get();
  const bool in_batch = !in_flight_.empty() && seq->scheduled_step == step_;
  if (in_batch) {
    seq->cancel_pending = true;  // the running step still reads and writes its blocks
    return Status::ok();
  }
  drop(seq);
  return Status::ok();
}

void Scheduler::drop(Sequence* seq) {
  pool_->release(seq->table);
  remove_from_queues(seq);
  seqs_.erase(seq->id);
}

void Scheduler::insert_running(Sequence* seq) {
  const auto pos = std::upper_bound(running_.begin(), running_.end(), seq,
                                    [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  running_.insert(pos, seq);
}

void Scheduler::insert_waiting(Sequence* seq) {
  const auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                                    [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  waiting_.insert(pos, seq);
}

void Scheduler::remove_from_queues(Sequence* seq) {
  if (auto r = std::find(running_.begin(), running_.end(), seq); r != running_.end()) running_.erase(r);
  if (auto w = std::find(waiting_.begin(), waiting_.end(), seq); w != waiting_.end()) waiting_.erase(w);
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = counters_;
  const kv::BlockPoolStats p = pool_->stats();
  s.n_running = static_cast<int32_t>(running_.size());
  s.n_waiting = static_cast<int32_t>(waiting_.size());
  s.n_blocks_total = p.n_blocks;
  s.n_blocks_used = p.n_used;
  s.n_blocks_free = p.n_free;
  s.n_prefix_queried_blocks = p.n_queried_blocks;
  s.n_prefix_hit_blocks = p.n_hit_blocks;
  s.prefix_hit_rate = p.hit_rate;
  s.fragmentation = p.fragmentation;
  return s;
}

const Sequence* Scheduler::find(SeqId id) const {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

}  // namespace frugal::sched
