#include "bench/offline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "bench/kernel_trace.h"
#include "bench/model_cost.h"
#include "kv/kv_geometry.h"
#include "bench/request_log.h"
#include "bench/stats.h"
#include "bench/step_recorder.h"
#include "bench/workload.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace frugal::bench {
namespace {

// Submits all prompts at once (one engine step takes them all) and waits for every request to
// finish.
Result<std::vector<RequestRecord>> run_requests(runtime::Engine& engine,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                int32_t max_tokens) {
  RequestLog log(prompts.size());
  std::vector<runtime::GenerateRequest> batch(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    batch[i].prompt = prompts[i];
    batch[i].sampling.temperature = 0;
    batch[i].sampling.max_tokens = max_tokens;
    batch[i].sampling.ignore_eos = true;
  }
  if (Status st = log.submit_all(engine, std::move(batch)); !st.is_ok())
    return st.with_context("bench: submitting " + std::to_string(prompts.size()) + " requests");
  log.wait_all_finished();
  std::vector<RequestRecord> reqs = log.snapshot();
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].finish == runtime::FinishReason::kError)
      return internal_error("bench: request " + std::to_string(i) + " failed: " + reqs[i].error);
  }
  return reqs;
}

std::vector<std::vector<int32_t>> random_prompts(SplitMix64& rng, int n, int len, int32_t vocab) {
  std::vector<std::vector<int32_t>> ps(static_cast<size_t>(n));
  for (auto& p : ps) p = random_prompt(rng, len, vocab);
  return ps;
}

nlohmann::json estimate_json(const Estimate& e) {
  return {{"median", e.value}, {"ci95", {e.ci95.lo, e.ci95.hi}}};
}

// Latency samples (ms): {"n", "median": {"value", "ci95"}, "p99": {...}, "min", "max"}; the
// intervals are bootstrap CIs (stats.h).
nlohmann::json latency_json(const std::vector<double>& xs) {
  if (xs.empty()) return {{"n", 0}};
  const Summary s = summarize(xs);
  const auto e = [](const Estimate& x) { return nlohmann::json{{"value", x.value}, {"ci95", {x.ci95.lo, x.ci95.hi}}}; };
  return {{"n", s.n}, {"median", e(s.median)}, {"p99", e(s.p99)}, {"min", s.min}, {"max", s.max}};
}

// Attention FLOPs of prefilling `len` tokens (QK^T and PV, causal half).
double attention_flops(const ModelCost& mc, double len) {
  return 2.0 * 2.0 * static_cast<double>(mc.n_layers) * static_cast<double>(mc.q_dim) * len * len / 2.0;
}

}  // namespace

double measure_host_copy_gbps(int64_t bytes, int reps) {
  HostBuffer a(static_cast<size_t>(bytes)), b(static_cast<size_t>(bytes));
  std::memset(a.data(), 1, static_cast<size_t>(bytes));
  std::memset(b.data(), 2, static_cast<size_t>(bytes));
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), static_cast<size_t>(bytes));
    double s = seconds_between(t0, Clock::now());
    rates.push_back(2.0 * static_cast<double>(bytes) / s / 1e9);
  }
  return median(rates);
}

double measure_host_read_gbps(int64_t bytes, int reps) {
  HostBuffer a(static_cast<size_t>(bytes));
  std::memset(a.data(), 1, static_cast<size_t>(bytes));
  ThreadPool& pool = ThreadPool::global();
  const int64_t words = bytes / 8, chunk = 1 << 16;  // 512 KiB per task
  const auto* w = static_cast<const uint64_t*>(a.data());
  std::atomic<uint64_t> sink{0};
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    pool.parallel_for((words + chunk - 1) / chunk, 1, [&](int64_t c0, int64_t c1) {
      uint64_t acc[8] = {};
      const int64_t end = std::min(words, c1 * chunk);
      int64_t i = c0 * chunk;
      for (; i + 8 <= end; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += w[i + l];
      for (; i < end; ++i) acc[0] += w[i];
      uint64_t s = 0;
      for (uint64_t v : acc) s += v;
      sink.fetch_add(s, std::memory_order_relaxed);
    });
    double s = seconds_between(t0, Clock::now());
    rates.push_back(static_cast<double>(words * 8) / s / 1e9);
  }
  if (sink.load() == 42) rates.push_back(0);  // keeps the sums observable
  return median(rates);
}

