#include "bench/offline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "bench/stats.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "kv/kv_layout.h"
#include "model/arch.h"
#include "model/config.h"

namespace frugal::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// Per-request token arrival times, filled from the engine thread's callbacks.
struct Tracker {
  struct Req {
    Clock::time_point submitted;
    std::vector<Clock::time_point> token_times;
    runtime::FinishReason finish = runtime::FinishReason::kNone;
    std::string error;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Req> reqs;
  int done = 0;
};

// Submits all prompts at once and waits for every request to finish.
Result<std::vector<Tracker::Req>> run_requests(runtime::Engine& engine,
                                               const std::vector<std::vector<int32_t>>& prompts,
                                               int32_t max_tokens) {
  Tracker tr;
  tr.reqs.resize(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    runtime::GenerateRequest req;
    req.prompt = prompts[i];
    req.sampling.temperature = 0;
    req.sampling.max_tokens = max_tokens;
    req.sampling.ignore_eos = true;
    {
      std::lock_guard<std::mutex> lk(tr.mu);
      tr.reqs[i].submitted = Clock::now();
    }
    auto id = engine.submit(std::move(req), [&tr, i](const runtime::RequestOutput& out) {
      auto now = Clock::now();
      std::lock_guard<std::mutex> lk(tr.mu);
      auto& r = tr.reqs[i];
      for (size_t t = 0; t < out.tokens.size(); ++t) r.token_times.push_back(now);
      if (out.finish != runtime::FinishReason::kNone) {
        r.finish = out.finish;
        if (!out.error.is_ok()) r.error = out.error.to_string();
        ++tr.done;
        tr.cv.notify_all();
      }
    });
    if (!id.is_ok()) return id.status().with_context("bench: submitting request " + std::to_string(i));
  }
  std::unique_lock<std::mutex> lk(tr.mu);
  tr.cv.wait(lk, [&] { return tr.done == static_cast<int>(prompts.size()); });
  for (size_t i = 0; i < tr.reqs.size(); ++i) {
    if (tr.reqs[i].finish == runtime::FinishReason::kError)
      return internal_error("bench: request " + std::to_string(i) + " failed: " + tr.reqs[i].error);
  }
  return std::move(tr.reqs);
}

std::vector<std::vector<int32_t>> random_prompts(SplitMix64& rng, int n, int len, int32_t vocab) {
  std::vector<std::vector<int32_t>> ps(static_cast<size_t>(n));
  for (auto& p : ps) {
    p.resize(static_cast<size_t>(len));
    // Avoid the lowest ids (often special tokens); unique random prompts defeat prefix caching.
    for (auto& t : p) t = static_cast<int32_t>(3 + rng.next() % static_cast<uint64_t>(std::max(1, vocab - 3)));
  }
  return ps;
}

nlohmann::json estimate_json(const Estimate& e) {
  return {{"median", e.value}, {"ci95", {e.ci95.lo, e.ci95.hi}}};
}

// What one token costs: bytes of weights read per decode step (everything but an untied
// embedding table) and FLOPs per token of the linear layers.
struct ModelCost {
  int64_t step_weight_bytes = 0;
  int64_t linear_params = 0;  // params in matmuls (incl. lm_head)
  int64_t kv_bytes_per_token = 0;
  int64_t n_layers = 0;
  int64_t q_dim = 0;
  std::string name;
};

Result<ModelCost> model_cost(const runtime::EngineOptions& eo, DType kv_dtype) {
  std::string cfg_path = eo.model_dir;
  if (cfg_path.size() < 5 || cfg_path.substr(cfg_path.size() - 5) != ".json") cfg_path += "/config.json";
  FRUGAL_ASSIGN_OR_RETURN(model::ModelConfig c, model::load_model_config(cfg_path));
  ModelCost mc;
  mc.name = cfg_path;
  const auto specs = model::tensor_specs(c);
  const int64_t wbytes = dtype_bytes(c.torch_dtype, 1);
  for (const auto& s : specs) {
    bool tied_embedding = s.role == model::TensorRole::kEmbedding && c.tie_word_embeddings;
    if (s.role != model::TensorRole::kEmbedding || tied_embedding) mc.step_weight_bytes += s.shape.numel() * wbytes;
    if (s.role == model::TensorRole::kLinear || s.role == model::TensorRole::kLmHead || tied_embedding)
      mc.linear_params += s.shape.numel();
  }
  kv::KvGeometry g{.n_layers = static_cast<int32_t>(c.num_hidden_layers),
                   .n_head_kv = static_cast<int32_t>(c.num_key_value_heads),
                   .head_dim_k = static_cast<int32_t>(c.head_dim),
                   .dtype = kv_dtype,
                   .block_size = eo.block_size};
  mc.kv_bytes_per_token = kv::bytes_per_token(g);
  mc.n_layers = c.num_hidden_layers;
  mc.q_dim = c.num_attention_heads * c.head_dim;
  return mc;
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
    double s = seconds_since(t0, Clock::now());
    rates.push_back(2.0 * static_cast<double>(bytes) / s / 1e9);
  }
  return median(rates);
}

