#include "bench/mixed_load.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace frugal::bench {

Status check_mixed_load(const MixedLoadOptions& o, int32_t max_model_len) {
  if (o.num_prompts < 0) return invalid_argument("--mixed-prompts: expected >= 0, got " + std::to_string(o.num_prompts));
  FRUGAL_RETURN_IF_ERROR(check_range(o.input, 1, "--mixed-input-range"));
  FRUGAL_RETURN_IF_ERROR(check_range(o.output, 1, "--mixed-output-range"));
  if (!(o.rate >= 0)) return invalid_argument("--mixed-rate: expected >= 0 requests/s (0 = all at once)");
  if (!(o.max_fragmentation >= 0 && o.max_fragmentation <= 1)) {
    return invalid_argument("--mixed-max-fragmentation: expected a fraction in [0, 1]");
  }
  // The engine cuts max_tokens to the room left in the context; the check needs exact lengths.
  const int64_t longest = int64_t{o.input.hi} + o.output.hi;
  if (longest > max_model_len) {
    return invalid_argument("--mixed-input-range max + --mixed-output-range max = " + std::to_string(longest) +
                            " tokens exceeds the model's context of " + std::to_string(max_model_len) +
                            " (set --max-model-len or shrink the ranges)");
  }
  return Status::ok();
}

namespace {

struct Request {
  int32_t input = 0;
  int32_t output = 0;
};

std::string fmt_request_error(size_t i, const RequestRecord& r) {
  std::string m = "request " + std::to_string(i) + ": finished " + runtime::finish_reason_name(r.finish);
  if (!r.error.empty()) m += ": " + r.error;
  return m;
}

// Summary of the per-step samples. Each sample describes the state at the end of a step and is
// weighted by that step's duration (time since the previous sample, or since the start).
nlohmann::json step_summary(const std::vector<StepSample>& samples, Clock::time_point t0, double threshold) {
  int64_t max_waiting = 0, max_running = 0, peak_used = 0, total = 0;
  double used_tw = 0, time = 0;
  double frag_max = 0, frag_sum = 0, frag_tw = 0, frag_time = 0, frag_max_waiting = 0;
  int64_t n_frag = 0, n_waiting = 0;
  Clock::time_point prev = t0;
  for (const StepSample& s : samples) {
    const double dt = std::max(0.0, seconds_between(prev, s.t));
    prev = s.t;
    const runtime::EngineStats& st = s.stats;
    total = st.kv_blocks_total;
    max_waiting = std::max(max_waiting, st.waiting);
    max_running = std::max(max_running, st.running);
    peak_used = std::max(peak_used, st.kv_blocks_used);
    used_tw += static_cast<double>(st.kv_blocks_used) * dt;
    time += dt;
    if (st.kv_blocks_used == 0) continue;  // an empty pool has no fragmentation to speak of
    ++n_frag;
    frag_max = std::max(frag_max, st.kv_fragmentation);
    frag_sum += st.kv_fragmentation;
    frag_tw += st.kv_fragmentation * dt;
    frag_time += dt;
    if (st.waiting > 0) {
      ++n_waiting;
      frag_max_waiting = std::max(frag_max_waiting, st.kv_fragmentation);
    }
  }
  // The verdict looks at the steps where memory was contended (requests waiting): that is when
  // wasted slots cost anything. Once the queue drains, the last few sequences of a run can leave
  // a high fraction of a near-empty pool unfilled; that is reported (max) but not judged.
  const bool judged_waiting = n_waiting > 0;
  const double checked = judged_waiting ? frag_max_waiting : frag_max;
  nlohmann::json j;
  j["steps"] = samples.size();
  j["max_waiting"] = max_waiting;
  j["max_running"] = max_running;
  j["kv_blocks_total"] = total;
  j["kv_used_peak_blocks"] = peak_used;
  j["kv_used_peak_fraction"] = total > 0 ? static_cast<double>(peak_used) / static_cast<double>(total) : 0.0;
  j["kv_used_mean_fraction"] = total > 0 && time > 0 ? used_tw / time / static_cast<double>(total) : 0.0;
  j["fragmentation"] = {{"max", frag_max},
                        {"mean", n_frag > 0 ? frag_sum / static_cast<double>(n_frag) : 0.0},
                        {"time_weighted_mean", frag_time > 0 ? frag_tw / frag_time : 0.0},
                        {"max_while_waiting", frag_max_waiting},
                        {"steps_sampled", n_frag},
                        {"steps_while_waiting", n_waiting},
                        {"checked", checked},
                        {"checked_over", judged_waiting ? "steps with requests waiting" : "all steps"},
                        {"threshold", threshold},
                        {"pass", checked <= threshold}};
  return j;
}

}  // namespace