namespace {

// Flag checks that need no engine; the message names the flag.
Status check_options(const OfflineOptions& o) {
  for (int32_t len : o.prefill_lens)
    if (len < 0) return invalid_argument("--prefill-lens: expected lengths >= 1 (0 skips), got " + std::to_string(len));
  for (int32_t b : o.batches)
    if (b < 0) return invalid_argument("--batches: expected batch sizes >= 1 (0 skips), got " + std::to_string(b));
  if (o.reps < 1) return invalid_argument("--reps: expected >= 1, got " + std::to_string(o.reps));
  if (o.warmup < 0) return invalid_argument("--warmup: expected >= 0, got " + std::to_string(o.warmup));
  if (o.num_prompts < 0) return invalid_argument("--num-prompts: expected >= 0");
  if (o.num_prompts > 0) {
    if (o.input_len < 1) return invalid_argument("--input-len: expected >= 1, got " + std::to_string(o.input_len));
    if (o.output_len < 1) return invalid_argument("--output-len: expected >= 1, got " + std::to_string(o.output_len));
    if (o.throughput_reps < 1) return invalid_argument("--throughput-reps: expected >= 1");
    // With chunked prefill any prompt is split under the step budget; without it, a prompt
    // (and, after a preemption, its outputs) must be computed in one step.
    const int64_t kv = int64_t{o.input_len} + o.output_len - 1;
    if (!o.engine.enable_chunked_prefill && kv > o.engine.max_num_batched_tokens) {
      return invalid_argument("--input-len + --output-len - 1 = " + std::to_string(kv) +
                              " exceeds --max-num-batched-tokens " + std::to_string(o.engine.max_num_batched_tokens) +
                              " with --no-chunked-prefill");
    }
  }
  return Status::ok();
}

// Checks that need the engine's context length: a request the engine would cut short or refuse.
Status check_lengths(const OfflineOptions& o, int32_t max_model_len) {
  const auto over = [&](int64_t n, const std::string& what) -> Status {
    if (n <= max_model_len) return Status::ok();
    return invalid_argument(what + " = " + std::to_string(n) + " tokens exceeds the model's context of " +
                            std::to_string(max_model_len) + " (--max-model-len)");
  };
  for (int32_t len : o.prefill_lens) FRUGAL_RETURN_IF_ERROR(over(int64_t{len} + 1, "--prefill-lens entry + 1"));
  if (std::any_of(o.batches.begin(), o.batches.end(), [](int32_t b) { return b > 0; })) {
    FRUGAL_RETURN_IF_ERROR(over(int64_t{o.decode_prompt_len} + o.decode_tokens, "--decode-prompt-len + --decode-tokens"));
  }
  if (o.num_prompts > 0) FRUGAL_RETURN_IF_ERROR(over(int64_t{o.input_len} + o.output_len, "--input-len + --output-len"));
  if (o.mixed.num_prompts > 0) FRUGAL_RETURN_IF_ERROR(check_mixed_load(o.mixed, max_model_len));
  FRUGAL_RETURN_IF_ERROR(check_itl_probe(o.itl, o.engine, max_model_len));
  return Status::ok();
}

nlohmann::json rate_json(std::span<const double> xs) {
  if (xs.size() < 2) return {{"median", xs.empty() ? 0.0 : xs[0]}, {"ci95", nullptr}};
  Estimate e = estimate(xs, Statistic::kMedian);
  return {{"median", e.value}, {"ci95", {e.ci95.lo, e.ci95.hi}}};
}

}  // namespace