Result<nlohmann::json> run_offline(const OfflineOptions& o) {
  nlohmann::json j;
  auto t_start = Clock::now();
  FRUGAL_ASSIGN_OR_RETURN(auto engine, runtime::create_engine(o.engine));
  double startup_s = seconds_since(t_start, Clock::now());
  const DType kv_dtype = o.engine.device.rfind("cuda", 0) == 0 ? DType::kBF16 : DType::kF32;
  FRUGAL_ASSIGN_OR_RETURN(ModelCost mc, model_cost(o.engine, kv_dtype));
  const int32_t vocab = engine->vocab_size();
  SplitMix64 rng(o.seed);
  nlohmann::json results = nlohmann::json::array();

  // Prefill: one request of `len` tokens, max_tokens 1; time to its first token.
  nlohmann::json prefill = nlohmann::json::array();
  for (int32_t len : o.prefill_lens) {
    std::vector<double> tps;
    for (int r = 0; r < o.warmup + o.reps; ++r) {
      auto prompts = random_prompts(rng, 1, len, vocab);
      FRUGAL_ASSIGN_OR_RETURN(auto reqs, run_requests(*engine, prompts, 1));
      double t = seconds_since(reqs[0].submitted, reqs[0].token_times.at(0));
      if (r >= o.warmup) tps.push_back(len / t);
    }
    Estimate e = estimate(tps, Statistic::kMedian);
    double flops = 2.0 * static_cast<double>(mc.linear_params) * len + attention_flops(mc, len);
    double tflops = flops / (len / e.value) / 1e12;
    prefill.push_back({{"prompt_len", len}, {"tok_per_s", estimate_json(e)}, {"tflops", tflops},
                       {"tflops_fraction_of_ceiling", o.ceilings.tflops > 0 ? tflops / o.ceilings.tflops : 0.0}});
    results.push_back({{"kind", "prefill"}, {"prompt_len", len}, {"tok_per_s", e.value}});
  }
  j["prefill"] = prefill;

  // Decode: B requests decoding together; rate over the window where all B are decoding.
  nlohmann::json decode = nlohmann::json::array();
  for (int32_t b : o.batches) {
    std::vector<double> tps;
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
      double s = seconds_since(t0, t1);
      if (r >= o.warmup && s > 0 && n > 0) tps.push_back(static_cast<double>(n) / s);
    }
    if (tps.empty()) continue;
    Estimate e = estimate(tps, Statistic::kMedian);
    double steps_per_s = e.value / b;
    double avg_ctx = o.decode_prompt_len + o.decode_tokens / 2.0;
    double step_bytes = static_cast<double>(mc.step_weight_bytes) + b * avg_ctx * static_cast<double>(mc.kv_bytes_per_token);
    double gbps = step_bytes * steps_per_s / 1e9;
    decode.push_back({{"batch", b}, {"tok_per_s", estimate_json(e)}, {"step_ms", 1000.0 / steps_per_s},
                      {"bytes_per_step", step_bytes}, {"achieved_gbps", gbps},
                      {"bandwidth_fraction_of_ceiling", o.ceilings.mem_gbps > 0 ? gbps / o.ceilings.mem_gbps : 0.0},
                      {"roofline_tok_per_s", o.ceilings.mem_gbps > 0 ? o.ceilings.mem_gbps * 1e9 / step_bytes * b : 0.0}});
    results.push_back({{"kind", "decode"}, {"batch", b}, {"tok_per_s", e.value},
                       {"prompt_len", o.decode_prompt_len}, {"gen_len", o.decode_tokens}});
  }
  j["decode"] = decode;

  if (o.num_prompts > 0) {
    auto prompts = random_prompts(rng, o.num_prompts, o.input_len, vocab);
    auto t0 = Clock::now();
    FRUGAL_ASSIGN_OR_RETURN(auto reqs, run_requests(*engine, prompts, o.output_len));
    double s = seconds_since(t0, Clock::now());
    int64_t out_tokens = 0;
    for (auto& q : reqs) out_tokens += static_cast<int64_t>(q.token_times.size());
    double in_tokens = static_cast<double>(o.num_prompts) * o.input_len;
    j["throughput"] = {{"num_prompts", o.num_prompts}, {"input_len", o.input_len}, {"output_len", o.output_len},
                       {"seconds", s}, {"output_tok_per_s", out_tokens / s},
                       {"total_tok_per_s", (in_tokens + static_cast<double>(out_tokens)) / s},
                       {"requests_per_s", o.num_prompts / s}};
    results.push_back({{"kind", "throughput"}, {"input_len", o.input_len}, {"output_len", o.output_len},
                       {"output_tok_per_s", out_tokens / s}});
  }

  auto st = engine->stats();
  auto mem = engine->memory();
  j["memory"] = {{"weights_bytes", mem.weights_bytes}, {"kv_pool_bytes", mem.kv_pool_bytes},
                 {"workspace_bytes", mem.workspace_bytes}, {"graphs_bytes", mem.graphs_bytes}};
  j["engine_stats"] = {{"kv_fragmentation", st.kv_fragmentation}, {"preemptions", st.preemptions},
                       {"prefix_cache_hits", st.prefix_cache_hits}, {"steps", st.steps}};
  j["startup_s"] = startup_s;
  j["model"] = o.engine.model_dir;
  j["device"] = o.engine.device;
  j["gpu"] = o.gpu_name;
  j["precision"] = o.precision;
  j["gpus"] = 1;
  j["kv_dtype"] = dtype_name(kv_dtype);
  j["decode_prompt_len"] = o.decode_prompt_len;
  j["decode_tokens"] = o.decode_tokens;
  j["ceilings"] = {{"mem_gbps", o.ceilings.mem_gbps}, {"tflops", o.ceilings.tflops}, {"source", o.ceilings.source}};
  j["bytes_per_decode_step_weights"] = mc.step_weight_bytes;
  j["kv_bytes_per_token"] = mc.kv_bytes_per_token;
  j["results"] = results;
  engine->shutdown();
  return j;
}

