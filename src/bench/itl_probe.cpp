#include "bench/itl_probe.h"

#include <algorithm>
#include <map>
#include <random>

#include "bench/workload.h"

namespace frugal::bench {
namespace {

// Prefill tokens one step can give the long prompt while `batch` sequences decode.
int32_t effective_chunk(const ItlProbeOptions& o, const runtime::EngineOptions& eo) {
  if (!eo.enable_chunked_prefill) return o.long_prompt;
  int32_t c = std::max(1, eo.max_num_batched_tokens - o.batch);
  if (eo.max_prefill_chunk_tokens > 0) c = std::min(c, eo.max_prefill_chunk_tokens);
  if (o.batch > 0 && eo.long_prefill_chunk_tokens > 0 && o.long_prompt > eo.long_prefill_token_threshold)
    c = std::min(c, eo.long_prefill_chunk_tokens);
  return c;
}

// Decoders' max_tokens: enough for warmup, both windows and the long prefill, with margin.
int32_t decoder_max_tokens(const ItlProbeOptions& o, const runtime::EngineOptions& eo) {
  const int32_t c = effective_chunk(o, eo);
  const int32_t prefill_steps = (o.long_prompt + c - 1) / c;
  return o.warmup_tokens + 2 * (o.window + 2) + 2 * prefill_steps + 64;
}

// The decoders of one step wait for the same step, so their gaps are nearly equal: the
// independent units are steps, not gaps. Confidence intervals resample steps (each step's mean
// gap), deterministically.
class StepGaps {
 public:
  void add(int64_t step, double gap) {
    auto& [sum, n] = by_step_[step];
    sum += gap;
    ++n;
  }
  std::vector<double> means() const {
    std::vector<double> m;
    for (const auto& [step, sn] : by_step_) m.push_back(sn.first / sn.second);
    return m;
  }

 private:
  std::map<int64_t, std::pair<double, int64_t>> by_step_;
};

double resampled_median(const std::vector<double>& xs, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, xs.size() - 1);
  std::vector<double> r(xs.size());
  for (double& x : r) x = xs[pick(rng)];
  return median(r);
}

// 95% percentile-bootstrap intervals of the median of `before` and `during` (step means, in
// seconds) and of their ratio, resampling both independently.
struct StepIntervals {
  Interval before, during, ratio;
};
StepIntervals step_intervals(const std::vector<double>& before, const std::vector<double>& during) {
  constexpr int kResamples = 2000;
  std::mt19937_64 rng(0x17e5eedULL);
  std::vector<double> mb, md, mr;
  for (int i = 0; i < kResamples; ++i) {
    mb.push_back(resampled_median(before, rng));
    md.push_back(resampled_median(during, rng));
    mr.push_back(md.back() / mb.back());
  }
  auto ci = [](std::vector<double>& v) { return Interval{percentile(v, 2.5), percentile(v, 97.5)}; };
  return {ci(mb), ci(md), ci(mr)};
}

nlohmann::json ms_summary(std::vector<double> xs) {
  if (xs.empty()) return {{"n", 0}};
  for (double& x : xs) x *= 1000.0;
  return {{"n", xs.size()}, {"median", median(xs)}, {"p90", percentile(xs, 90)},
          {"max", *std::max_element(xs.begin(), xs.end())}};
}

}  // namespace

Status check_itl_probe(const ItlProbeOptions& o, const runtime::EngineOptions& eo, int32_t max_model_len) {
  if (o.batch < 0) return invalid_argument("--itl-probe: expected >= 0 decoding sequences, got " + std::to_string(o.batch));
  if (o.batch == 0) return Status::ok();
  if (o.batch + 1 > eo.max_num_seqs) {
    return invalid_argument("--itl-probe " + std::to_string(o.batch) + ": the long request needs a slot too; raise "
                            "--max-num-seqs to >= " + std::to_string(o.batch + 1));
  }
  if (o.prompt_len < 1) return invalid_argument("--itl-prompt-len: expected >= 1");
  if (o.long_prompt < 1) return invalid_argument("--itl-long-prompt: expected >= 1");
  if (o.window < 1) return invalid_argument("--itl-window: expected >= 1");
  if (o.warmup_tokens < 0) return invalid_argument("--itl-warmup-tokens: expected >= 0");
  if (!(o.max_ratio > 0)) return invalid_argument("--itl-max-ratio: expected > 0");
  if (!eo.enable_chunked_prefill && o.long_prompt + o.window > eo.max_num_batched_tokens - o.batch) {
    return invalid_argument("--itl-long-prompt " + std::to_string(o.long_prompt) +
                            " cannot be computed in one step next to the decoders with --no-chunked-prefill; raise "
                            "--max-num-batched-tokens to >= " + std::to_string(o.long_prompt + o.window + o.batch));
  }
  if (int64_t{o.long_prompt} + o.window + 1 > max_model_len) {
    return invalid_argument("--itl-long-prompt " + std::to_string(o.long_prompt) + " + --itl-window " +
                            std::to_string(o.window) + " + 1 exceeds the model's context of " +
                            std::to_string(max_model_len));
  }
  if (int64_t{o.prompt_len} + decoder_max_tokens(o, eo) > max_model_len) {
    return invalid_argument("--itl-prompt-len " + std::to_string(o.prompt_len) + " + the " +
                            std::to_string(decoder_max_tokens(o, eo)) +
                            " tokens each decoder may generate exceeds the model's context of " +
                            std::to_string(max_model_len) + " (lower --itl-window or raise the chunk size)");
  }
  return Status::ok();
}