Result<nlohmann::json> run_offline(const OfflineOptions& o) {
  FRUGAL_RETURN_IF_ERROR(check_options(o));
  // Range and shape checks before the (slow) model load; context checks once it is loaded.
  if (o.mixed.num_prompts > 0) FRUGAL_RETURN_IF_ERROR(check_mixed_load(o.mixed, std::numeric_limits<int32_t>::max()));
  FRUGAL_RETURN_IF_ERROR(check_itl_probe(o.itl, o.engine, std::numeric_limits<int32_t>::max()));
  nlohmann::json j;
  auto t_start = Clock::now();
  // Every executed step's stats go to the recorder (the mixed load and the ITL probe read them).
  auto recorder = std::make_shared<StepRecorder>();
  runtime::EngineOptions eo = o.engine;
  eo.step_observer = [recorder, outer = o.engine.step_observer](const runtime::EngineStats& s) {
    recorder->on_step(s);
    if (outer) outer(s);
  };
  FRUGAL_ASSIGN_OR_RETURN(auto engine, runtime::create_engine(eo));
  double startup_s = seconds_between(t_start, Clock::now());
  FRUGAL_RETURN_IF_ERROR(check_lengths(o, engine->max_model_len()));
  DType kv_dtype = o.engine.device.rfind("cuda", 0) == 0 ? DType::kBF16 : DType::kF32;
  if (o.engine.kv_cache_dtype != "auto") {
    FRUGAL_ASSIGN_OR_RETURN(kv_dtype, kv::parse_kv_dtype(o.engine.kv_cache_dtype));
  }
  FRUGAL_ASSIGN_OR_RETURN(ModelCost mc, model_cost(o.engine, kv_dtype));
  // A quantized checkpoint (one rank): the bytes of its formats as loaded.
  if (!o.engine.dummy_weights && o.engine.tensor_parallel_size <= 1) use_loaded_weight_bytes(mc, engine->memory().weights_by_role);
  const int32_t vocab = engine->vocab_size();
  SplitMix64 rng(o.seed);
  nlohmann::json results = nlohmann::json::array();

  // --kernel-trace: one more run of a point's requests, traced; its own prompts (trace_rng), so the
  // timed points see the same prompts with tracing on or off.
  SplitMix64 trace_rng(o.seed ^ 0x7ace7ace7ace7aceull);
  const auto traced_run = [&](const std::string& tag, int n, int32_t len, int32_t max_tokens) -> Result<nlohmann::json> {
    auto prompts = random_prompts(trace_rng, n, len, vocab);
    recorder->start();
    if (Status st = o.kernel_tracer->start(); !st.is_ok()) {
      recorder->stop();
      return st.with_context("--kernel-trace " + tag);
    }
    auto reqs = run_requests(*engine, prompts, max_tokens);
    auto recs = o.kernel_tracer->stop();
    const std::vector<StepSample> steps = recorder->stop();
    if (!reqs.is_ok()) return reqs.status();
    if (!recs.is_ok()) return recs.status().with_context("--kernel-trace " + tag);
    KernelTraceOptions ko;
    ko.engine_steps = static_cast<int64_t>(steps.size());
    auto a = analyze_kernel_trace(*recs, ko);
    if (!a.is_ok()) return a.status().with_context("--kernel-trace " + tag);
    if (!o.kernel_trace_dir.empty()) {
      const std::string path = o.kernel_trace_dir + "/" + tag + ".trace.json";
      std::ofstream f(path);
      f << chrome_trace(*recs, o.kernel_trace_steps).dump() << "\n";
      if (!f) return io_error("--kernel-trace: cannot write " + path);
      (*a)["file"] = path;
      const std::string svg = o.kernel_trace_dir + "/" + tag + ".svg";
      std::ofstream g(svg);
      g << kernel_trace_svg(tag, *recs, *a);
      if (!g) return io_error("--kernel-trace: cannot write " + svg);
      (*a)["svg"] = svg;
    }
    return a;
  };

  // Prefill: one request of `len` tokens, max_tokens 1; time to its first token.
  nlohmann::json prefill = nlohmann::json::array();
  for (int32_t len : o.prefill_lens) {
    if (len == 0) continue;
    std::vector<double> tps, ttft_ms;
    for (int r = 0; r < o.warmup + o.reps; ++r) {
      auto prompts = random_prompts(rng, 1, len, vocab);
      FRUGAL_ASSIGN_OR_RETURN(auto reqs, run_requests(*engine, prompts, 1));
      double t = seconds_between(reqs[0].submitted, reqs[0].token_times.at(0));
      if (r >= o.warmup) {
        tps.push_back(len / t);
        ttft_ms.push_back(1000.0 * t);
      }
    }
    Estimate e = estimate(tps, Statistic::kMedian);
    double flops = 2.0 * mc.active_linear_params() * len + attention_flops(mc, len);
    double tflops = flops / (len / e.value) / 1e12;
    prefill.push_back({{"prompt_len", len}, {"tok_per_s", estimate_json(e)}, {"ttft_ms", latency_json(ttft_ms)},
                       {"ttft_ms_samples", ttft_ms}, {"tflops", tflops},
                       {"tflops_fraction_of_ceiling", o.ceilings.tflops > 0 ? tflops / o.ceilings.tflops : 0.0}});
    if (o.kernel_tracer) {
      FRUGAL_ASSIGN_OR_RETURN(prefill.back()["kernel_trace"], traced_run(fmt::format("prefill_{}", len), 1, len, 1));
    }
    results.push_back({{"kind", "prefill"}, {"prompt_len", len}, {"tok_per_s", e.value}});
  }
  j["prefill"] = prefill;

  // Decode: B requests decoding together; rate over the window where all B are decoding.
  nlohmann::json decode = nlohmann::json::array();
  for (int32_t b : o.batches) {
    if (b == 0) continue;
    std::vector<double> tps, itl_ms;
    for (int r = 0; r < o.warmup + o.reps; ++r) {
      auto prompts = random_prompts(rng, b, o.decode_prompt_len, vocab);
      FRUGAL_ASSIGN_OR_RETURN(auto reqs, run_requests(*engine, prompts, o.decode_tokens));
      Clock::time_point t0 = reqs[0].token_times.front(), t1 = reqs[0].token_times.back();
      for (auto& q : reqs) {
        t0 = std::max(t0, q.token_times.front());
        t1 = std::min(t1, q.token_times.back());
      }
      int64_t n = 0;
      for (auto& q : reqs)
        for (auto& t : q.token_times) n += (t > t0 && t <= t1) ? 1 : 0;
      double s = seconds_between(t0, t1);
      if (r >= o.warmup && s > 0 && n > 0) tps.push_back(static_cast<double>(n) / s);
      if (r >= o.warmup) {
        // Inter-token latency: gaps between consecutive tokens of each request.
        for (auto& q : reqs) {
          for (size_t i = 1; i < q.token_times.size(); ++i) {
            itl_ms.push_back(1000.0 * seconds_between(q.token_times[i - 1], q.token_times[i]));
          }
        }
      }
    }
    if (tps.empty()) continue;
    Estimate e = estimate(tps, Statistic::kMedian);
    double steps_per_s = e.value / b;
    double avg_ctx = o.decode_prompt_len + o.decode_tokens / 2.0;
    double step_bytes = mc.step_bytes_at_batch(b) + b * avg_ctx * static_cast<double>(mc.kv_bytes_per_token);
    double gbps = step_bytes * steps_per_s / 1e9;
    nlohmann::json cdf = nlohmann::json::array();  // ITL percentiles 0, 5, ..., 100
    for (int q = 0; q <= 100; q += 5) cdf.push_back(percentile(itl_ms, q));
    decode.push_back({{"batch", b}, {"tok_per_s", estimate_json(e)}, {"step_ms", 1000.0 / steps_per_s},
                      {"itl_ms", latency_json(itl_ms)}, {"itl_ms_cdf", cdf},
                      {"bytes_per_step", step_bytes}, {"achieved_gbps", gbps},
                      {"bandwidth_fraction_of_ceiling", o.ceilings.mem_gbps > 0 ? gbps / o.ceilings.mem_gbps : 0.0},
                      {"roofline_tok_per_s", o.ceilings.mem_gbps > 0 ? o.ceilings.mem_gbps * 1e9 / step_bytes * b : 0.0}});
    if (o.kernel_tracer) {
      FRUGAL_ASSIGN_OR_RETURN(decode.back()["kernel_trace"],
                              traced_run(fmt::format("decode_b{}", b), b, o.decode_prompt_len, o.decode_tokens));
      // The timed step against the traced kernels: what the untraced step spends outside them
      // (host work between steps). The traced gap between steps also holds CUPTI's own cost.
      nlohmann::json& kt = decode.back()["kernel_trace"];
      const double timed_us = 1e6 / steps_per_s;
      kt["timed_step_us"] = timed_us;
      kt["timed_outside_kernels_us"] = std::max(0.0, timed_us - kt["kernel_us"].get<double>());
    }
    results.push_back({{"kind", "decode"}, {"batch", b}, {"tok_per_s", e.value},
                       {"prompt_len", o.decode_prompt_len}, {"gen_len", o.decode_tokens}});
  }
  j["decode"] = decode;

  // Throughput: num_prompts requests submitted at once, timed from the first submit to the
  // last finish; input tokens count as processed (prefix caching cannot help random prompts).
  if (o.num_prompts > 0) {
    std::vector<double> out_rate, total_rate, req_rate, secs;
    for (int r = 0; r < o.throughput_reps; ++r) {
      auto prompts = random_prompts(rng, o.num_prompts, o.input_len, vocab);
      auto t0 = Clock::now();
      FRUGAL_ASSIGN_OR_RETURN(auto reqs, run_requests(*engine, prompts, o.output_len));
      double s = seconds_between(t0, Clock::now());
      int64_t out_tokens = 0;
      for (auto& q : reqs) out_tokens += static_cast<int64_t>(q.token_times.size());
      double in_tokens = static_cast<double>(o.num_prompts) * o.input_len;
      secs.push_back(s);
      out_rate.push_back(static_cast<double>(out_tokens) / s);
      total_rate.push_back((in_tokens + static_cast<double>(out_tokens)) / s);
      req_rate.push_back(o.num_prompts / s);
    }
    // Scalars are medians over the repetitions (what older readers of this JSON expect); the
    // *_est objects add the 95% bootstrap CI when there are at least two repetitions.
    j["throughput"] = {{"num_prompts", o.num_prompts}, {"input_len", o.input_len}, {"output_len", o.output_len},
                       {"reps", o.throughput_reps}, {"seconds", median(secs)},
                       {"output_tok_per_s", median(out_rate)}, {"total_tok_per_s", median(total_rate)},
                       {"requests_per_s", median(req_rate)}, {"output_tok_per_s_est", rate_json(out_rate)},
                       {"total_tok_per_s_est", rate_json(total_rate)}, {"output_tok_per_s_reps", out_rate},
                       {"total_tok_per_s_reps", total_rate}};
    results.push_back({{"kind", "throughput"}, {"input_len", o.input_len}, {"output_len", o.output_len},
                       {"output_tok_per_s", median(out_rate)}});
  }

  if (o.mixed.num_prompts > 0) {
    FRUGAL_ASSIGN_OR_RETURN(j["mixed"], run_mixed_load(*engine, *recorder, o.mixed, o.engine.block_size, rng));
  }
  if (o.itl.batch > 0) {
    FRUGAL_ASSIGN_OR_RETURN(j["itl_probe"], run_itl_probe(*engine, *recorder, o.itl, o.engine, rng));
  }

  auto st = engine->stats();
  auto mem = engine->memory();
  j["memory"] = {{"weights_bytes", mem.weights_bytes}, {"kv_pool_bytes", mem.kv_pool_bytes},
                 {"workspace_bytes", mem.workspace_bytes}, {"graphs_bytes", mem.graphs_bytes}};
  j["engine_stats"] = {{"kv_fragmentation", st.kv_fragmentation}, {"preemptions", st.preemptions},
                       {"prefix_cache_hits", st.prefix_cache_hits}, {"steps", st.steps},
                       {"kv_blocks_total", st.kv_blocks_total}, {"graph_steps", st.graph_steps},
                       {"schedule_s", st.schedule_s}, {"forward_s", st.forward_s}, {"prepare_s", st.prepare_s},
                       {"output_s", st.output_s}, {"decode_steps", st.decode_steps},
                       {"decode_step_tokens", st.decode_step_tokens}, {"decode_forward_s", st.decode_forward_s}};
  j["startup_s"] = startup_s;
  j["model"] = o.engine.model_dir;
  j["device"] = o.engine.device;
  j["gpu"] = o.gpu_name;
  j["precision"] = o.precision;
  j["lm_head"] = o.engine.lm_head_precision;
  {
    nlohmann::json roles = nlohmann::json::array();
    for (const auto& r : mem.weights_by_role)
      roles.push_back({{"role", r.role}, {"format", r.format}, {"tensors", r.n_tensors}, {"bytes", r.bytes}});
    j["memory"]["weights_by_role"] = roles;
  }
  j["gpus"] = 1;
  j["kv_dtype"] = dtype_name(kv_dtype);
  j["kv_bytes_per_token"] = mem.kv_bytes_per_token;
  j["kv_capacity_tokens"] = mem.kv_capacity_tokens;
  j["decode_prompt_len"] = o.decode_prompt_len;
  j["decode_tokens"] = o.decode_tokens;
  j["seed"] = o.seed;
  j["reps"] = o.reps;
  j["warmup"] = o.warmup;
  j["engine"] = {{"max_num_seqs", o.engine.max_num_seqs}, {"max_num_batched_tokens", o.engine.max_num_batched_tokens},
                 {"max_model_len", engine->max_model_len()}, {"block_size", o.engine.block_size},
                 {"num_kv_blocks", st.kv_blocks_total}, {"enable_chunked_prefill", o.engine.enable_chunked_prefill},
                 {"max_prefill_chunk_tokens", o.engine.max_prefill_chunk_tokens},
                 {"enable_prefix_caching", o.engine.enable_prefix_caching}};
  j["ceilings"] = {{"mem_gbps", o.ceilings.mem_gbps}, {"tflops", o.ceilings.tflops}, {"source", o.ceilings.source}};
  j["bytes_per_decode_step_weights"] = mc.step_weight_bytes;
  j["kv_bytes_per_token"] = mc.kv_bytes_per_token;
  j["results"] = results;
  engine->shutdown();
  return j;
}

