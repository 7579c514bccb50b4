// Timeline harness (TensorRT-LLM style): a table of steps, each with its arrivals and the batch
// the scheduler must build ({id, tokens computed}), plus expected preemptions and finishes.
// Every step also runs the fake engine, checks the pool's invariants, and at the end checks that
// each finished sequence produced exactly what it produces alone and that no block leaked.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "sched/scheduler.h"
#include "fake_engine.h"

namespace frugal::sched::testing {

struct Arrival {
  SeqId id = 0;
  std::vector<int32_t> prompt = {};
  SeqParams params = {};
};

struct Expect {
  SeqId id = 0;
  int32_t n_tokens = 0;
  bool operator==(const Expect&) const = default;
};

inline void PrintTo(const Expect& e, std::ostream* os) { *os << "{" << e.id << ":" << e.n_tokens << "}"; }

struct Step {
  int step = 0;
  std::vector<Arrival> arrivals = {};
  std::vector<Expect> scheduled = {};
  std::vector<SeqId> finished = {};
  std::vector<SeqId> preempted = {};
};

inline std::vector<int32_t> tokens(int32_t first, int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class Timeline {
 public:
  Timeline(const SchedulerConfig& sc, const kv::BlockPoolConfig& pc)
      : pool_(std::move(kv::BlockPool::create(pc)).value()),
        sched_(std::move(Scheduler::create(sc, &pool_)).value()),
        engine_(pc.n_blocks, pc.block_size) {}

  kv::BlockPool& pool() { return pool_; }
  Scheduler& sched() { return sched_; }
  const ScheduledBatch& last_batch() const { return last_; }

  // Runs the rows in order; row.step must count 1, 2, 3, ...
  void run(const std::vector<Step>& rows) {
    for (const Step& row : rows) {
      SCOPED_TRACE("step " + std::to_string(row.step));
      ASSERT_EQ(row.step, ++n_steps_);
      for (const Arrival& a : row.arrivals) add(a);
      ASSERT_NO_FATAL_FAILURE(schedule_and_check(row));
      ASSERT_NO_FATAL_FAILURE(complete(row.finished));
    }
  }

  void add(const Arrival& a) {
    ASSERT_TRUE(sched_.add_request(a.id, a.prompt, a.params).is_ok());
    prompts_[a.id] = a;
  }

  void schedule_and_check(const Step& row) {
    last_ = sched_.schedule();
    std::vector<Expect> got;
    for (const ScheduledSeq& s : last_.seqs) got.push_back({s.id, static_cast<int32_t>(s.token_ids.size())});
    EXPECT_EQ(got, row.scheduled);
    EXPECT_EQ(last_.preempted, row.preempted);
    ASSERT_TRUE(pool_.check_invariants().is_ok()) << pool_.check_invariants().to_string();
  }

  // Runs the last batch through the fake engine and completes the step.
  void complete(std::vector<SeqId> expect_finished) {
    if (last_.empty()) {
      EXPECT_TRUE(expect_finished.empty());
      return;
    }
    auto done = sched_.on_step_done(engine_.run(last_));
    ASSERT_TRUE(done.is_ok()) << done.status().to_string();
    std::vector<SeqId> ids;
    for (FinishedSeq& f : *done) {
      ids.push_back(f.id);
      finished_[f.id] = std::move(f);
    }
    std::sort(ids.begin(), ids.end());
    std::sort(expect_finished.begin(), expect_finished.end());
    EXPECT_EQ(ids, expect_finished);
    ASSERT_TRUE(pool_.check_invariants().is_ok()) << pool_.check_invariants().to_string();
  }

  const FinishedSeq& finished(SeqId id) { return finished_.at(id); }

  // Every finished sequence matches its solo run; nothing is left running and no block is held.
  void expect_clean_end() {
    for (const auto& [id, f] : finished_) {
      const Arrival& a = prompts_.at(id);
      const auto ref = reference_generate(a.prompt, static_cast<int32_t>(f.output_tokens.size()));
      EXPECT_EQ(f.output_tokens, ref) << "sequence " << id << " differs from its solo run";
    }
    EXPECT_FALSE(sched_.has_unfinished());
    EXPECT_EQ(pool_.n_used(), 0);
    EXPECT_EQ(pool_.n_free(), pool_.n_blocks());
    EXPECT_TRUE(pool_.check_invariants().is_ok());
  }

 private:
  kv::BlockPool pool_;
  Scheduler sched_;
  FakeEngine engine_;
  ScheduledBatch last_;
  std::map<SeqId, Arrival> prompts_;
  std::map<SeqId, FinishedSeq> finished_;
  int n_steps_ = 0;
};

}  // namespace frugal::sched::testing
