// `frugal bench offline`: in-process engine benchmarks (prefill, decode by batch size,
// throughput over many prompts), each repeated and reported as a median with a 95% CI,
// with achieved bandwidth / FLOP rate against the device's ceilings; plus two checks of the
// batching engine: a mixed-length load against a small KV pool (mixed_load.h) and an
// inter-token-latency probe around a long prefill (itl_probe.h). docs/bench_offline.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/itl_probe.h"
#include "bench/mixed_load.h"
#include "core/kernel_trace.h"
#include "core/status.h"
#include "runtime/engine.h"

namespace frugal::bench {

struct Ceilings {
  double mem_gbps = 0;   // measured copy bandwidth (bytes read + written), GB/s
  double tflops = 0;     // dense matrix rate in the activation dtype, TFLOP/s
  std::string source;    // "measured" or where the numbers came from
};

struct OfflineOptions {
  runtime::EngineOptions engine;
  std::vector<int32_t> prefill_lens{128, 2048};  // a 0 entry is skipped (so "0" skips the run)
  int32_t decode_prompt_len = 128;
  int32_t decode_tokens = 256;
  std::vector<int32_t> batches{1};  // a 0 entry is skipped
  int32_t reps = 5;
  int32_t warmup = 1;
  // Throughput run: num_prompts prompts submitted at once (0 = skip).
  int32_t num_prompts = 0;
  int32_t input_len = 128;
  int32_t output_len = 128;
  int32_t throughput_reps = 1;  // timed repetitions of the throughput run (CIs when > 1)
  MixedLoadOptions mixed;
  ItlProbeOptions itl;
  uint64_t seed = 1;
  Ceilings ceilings;
  std::string gpu_name;      // for cost and the calibration schema
  std::string precision = "bf16";
  // --kernel-trace: one more repetition of every prefill and decode point, traced kernel by kernel
  // (bench/kernel_trace.h), not counted in the timed figures; the accounting goes into the point's
  // JSON as "kernel_trace", and a Chrome trace of it into kernel_trace_dir ("" = none).
  std::shared_ptr<KernelTracer> kernel_tracer;
  std::string kernel_trace_dir;
  int32_t kernel_trace_steps = 8;  // graph launches in each Chrome trace file
};

// Runs every configured benchmark; the JSON holds every figure plus the exact configuration,
// and a "results" list in the schema `frugal plan --calibrate` reads (docs/plan.md).
Result<nlohmann::json> run_offline(const OfflineOptions& opts);

// Terminal table and markdown rendering of run_offline's JSON.
std::string format_offline_table(const nlohmann::json& j);
std::string format_offline_markdown(const nlohmann::json& j);

// Measures host memory copy bandwidth (GB/s, bytes read + written) over a buffer of `bytes`.
double measure_host_copy_gbps(int64_t bytes, int reps);
// Host read bandwidth (GB/s): every pool thread sums its contiguous slice of a `bytes` buffer
// with 64-bit integer adds (the stream a decode step's weight reads are), median of `reps`.
// The decode ceiling on the CPU (a memcpy also writes, so it understates what reads reach).
double measure_host_read_gbps(int64_t bytes, int reps);

}  // namespace frugal::bench