namespace {
std::string fmt_est(const nlohmann::json& e) {
  if (e["ci95"].is_null()) return fmt::format("{:.1f}", e["median"].get<double>());
  return fmt::format("{:.1f} [{:.1f}, {:.1f}]", e["median"].get<double>(), e["ci95"][0].get<double>(),
                     e["ci95"][1].get<double>());
}

const char* verdict(const nlohmann::json& x) { return x["pass"].get<bool>() ? "PASS" : "FAIL"; }

std::string fmt_throughput(const nlohmann::json& t) {
  return fmt::format("{} prompts {}/{}, {} rep(s): {} output tok/s, {} total tok/s",
                     t["num_prompts"].get<int>(), t["input_len"].get<int>(), t["output_len"].get<int>(),
                     t["reps"].get<int>(), fmt_est(t["output_tok_per_s_est"]), fmt_est(t["total_tok_per_s_est"]));
}

std::string fmt_mixed(const nlohmann::json& m) {
  const auto& f = m["fragmentation"];
  return fmt::format(
      "{} prompts, in {}-{} out {}-{} ({}), pool {} blocks (demand {:.2f}x): completed {}, failed {}, "
      "length mismatches {}; preemptions {}, max waiting {}; KV peak {:.1f}%, mean {:.1f}%; fragmentation "
      "max {:.2f}%, while waiting {:.2f}%, mean {:.2f}% (checked {:.2f}% <= {:.1f}%); {:.1f} output tok/s, "
      "{:.1f} total tok/s: {}",
      m["num_prompts"].get<int>(), m["input_range"][0].get<int>(), m["input_range"][1].get<int>(),
      m["output_range"][0].get<int>(), m["output_range"][1].get<int>(), m["length_dist"].get<std::string>(),
      m["kv_blocks_total"].get<int64_t>(), m["demand_over_pool"].get<double>(), m["completed"].get<int64_t>(),
      m["failed"].get<int64_t>(), m["output_len_mismatches"].get<int64_t>(), m["preemptions"].get<int64_t>(),
      m["max_waiting"].get<int64_t>(), 100 * m["kv_used_peak_fraction"].get<double>(),
      100 * m["kv_used_mean_fraction"].get<double>(), 100 * f["max"].get<double>(),
      100 * f["max_while_waiting"].get<double>(), 100 * f["time_weighted_mean"].get<double>(),
      100 * f["checked"].get<double>(), 100 * f["threshold"].get<double>(), m["output_tok_per_s"].get<double>(),
      m["total_tok_per_s"].get<double>(), verdict(m));
}

std::string fmt_itl(const nlohmann::json& p) {
  const auto& b = p["itl_before_ms"];
  const auto& d = p["itl_during_ms"];
  const auto& a = p["itl_after_ms"];
  return fmt::format(
      "{} decoding + one {}-token prompt (chunk {}): ITL before {:.2f} ms; during median {:.2f} / p90 {:.2f} / "
      "max {:.2f} ms = x{:.2f} [{:.2f}, {:.2f}] / x{:.2f} / x{:.2f}; after {:.2f} ms; long prefill {:.3f} s in {} steps; "
      "preemptions {}: {} (median x{:.2f} <= {:.1f}; max: {})",
      p["batch"].get<int>(), p["long_prompt"].get<int>(), p["chunk_tokens_effective"].get<int>(),
      b["median"].get<double>(), d["median"].get<double>(), d["p90"].get<double>(), d["max"].get<double>(),
      p["ratio_median"].get<double>(), p["ratio_median_ci95"][0].get<double>(), p["ratio_median_ci95"][1].get<double>(),
      p["ratio_p90"].get<double>(), p["ratio_max"].get<double>(),
      a.contains("median") ? a["median"].get<double>() : 0.0, p["long_prefill_s"].get<double>(),
      p["prefill_steps"].get<int64_t>(), p["preemptions"].get<int64_t>(), verdict(p), p["ratio_median"].get<double>(),
      p["max_ratio"].get<double>(), p["pass_strict"].get<bool>() ? "PASS" : "FAIL");
}
}  // namespace