Result<nlohmann::json> run_mixed_load(runtime::Engine& engine, StepRecorder& steps, const MixedLoadOptions& o,
                                      int32_t block_size, SplitMix64& rng) {
  FRUGAL_RETURN_IF_ERROR(check_mixed_load(o, engine.max_model_len()));
  const int32_t vocab = engine.vocab_size();
  const size_t n = static_cast<size_t>(o.num_prompts);
  std::vector<Request> lens(n);
  std::vector<std::vector<int32_t>> prompts(n);
  int64_t demand_tokens = 0, demand_blocks = 0, input_tokens = 0, output_requested = 0;
  for (size_t i = 0; i < n; ++i) {
    lens[i].input = sample_length(rng, o.input.lo, o.input.hi, o.dist);
    lens[i].output = sample_length(rng, o.output.lo, o.output.hi, o.dist);
    prompts[i] = random_prompt(rng, lens[i].input, vocab);
    // The last sampled token is never fed back: a request holds at most input + output - 1 in KV.
    const int64_t kv = int64_t{lens[i].input} + lens[i].output - 1;
    demand_tokens += kv;
    demand_blocks += (kv + block_size - 1) / block_size;
    input_tokens += lens[i].input;
    output_requested += lens[i].output;
  }
  // Arrival offsets: all at t0, or exponential gaps (Poisson process) at the given rate.
  std::vector<double> arrival(n, 0.0);
  for (size_t i = 1; i < n && o.rate > 0; ++i) arrival[i] = arrival[i - 1] - std::log(1.0 - rng.uniform()) / o.rate;

  const runtime::EngineStats before = engine.stats();
  RequestLog log(n);
  steps.start();
  const auto t0 = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    if (arrival[i] > 0) std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                                               std::chrono::duration<double>(arrival[i])));
    runtime::GenerateRequest req;
    req.prompt = std::move(prompts[i]);
    req.sampling.temperature = 0;
    req.sampling.max_tokens = lens[i].output;
    req.sampling.ignore_eos = true;  // every request produces exactly its drawn output length
    (void)log.submit(engine, i, std::move(req));  // a refusal is recorded as a failure
  }
  log.wait_all_finished();
  const auto t1 = Clock::now();
  const std::vector<StepSample> samples = steps.stop();
  const runtime::EngineStats after = engine.stats();

  const std::vector<RequestRecord> recs = log.snapshot();
  int64_t completed = 0, failed = 0, mismatched = 0, output_tokens = 0, completed_input = 0;
  nlohmann::json errors = nlohmann::json::array();
  std::vector<double> ttft;
  for (size_t i = 0; i < n; ++i) {
    const RequestRecord& r = recs[i];
    output_tokens += static_cast<int64_t>(r.token_times.size());
    if (!r.token_times.empty()) ttft.push_back(seconds_between(r.submitted, r.token_times.front()));
    const bool ok = r.finish == runtime::FinishReason::kLength || r.finish == runtime::FinishReason::kStop;
    if (!ok) {
      ++failed;
      if (errors.size() < 5) errors.push_back(fmt_request_error(i, r));
      continue;
    }
    ++completed;
    completed_input += lens[i].input;
    if (static_cast<int32_t>(r.token_times.size()) != lens[i].output) {
      ++mismatched;
      if (errors.size() < 5) {
        errors.push_back("request " + std::to_string(i) + ": " + std::to_string(r.token_times.size()) +
                         " output tokens, expected " + std::to_string(lens[i].output));
      }
    }
  }
  const double s = seconds_between(t0, t1);
  nlohmann::json j = step_summary(samples, t0, o.max_fragmentation);
  const int64_t pool_blocks = j["kv_blocks_total"].get<int64_t>() > 0 ? j["kv_blocks_total"].get<int64_t>()
                                                                       : after.kv_blocks_total;
  j["kv_blocks_total"] = pool_blocks;
  j["num_prompts"] = o.num_prompts;
  j["input_range"] = {o.input.lo, o.input.hi};
  j["output_range"] = {o.output.lo, o.output.hi};
  j["length_dist"] = length_dist_name(o.dist);
  j["rate"] = o.rate;
  j["arrival_span_s"] = n > 0 ? arrival.back() : 0.0;  // when the last request was due
  j["block_size"] = block_size;
  j["input_tokens"] = input_tokens;
  j["output_tokens_requested"] = output_requested;
  j["output_tokens"] = output_tokens;
  j["demand_kv_tokens"] = demand_tokens;
  j["demand_blocks"] = demand_blocks;
  j["demand_over_pool"] = pool_blocks > 0 ? static_cast<double>(demand_blocks) / static_cast<double>(pool_blocks) : 0.0;
  j["completed"] = completed;
  j["failed"] = failed;
  j["output_len_mismatches"] = mismatched;
  j["errors"] = errors;
  j["preemptions"] = after.preemptions - before.preemptions;
  j["seconds"] = s;
  j["output_tok_per_s"] = s > 0 ? static_cast<double>(output_tokens) / s : 0.0;
  j["total_tok_per_s"] = s > 0 ? static_cast<double>(completed_input + output_tokens) / s : 0.0;
  j["requests_per_s"] = s > 0 ? static_cast<double>(completed) / s : 0.0;
  if (!ttft.empty()) {
    j["ttft_s"] = {{"median", median(ttft)}, {"p99", percentile(ttft, 99)},
                   {"max", *std::max_element(ttft.begin(), ttft.end())}};
  }
  j["pass"] = failed == 0 && mismatched == 0 && j["fragmentation"]["pass"].get<bool>();
  return j;
}

}  // namespace frugal::bench
