// `frugal bench offline`: in-process engine benchmarks (src/bench/offline.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/offline.h"
#include "bench/telemetry.h"
#include "core/thread_pool.h"
#include "cli/commands.h"
#ifdef FRUGAL_WITH_CUDA
#include "backend/cuda/kernel_tracer.h"
#endif

namespace frugal::cli {
namespace {

struct BenchOfflineArgs {
  std::string model;
  std::string dummy_config;
  bench::OfflineOptions o;
  std::string json_path, markdown_path;
  bool measure_ceilings = false;
  double ceiling_gbps = 0, ceiling_tflops = 0;
  ParallelArgs parallel;
};

// --kernel-trace DIR: the CUPTI tracer of the CUDA backend, and DIR made.
Status setup_kernel_trace(bench::OfflineOptions& o) {
  if (o.engine.device.rfind("cuda", 0) != 0) {
    return invalid_argument("--kernel-trace traces GPU kernels: it needs --device cuda (got --device " + o.engine.device + ")");
  }
#ifdef FRUGAL_WITH_CUDA
  auto t = cuda::make_kernel_tracer();
  if (!t.is_ok()) return t.status();
  o.kernel_tracer = std::shared_ptr<KernelTracer>(std::move(*t));
#else
  return unsupported("--kernel-trace: this frugal was built without CUDA (configure with -DFRUGAL_CUDA=ON)");
#endif
  std::error_code ec;
  std::filesystem::create_directories(o.kernel_trace_dir, ec);
  if (ec) return io_error("--kernel-trace: cannot create " + o.kernel_trace_dir + ": " + ec.message());
  return Status::ok();
}

int run_bench_offline(BenchOfflineArgs& a) {
  auto& o = a.o;
  if (!o.kernel_trace_dir.empty() && a.parallel.tensor_parallel_size > 1) {
    std::fprintf(stderr, "frugal bench: --kernel-trace traces one process's GPU; it does not take --tensor-parallel-size %d\n",
                 a.parallel.tensor_parallel_size);
    return 2;
  }
  // Tensor parallel: this process starts the ranks and waits, or is one of them.
  Result<std::optional<int>> launched = start_ranks(a.parallel, o.engine.device, &o.engine.rank_env);
  if (!launched.is_ok()) {
    std::fprintf(stderr, "frugal bench: %s\n", launched.status().to_string().c_str());
    return 2;
  }
  if (launched->has_value()) return **launched;
  o.engine.tensor_parallel_size = a.parallel.tensor_parallel_size;
  if (!a.dummy_config.empty()) {
    o.engine.model_dir = a.dummy_config;
    o.engine.dummy_weights = true;
    o.engine.weight_precision = o.precision;
  } else {
    o.engine.model_dir = a.model.empty() ? default_model_dir() : a.model;
  }
  if (a.ceiling_gbps > 0 || a.ceiling_tflops > 0) {
    o.ceilings = {a.ceiling_gbps, a.ceiling_tflops, "given on the command line"};
  } else if (o.engine.device == "cpu" || a.measure_ceilings) {
    // Host read bandwidth (all threads streaming a 1 GiB buffer) is cheap to measure; GPU
    // ceilings come from scripts/gpu (docs/perf).
    o.ceilings.mem_gbps = bench::measure_host_read_gbps(1ll << 30, 5);
    o.ceilings.source = "measured host streaming read (" + std::to_string(ThreadPool::global().size()) + " threads, 1 GiB)";
  }
  if (!o.kernel_trace_dir.empty()) {
    if (Status st = setup_kernel_trace(o); !st.is_ok()) {
      std::fprintf(stderr, "frugal bench: %s\n", st.to_string().c_str());
      return 2;
    }
  }
  auto telemetry = bench::TelemetrySampler::with_nvml();
  telemetry->start();
  auto r = bench::run_offline(o);
  telemetry->stop();
  if (r.is_ok()) (*r)["telemetry"] = telemetry->summary();
  if (!r.is_ok()) {
    std::fprintf(stderr, "frugal bench: %s\n", r.status().to_string().c_str());
    return 1;
  }
  std::fputs(bench::format_offline_table(*r).c_str(), stdout);
  if (!a.json_path.empty()) {
    std::ofstream(a.json_path) << r->dump(2) << "\n";
  }
  if (!a.markdown_path.empty()) {
    std::ofstream(a.markdown_path) << bench::format_offline_markdown(*r);
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmark the engine (offline) or any OpenAI server (serve)");
  bench->require_subcommand(1);
  auto a = std::make_shared<BenchOfflineArgs>();
  auto* off = bench->add_subcommand("offline", "In-process prefill / decode / throughput benchmarks");
  off->add_option("--model", a->model, "HF model directory (default: the embedded model)");
  off->add_option("--dummy-weights", a->dummy_config, "config.json: random weights of this architecture");
  off->add_option("--precision", a->o.precision,
                  "dummy weights' linears: bf16 | int8 | int4 | fp8 | fp8-channel | nf4 (a checkpoint's own format otherwise)")
      ->capture_default_str();
  off->add_option("--lm-head", a->o.engine.lm_head_precision,
                  "dummy weights' untied lm_head: bf16 | int8 (per channel; a checkpoint's own format otherwise)")
      ->capture_default_str();
  off->add_option("--device", a->o.engine.device, "cpu | cuda | cuda:N")->capture_default_str();
  off->add_option("--threads", a->o.engine.threads, "CPU threads (0 = all)");
  off->add_option("--prefill-lens", a->o.prefill_lens, "prompt lengths for prefill")->delimiter(',');
  off->add_option("--batches", a->o.batches, "decode batch sizes")->delimiter(',');
  off->add_option("--decode-prompt-len", a->o.decode_prompt_len)->capture_default_str();
  off->add_option("--decode-tokens", a->o.decode_tokens)->capture_default_str();
  off->add_option("--reps", a->o.reps, "timed repetitions per point")->capture_default_str();
  off->add_option("--warmup", a->o.warmup)->capture_default_str();
  off->add_option("--num-prompts", a->o.num_prompts, "throughput run: prompts submitted at once");
  off->add_option("--input-len", a->o.input_len)->capture_default_str();
  off->add_option("--output-len", a->o.output_len)->capture_default_str();
  off->add_option("--max-num-seqs", a->o.engine.max_num_seqs)->capture_default_str();
  off->add_option("--max-num-batched-tokens", a->o.engine.max_num_batched_tokens)->capture_default_str();
  off->add_option("--num-kv-blocks", a->o.engine.num_kv_blocks);
  off->add_option("--kv-cache-dtype,--kv-dtype", a->o.engine.kv_cache_dtype,
                  "KV cache dtype: auto (activation dtype), bf16, fp8 (e4m3) or int8")->capture_default_str();
  off->add_option("--kv-window", a->o.engine.kv_window, "attend to the last W positions only (0 = off)");
  off->add_option("--kv-sinks", a->o.engine.kv_sinks, "with --kv-window: also attend to the first S positions");
  off->add_option("--gpu-memory-utilization", a->o.engine.gpu_memory_utilization)->capture_default_str();
  off->add_option("--throughput-reps", a->o.throughput_reps, "timed repetitions of the throughput run")
      ->capture_default_str();
  off->add_option("--max-model-len", a->o.engine.max_model_len, "context cap (0 = the model's)");
  off->add_option("--max-prefill-chunk-tokens", a->o.engine.max_prefill_chunk_tokens,
                  "cap on one sequence's prefill chunk per step (0 = only the step budget)")
      ->capture_default_str();
  off->add_option("--long-prefill-token-threshold", a->o.engine.long_prefill_token_threshold,
                  "prompts longer than this are prefilled in small chunks while others decode")
      ->capture_default_str();
  off->add_option("--long-prefill-chunk-tokens", a->o.engine.long_prefill_chunk_tokens,
                  "their chunk per step next to decodes (0 = off)")
      ->capture_default_str();
  off->add_flag_function("--no-chunked-prefill", [a](int64_t) { a->o.engine.enable_chunked_prefill = false; },
                         "a prompt is computed in one step or waits");
  off->add_flag_function("--no-prefix-caching", [a](int64_t) { a->o.engine.enable_prefix_caching = false; });
  // Mixed-length load (issue 5, acceptance 4; docs/bench_offline.md).
  off->add_option("--mixed-prompts", a->o.mixed.num_prompts, "mixed load: requests submitted (0 = skip)");
  off->add_option_function<std::vector<int32_t>>(
         "--mixed-input-range", [a](const std::vector<int32_t>& v) { a->o.mixed.input = {.lo = v.at(0), .hi = v.at(1)}; },
         "mixed load: prompt lengths MIN,MAX (default 16,4096)")
      ->delimiter(',')
      ->expected(2);
  off->add_option_function<std::vector<int32_t>>(
         "--mixed-output-range", [a](const std::vector<int32_t>& v) { a->o.mixed.output = {.lo = v.at(0), .hi = v.at(1)}; },
         "mixed load: output lengths MIN,MAX (default 1,1024), enforced with ignore_eos")
      ->delimiter(',')
      ->expected(2);
  off->add_option_function<std::string>(
      "--mixed-dist",
      [a](const std::string& name) {
        auto d = bench::parse_length_dist(name);
        if (!d.is_ok()) throw CLI::ValidationError("--mixed-dist", d.status().to_string());
        a->o.mixed.dist = *d;
      },
      "mixed load: uniform (default) | log-uniform");
  off->add_option("--mixed-rate", a->o.mixed.rate, "mixed load: requests/s, Poisson (0 = all at once)");
  off->add_option("--mixed-max-fragmentation", a->o.mixed.max_fragmentation, "mixed load: pass threshold")
      ->capture_default_str();
  // Inter-token latency around a long prefill (issue 5, acceptance 5).
  off->add_option("--itl-probe", a->o.itl.batch, "ITL probe: decoding sequences (0 = skip)");
  off->add_option("--itl-prompt-len", a->o.itl.prompt_len, "ITL probe: the decoders' prompt length")
      ->capture_default_str();
  off->add_option("--itl-long-prompt", a->o.itl.long_prompt, "ITL probe: the long prompt")->capture_default_str();
  off->add_option("--itl-window", a->o.itl.window, "ITL probe: samples per decoder before / after")
      ->capture_default_str();
  off->add_option("--itl-warmup-tokens", a->o.itl.warmup_tokens)->capture_default_str();
  off->add_option("--itl-max-ratio", a->o.itl.max_ratio, "ITL probe: pass threshold")->capture_default_str();
  off->add_option("--seed", a->o.seed)->capture_default_str();
  off->add_option("--gpu", a->o.gpu_name, "GPU catalog name (for cost and calibration)");
  off->add_option("--ceiling-gbps", a->ceiling_gbps, "memory bandwidth ceiling, GB/s");
  off->add_option("--ceiling-tflops", a->ceiling_tflops, "matrix rate ceiling, TFLOP/s");
  off->add_flag("--measure-ceilings", a->measure_ceilings, "measure the copy bandwidth first");
  off->add_option("--json", a->json_path, "write every figure as JSON");
  off->add_option("--markdown", a->markdown_path, "write a markdown table");
  off->add_option("--kernel-trace", a->o.kernel_trace_dir,
                  "CUDA: one more run of each prefill and decode point traced kernel by kernel (CUPTI): where a step's "
                  "time goes, the gaps between kernels, and a Chrome trace per point in this directory");
  off->add_option("--kernel-trace-steps", a->o.kernel_trace_steps, "graph replays in each Chrome trace file")
      ->capture_default_str();
  add_parallel_flags(off, a->parallel);
  off->callback([a] { set_exit_code(run_bench_offline(*a)); });
  register_bench_serve(*bench);
}

}  // namespace frugal::cli