namespace {
std::string fmt_est(const nlohmann::json& e) {
  return fmt::format("{:.1f} [{:.1f}, {:.1f}]", e["median"].get<double>(), e["ci95"][0].get<double>(),
                     e["ci95"][1].get<double>());
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
  if (j.contains("throughput")) {
    const auto& t = j["throughput"];
    os << fmt::format("throughput {} prompts {}/{}: {:.1f} output tok/s, {:.1f} total tok/s\n",
                      t["num_prompts"].get<int>(), t["input_len"].get<int>(), t["output_len"].get<int>(),
                      t["output_tok_per_s"].get<double>(), t["total_tok_per_s"].get<double>());
  }
  const auto& m = j["memory"];
  os << fmt::format("memory: weights {:.1f} MiB, KV pool {:.1f} MiB, workspace {:.1f} MiB, graphs {:.1f} MiB; KV fragmentation {:.2f}%\n",
                    m["weights_bytes"].get<double>() / 1048576, m["kv_pool_bytes"].get<double>() / 1048576,
                    m["workspace_bytes"].get<double>() / 1048576, m["graphs_bytes"].get<double>() / 1048576,
                    100 * j["engine_stats"]["kv_fragmentation"].get<double>());
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
  return os.str();
}

}  // namespace frugal::bench
