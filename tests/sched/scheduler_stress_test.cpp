// Seeded randomized stress: random arrivals (many sharing prefixes), eos tokens, cancellations
// (in and out of the in-flight step), small pools and tight budgets. Invariants are checked after
// every schedule() and on_step_done(); at the end every finished sequence equals its solo run
// (cut at its eos) and no block is held.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "sched/scheduler.h"
#include "fake_engine.h"
#include "timeline.h"

namespace frugal::sched::testing {
namespace {

struct Scenario {
  SchedulerConfig sched;
  kv::BlockPoolConfig pool;
};

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  int operator()(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }

 private:
  std::mt19937 gen_;
};

Scenario random_scenario(Rng& pick) {
  const int32_t bs = std::vector<int32_t>{1, 2, 4, 8}[pick(0, 3)];
  // Without chunking a whole (re)computation must fit one step, so the budget must be larger.
  const bool chunked = pick(0, 3) != 0;
  const int32_t budget = chunked ? pick(4, 48) : pick(24, 64);
  return Scenario{
      .sched = {.max_num_batched_tokens = budget,
                .max_num_seqs = std::min(budget, pick(1, 8)),
                .enable_chunked_prefill = chunked,
                .max_prefill_chunk_tokens = pick(0, 1) == 0 ? 0 : pick(1, 16)},
      .pool = {.n_blocks = pick(48, 160) / bs, .block_size = bs, .enable_prefix_caching = pick(0, 3) != 0},
  };
}

// Checks a freshly scheduled batch against the config and the pool.
void check_batch(const ScheduledBatch& b, const Scenario& sc, const kv::BlockPool& pool) {
  ASSERT_LE(b.n_tokens, sc.sched.max_num_batched_tokens);
  ASSERT_LE(static_cast<int32_t>(b.seqs.size()), sc.sched.max_num_seqs);
  int32_t sum = 0;
  std::set<SeqId> ids;
  std::set<int32_t> slots;
  const int32_t bs = sc.pool.block_size;
  for (const ScheduledSeq& s : b.seqs) {
    ASSERT_TRUE(ids.insert(s.id).second) << "sequence scheduled twice";
    ASSERT_FALSE(s.token_ids.empty());
    sum += static_cast<int32_t>(s.token_ids.size());
    ASSERT_EQ(s.context_len, s.start_pos + static_cast<int32_t>(s.token_ids.size()));
    ASSERT_EQ(static_cast<int32_t>(s.block_table.size()), (s.context_len + bs - 1) / bs);
    for (int32_t slot : s.slot_mapping) {
      ASSERT_TRUE(slots.insert(slot).second) << "two tokens write one slot";
      // A written block belongs to this sequence alone: shared (prefix) blocks are read-only.
      ASSERT_EQ(pool.ref_count(slot / bs), 1);
    }
  }
  ASSERT_EQ(sum, b.n_tokens);
}

struct Request {
  std::vector<int32_t> prompt;
  SeqParams params;
  bool cancelled = false;
};

// What the request must output run alone: the toy model's tokens up to max_tokens, cut after the
// first eos (unless ignored).
std::vector<int32_t> expected_output(const Request& r) {
  std::vector<int32_t> out = reference_generate(r.prompt, r.params.max_tokens);
  if (r.params.ignore_eos) return out;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::count(r.params.eos_token_ids.begin(), r.params.eos_token_ids.end(), out[i]) != 0) {
      out.resize(i + 1);
      break;
    }
  }
  return out;
}

class Stress {
 public:
  explicit Stress(uint32_t seed)
      : pick_(seed),
        sc_(random_scenario(pick_)),
        pool_(std::move(kv::BlockPool::create(sc_.pool)).value()),
        sched_(std::move(Scheduler::create(sc_.sched, &pool_)).value()),
        engine_(sc_.pool.n_blocks, sc_.pool.block_size) {
    for (auto& p : prefixes_) {
      for (int i = 0; i < 40; ++i) p.push_back(pick_(0, 999));
    }
  }

  // Runs arrivals for `arrival_steps` steps, then drains; returns the batch log.
  std::vector<std::vector<Expect>> run(int arrival_steps) {
    for (int step = 0; step < 20000; ++step) {
      const bool open = step < arrival_steps;
      if (!open && !sched_.has_unfinished()) break;
      if (open && pick_(0, 9) < 4) arrive();
      if (pick_(0, 19) == 0) cancel_random();
      ScheduledBatch batch = sched_.schedule();
      check_batch(batch, sc_, pool_);
      check_state();
      if (pick_(0, 19) == 0) cancel_random();  // possibly a sequence of the in-flight batch
      log_.push_back({});
      for (const ScheduledSeq& s : batch.seqs) log_.back().push_back({s.id, static_cast<int32_t>(s.token_ids.size())});
      if (batch.empty()) continue;
      std::vector<SampledToken> sampled = engine_.run(batch);
      if (pick_(0, 1) == 0) {  // tokens of sequences cancelled during the step are optional
        std::erase_if(sampled, [&](const SampledToken& t) { return requests_.at(t.id).cancelled; });
      }
      auto done = sched_.on_step_done(sampled);
      EXPECT_TRUE(done.is_ok()) << done.status().to_string();
      for (FinishedSeq& f : *done) finished_.emplace(f.id, std::move(f));
      check_state();
    }
    EXPECT_FALSE(sched_.has_unfinished()) << "did not drain: livelock";
    return log_;
  }