std::string format_offline_table(const nlohmann::json& j) {
  std::ostringstream os;
  os << fmt::format("model {}  device {}  startup {:.2f} s\n", j["model"].get<std::string>(),
                    j["device"].get<std::string>(), j["startup_s"].get<double>());
  os << fmt::format("ceilings: {:.0f} GB/s, {:.1f} TFLOP/s ({})\n", j["ceilings"]["mem_gbps"].get<double>(),
                    j["ceilings"]["tflops"].get<double>(), j["ceilings"]["source"].get<std::string>());
  os << fmt::format("{:<10} {:>8} {:>32} {:>12} {:>10}\n", "bench", "size", "tok/s median [95% CI]", "achieved", "of ceiling");
  for (const auto& p : j["prefill"])
    os << fmt::format("{:<10} {:>8} {:>32} {:>7.2f} TF/s {:>9.1f}%\n", "prefill", p["prompt_len"].get<int>(),
                      fmt_est(p["tok_per_s"]), p["tflops"].get<double>(),
                      100 * p["tflops_fraction_of_ceiling"].get<double>());
  for (const auto& d : j["decode"])
    os << fmt::format("{:<10} {:>8} {:>32} {:>7.1f} GB/s {:>9.1f}%\n", "decode", fmt::format("b={}", d["batch"].get<int>()),
                      fmt_est(d["tok_per_s"]), d["achieved_gbps"].get<double>(),
                      100 * d["bandwidth_fraction_of_ceiling"].get<double>());
  if (j.contains("throughput")) os << "throughput " << fmt_throughput(j["throughput"]) << "\n";
  if (j.contains("mixed")) os << "mixed      " << fmt_mixed(j["mixed"]) << "\n";
  if (j.contains("itl_probe")) os << "itl probe  " << fmt_itl(j["itl_probe"]) << "\n";
  const auto& m = j["memory"];
  os << fmt::format("memory: weights {:.1f} MiB, KV pool {:.1f} MiB, workspace {:.1f} MiB, graphs {:.1f} MiB; KV fragmentation {:.2f}%\n",
                    m["weights_bytes"].get<double>() / 1048576, m["kv_pool_bytes"].get<double>() / 1048576,
                    m["workspace_bytes"].get<double>() / 1048576, m["graphs_bytes"].get<double>() / 1048576,
                    100 * j["engine_stats"]["kv_fragmentation"].get<double>());
  for (const auto& p : j["prefill"])
    if (p.contains("kernel_trace"))
      os << format_kernel_trace(fmt::format("prefill {}", p["prompt_len"].get<int>()), p["kernel_trace"], 15);
  for (const auto& d : j["decode"])
    if (d.contains("kernel_trace")) {
      // The timed step next to the traced one (format_kernel_trace adds what lies outside the kernels).
      os << format_kernel_trace(fmt::format("decode b={} (timed step {:.1f} us)", d["batch"].get<int>(),
                                            1000.0 * d["step_ms"].get<double>()),
                                d["kernel_trace"], 15);
    }
  const auto& es = j["engine_stats"];
  if (es.contains("schedule_s") && es["steps"].get<int64_t>() > 0) {
    const double us = 1e6 / es["steps"].get<double>();
    os << fmt::format("engine: {} steps ({} from graphs); per step: schedule {:.0f} us, forward {:.0f} us (inputs {:.0f} us), "
                      "outputs {:.0f} us\n",
                      es["steps"].get<int64_t>(), es["graph_steps"].get<int64_t>(), es["schedule_s"].get<double>() * us,
                      es["forward_s"].get<double>() * us, es["prepare_s"].get<double>() * us, es["output_s"].get<double>() * us);
    // The model call split by step kind: where a throughput run's time goes (decode steps of a
    // large batch against prefill and mixed steps).
    const int64_t steps = es["steps"].get<int64_t>(), dsteps = es.value("decode_steps", int64_t{0});
    if (dsteps > 0) {
      const int64_t others = steps - dsteps;
      const double dfwd = es["decode_forward_s"].get<double>(), rest = std::max(0.0, es["forward_s"].get<double>() - dfwd);
      os << fmt::format("engine forward: {} decode steps (mean batch {:.1f}) {:.3f} s, {:.0f} us each; {} prefill or mixed "
                        "steps {:.3f} s",
                        dsteps, es["decode_step_tokens"].get<double>() / static_cast<double>(dsteps), dfwd,
                        1e6 * dfwd / static_cast<double>(dsteps), others, rest);
      if (others > 0) os << fmt::format(", {:.0f} us each", 1e6 * rest / static_cast<double>(others));
      os << "\n";
    }
  }
  return os.str();
}