Result<nlohmann::json> run_itl_probe(runtime::Engine& engine, StepRecorder& steps, const ItlProbeOptions& o,
                                     const runtime::EngineOptions& eo, SplitMix64& rng) {
  FRUGAL_RETURN_IF_ERROR(check_itl_probe(o, eo, engine.max_model_len()));
  // A preemption would stall the decoders and distort every figure: the probe needs its whole
  // KV demand resident at once.
  const int64_t bs = eo.block_size;
  const int64_t decoder_blocks = (int64_t{o.prompt_len} + decoder_max_tokens(o, eo) + bs - 1) / bs;
  const int64_t need_blocks = o.batch * decoder_blocks + (int64_t{o.long_prompt} + o.window + 1 + bs - 1) / bs;
  const int64_t pool_blocks = engine.stats().kv_blocks_total;
  if (need_blocks > pool_blocks) {
    return invalid_argument("--itl-probe needs " + std::to_string(need_blocks) + " KV blocks resident, the pool has " +
                            std::to_string(pool_blocks) + " (raise --num-kv-blocks or run the probe separately)");
  }
  const int32_t vocab = engine.vocab_size();
  const size_t b = static_cast<size_t>(o.batch);
  const size_t long_i = b;  // the long request is the last record
  RequestLog log(b + 1);
  const runtime::EngineStats before = engine.stats();
  steps.start();
  auto cancel_all = [&] {
    for (const RequestRecord& r : log.snapshot()) {
      if (r.id != 0 && !r.finished) engine.cancel(r.id);
    }
  };
  auto fail = [&](const std::string& what) -> Status {
    cancel_all();
    log.wait_until([](const std::vector<RequestRecord>& rs) {  // every submitted request finished
      return std::all_of(rs.begin(), rs.end(), [](const RequestRecord& r) { return r.id == 0 || r.finished; });
    });
    (void)steps.stop();
    std::string why;
    for (const RequestRecord& r : log.snapshot()) {
      if (!r.error.empty()) {
        why = ": " + r.error;
        break;
      }
    }
    return internal_error("--itl-probe: " + what + why);
  };
  std::vector<runtime::GenerateRequest> decoders(b);  // in one batch: they start in one step
  for (auto& req : decoders) {
    req.prompt = random_prompt(rng, o.prompt_len, vocab);
    req.sampling.temperature = 0;
    req.sampling.max_tokens = decoder_max_tokens(o, eo);
    req.sampling.ignore_eos = true;
  }
  if (Status st = log.submit_all(engine, std::move(decoders)); !st.is_ok()) return fail("submitting the decoders");
  // Steady state: every decoder past its warmup and a full "before" window.
  const size_t need_before = static_cast<size_t>(o.warmup_tokens + o.window + 1);
  if (!log.wait_until([&](const std::vector<RequestRecord>& rs) {
        for (size_t i = 0; i < b; ++i)
          if (rs[i].token_times.size() < need_before) return false;
        return true;
      })) {
    return fail("a decoder finished before reaching steady state");
  }
  runtime::GenerateRequest lr;
  lr.prompt = random_prompt(rng, o.long_prompt, vocab);
  lr.sampling.temperature = 0;
  lr.sampling.max_tokens = o.window + 1;
  lr.sampling.ignore_eos = true;
  const int64_t prompt_tokens_before_long = engine.stats().prompt_tokens_total;
  if (Status st = log.submit(engine, long_i, std::move(lr)); !st.is_ok()) return fail("submitting the long request");
  // After: the long request done and every decoder with a full window after its first token.
  if (!log.wait_until([&](const std::vector<RequestRecord>& rs) {
        if (!rs[long_i].finished || rs[long_i].token_times.empty()) return false;
        const Clock::time_point t_first = rs[long_i].token_times.front();
        for (size_t i = 0; i < b; ++i) {
          const auto& tt = rs[i].token_times;
          const auto after = tt.end() - std::upper_bound(tt.begin(), tt.end(), t_first);
          if (after < o.window + 2) return false;
        }
        return true;
      })) {
    return fail("a request ended before the probe finished");
  }
  cancel_all();
  log.wait_all_finished();
  const std::vector<StepSample> samples = steps.stop();
  const runtime::EngineStats after_stats = engine.stats();
  const std::vector<RequestRecord> recs = log.snapshot();
  if (recs[long_i].finish != runtime::FinishReason::kLength) return internal_error("--itl-probe: the long request did not complete");

  // Steps: the long request was admitted in the first step whose prompt counter includes it, and
  // its first token came in the step published last before that token's callback.
  std::vector<Clock::time_point> step_t;
  int64_t k_admit = -1;
  for (size_t k = 0; k < samples.size(); ++k) {
    step_t.push_back(samples[k].t);
    if (k_admit < 0 && samples[k].stats.prompt_tokens_total >= prompt_tokens_before_long + o.long_prompt) {
      k_admit = static_cast<int64_t>(k);
    }
  }
  auto step_of = [&](Clock::time_point t) {
    return static_cast<int64_t>(std::upper_bound(step_t.begin(), step_t.end(), t) - step_t.begin()) - 1;
  };
  const Clock::time_point t_sub = recs[long_i].submitted, t_first = recs[long_i].token_times.front();
  const int64_t k_first = step_of(t_first);
  if (k_admit < 0 || k_first < k_admit) return internal_error("--itl-probe: could not find the long prefill's steps");

  std::vector<double> itl_before, itl_during, itl_after;
  StepGaps steps_before, steps_during;
  for (size_t i = 0; i < b; ++i) {
    const auto& tt = recs[i].token_times;
    std::vector<double> mine_before, mine_after;
    std::vector<int64_t> mine_before_step;
    for (size_t k = static_cast<size_t>(o.warmup_tokens) + 1; k < tt.size(); ++k) {
      const double gap = seconds_between(tt[k - 1], tt[k]);
      const int64_t s = step_of(tt[k]);
      if (s < k_admit) {
        mine_before.push_back(gap);
        mine_before_step.push_back(s);
      } else if (s <= k_first) {
        itl_during.push_back(gap);
        steps_during.add(s, gap);
      } else if (static_cast<int32_t>(mine_after.size()) < o.window) {
        mine_after.push_back(gap);
      }
    }
    // The last `window` gaps before the long request arrived.
    const size_t w = static_cast<size_t>(o.window);
    const size_t drop = mine_before.size() > w ? mine_before.size() - w : 0;
    itl_before.insert(itl_before.end(), mine_before.begin() + static_cast<int64_t>(drop), mine_before.end());
    for (size_t k = drop; k < mine_before.size(); ++k) steps_before.add(mine_before_step[k], mine_before[k]);
    itl_after.insert(itl_after.end(), mine_after.begin(), mine_after.end());
  }
  if (itl_before.empty() || itl_during.empty()) return internal_error("--itl-probe: no ITL samples before or during the long prefill");
  const double med_before = median(itl_before);
  const double med_during = median(itl_during);
  nlohmann::json j;
  j["batch"] = o.batch;
  j["prompt_len"] = o.prompt_len;
  j["long_prompt"] = o.long_prompt;
  j["warmup_tokens"] = o.warmup_tokens;
  j["window"] = o.window;
  j["chunked_prefill"] = eo.enable_chunked_prefill;
  j["max_prefill_chunk_tokens"] = eo.max_prefill_chunk_tokens;
  j["long_prefill_token_threshold"] = eo.long_prefill_token_threshold;
  j["long_prefill_chunk_tokens"] = eo.long_prefill_chunk_tokens;
  j["chunk_tokens_effective"] = effective_chunk(o, eo);
  j["prefill_steps"] = k_first - k_admit + 1;
  j["long_prefill_s"] = seconds_between(t_sub, t_first);
  j["long_admit_to_first_token_s"] = seconds_between(samples[static_cast<size_t>(k_admit)].t, t_first);
  j["itl_before_ms"] = ms_summary(itl_before);
  j["itl_during_ms"] = ms_summary(itl_during);
  const std::vector<double> before_steps = steps_before.means(), during_steps = steps_during.means();
  const StepIntervals ci = step_intervals(before_steps, during_steps);
  j["itl_before_ms"]["steps"] = before_steps.size();
  j["itl_during_ms"]["steps"] = during_steps.size();
  j["itl_before_ms"]["median_ci95"] = {1000 * ci.before.lo, 1000 * ci.before.hi};
  j["itl_during_ms"]["median_ci95"] = {1000 * ci.during.lo, 1000 * ci.during.hi};
  j["ratio_median_ci95"] = {ci.ratio.lo, ci.ratio.hi};
  j["itl_after_ms"] = ms_summary(itl_after);
  j["ratio_median"] = med_during / med_before;
  j["ratio_p90"] = percentile(itl_during, 90) / med_before;
  j["ratio_max"] = *std::max_element(itl_during.begin(), itl_during.end()) / med_before;
  j["preemptions"] = after_stats.preemptions - before.preemptions;
  j["max_ratio"] = o.max_ratio;
  j["pass"] = med_during / med_before <= o.max_ratio;
  j["pass_strict"] = j["ratio_max"].get<double>() <= o.max_ratio;
  return j;
}

}  // namespace frugal::bench