  void check_end() {
    int64_t n_finished = 0;
    for (const auto& [id, r] : requests_) {
      if (r.cancelled) continue;
      ++n_finished;
      ASSERT_TRUE(finished_.count(id)) << "request " << id << " never finished";
      EXPECT_EQ(finished_.at(id).output_tokens, expected_output(r)) << "request " << id;
    }
    EXPECT_GT(n_finished, 20) << "bs " << sc_.pool.block_size << " blocks " << sc_.pool.n_blocks << " budget "
                              << sc_.sched.max_num_batched_tokens << " chunked " << sc_.sched.enable_chunked_prefill;
    EXPECT_EQ(pool_.n_used(), 0);
    EXPECT_EQ(pool_.n_free(), pool_.n_blocks());
    EXPECT_TRUE(pool_.check_invariants().is_ok());
  }

  const SchedulerStats stats() const { return sched_.stats(); }

 private:
  void arrive() {
    Request r;
    const auto& base = prefixes_[pick_(0, 2)];
    r.prompt.assign(base.begin(), base.begin() + pick_(0, 24));
    for (int i = pick_(r.prompt.empty() ? 1 : 0, 12); i > 0; --i) r.prompt.push_back(pick_(0, 999));
    r.params.max_tokens = pick_(1, 12);
    if (pick_(0, 2) == 0) {
      // An eos the toy model will actually produce, sometimes ignored.
      const auto ref = reference_generate(r.prompt, r.params.max_tokens);
      r.params.eos_token_ids = {ref[pick_(0, static_cast<int>(ref.size()) - 1)]};
      r.params.ignore_eos = pick_(0, 3) == 0;
    }
    const SeqId id = next_id_++;
    const Status s = sched_.add_request(id, r.prompt, r.params);
    if (s.is_ok()) {
      requests_.emplace(id, std::move(r));
      return;
    }
    // Only requests that can never fit may be refused.
    const int64_t kv = static_cast<int64_t>(r.prompt.size()) + r.params.max_tokens - 1;
    const bool too_big = kv > int64_t{sc_.pool.n_blocks} * sc_.pool.block_size ||
                         (!sc_.sched.enable_chunked_prefill && kv > sc_.sched.max_num_batched_tokens);
    EXPECT_TRUE(too_big) << s.to_string();
  }

  void cancel_random() {
    std::vector<SeqId> live;
    for (const auto& [id, r] : requests_) {
      if (!r.cancelled && !finished_.count(id)) live.push_back(id);
    }
    if (live.empty()) return;
    const SeqId id = live[pick_(0, static_cast<int>(live.size()) - 1)];
    EXPECT_TRUE(sched_.cancel(id).is_ok());
    requests_.at(id).cancelled = true;
  }

  void check_state() {
    const Status s = pool_.check_invariants();
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const SchedulerStats st = sched_.stats();
    ASSERT_EQ(st.n_blocks_used + st.n_blocks_free, st.n_blocks_total);
    ASSERT_LE(st.n_running, sc_.sched.max_num_seqs);
    ASSERT_GE(st.fragmentation, 0.0);
    ASSERT_LE(st.fragmentation, 1.0);
  }

  Rng pick_;
  Scenario sc_;
  kv::BlockPool pool_;
  Scheduler sched_;
  FakeEngine engine_;
  std::vector<int32_t> prefixes_[3];
  std::map<SeqId, Request> requests_;
  std::map<SeqId, FinishedSeq> finished_;
  std::vector<std::vector<Expect>> log_;
  SeqId next_id_ = 1;
};

TEST(SchedulerStress, RandomTimelinesKeepInvariants) {
  int64_t preemptions = 0;
  int64_t hits = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Stress s(seed);
    s.run(300);
    s.check_end();
    preemptions += s.stats().n_preemptions;
    hits += s.stats().n_prefix_hit_blocks;
    if (::testing::Test::HasFatalFailure()) return;
  }
  RecordProperty("preemptions", static_cast<int>(preemptions));
  RecordProperty("prefix_hit_blocks", static_cast<int>(hits));
  // The scenarios must actually exercise preemption and prefix hits.
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(hits, 0);
}

TEST(SchedulerStress, SameSeedSameSchedule) {
  Stress a(7);
  Stress b(7);
  EXPECT_EQ(a.run(200), b.run(200));
}

}  // namespace
}  // namespace frugal::sched::testing