std::string format_offline_markdown(const nlohmann::json& j) {
  std::ostringstream os;
  os << "| bench | size | tok/s median [95% CI] | achieved | of ceiling |\n|---|---|---|---|---|\n";
  for (const auto& p : j["prefill"])
    os << fmt::format("| prefill | {} | {} | {:.2f} TFLOP/s | {:.1f}% |\n", p["prompt_len"].get<int>(), fmt_est(p["tok_per_s"]),
                      p["tflops"].get<double>(), 100 * p["tflops_fraction_of_ceiling"].get<double>());
  for (const auto& d : j["decode"])
    os << fmt::format("| decode | batch {} | {} | {:.1f} GB/s | {:.1f}% |\n", d["batch"].get<int>(), fmt_est(d["tok_per_s"]),
                      d["achieved_gbps"].get<double>(), 100 * d["bandwidth_fraction_of_ceiling"].get<double>());
  if (j.contains("throughput")) {
    const auto& t = j["throughput"];
    os << fmt::format("| throughput (output) | {} x {}/{} | {} | - | - |\n", t["num_prompts"].get<int>(),
                      t["input_len"].get<int>(), t["output_len"].get<int>(), fmt_est(t["output_tok_per_s_est"]));
    os << fmt::format("| throughput (input + output) | {} x {}/{} | {} | - | - |\n", t["num_prompts"].get<int>(),
                      t["input_len"].get<int>(), t["output_len"].get<int>(), fmt_est(t["total_tok_per_s_est"]));
  }
  if (j.contains("mixed")) os << "\n**mixed load**: " << fmt_mixed(j["mixed"]) << "\n";
  if (j.contains("itl_probe")) os << "\n**ITL probe**: " << fmt_itl(j["itl_probe"]) << "\n";
  return os.str();
}

}  // namespace frugal::bench
