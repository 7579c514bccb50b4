// The time model: roofline of one decode step or one prefill token on n_gpus tensor-parallel
// GPUs, scaled by efficiency factors that calibration fits to `frugal bench` results.
//   decode step(B, L) = max(t_mem, t_compute) + t_comm + t_host
//     t_mem     = (weight bytes read by B sequences / N + B x L x KV bytes/token/rank)
//                 / (bandwidth x decode_bw)
//     t_compute = B x (2 x active params + attention FLOP at L) / N / (peak x decode_mfu)
//     t_comm    = 2 all-reduces per layer of B x hidden x 2 bytes (ring), when N > 1
//     t_host    = B x seq_overhead: per-sequence work of the serving engine each step (logits
//                 transfer, sampling, scheduling); 0 for the pure hardware roofline, fitted by
//                 calibration from batched decode measurements
//   prefill token(P) = 2 x (active params - lm_head) + attention at P/2, at peak x prefill_mfu
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "model/config.h"
#include "plan/catalog.h"
#include "plan/weights.h"

namespace frugal::plan {

// Defaults: PERFORMANCE.md's H200 measurements. A cuBLAS GEMV chain reaches 3.59 of 4.8 TB/s
// datasheet (0.75); the bf16 GEMM chain of a 2k prefill 628 of 989 TFLOP/s (0.63, less
// attention and glue: 0.60). Batched decode runs smaller GEMMs than prefill (0.50).
struct Efficiency {
  double decode_bw = 0.75;
  double decode_mfu = 0.50;
  double prefill_mfu = 0.60;
  double link = 0.70;  // fraction of the link's bandwidth a ring all-reduce reaches
  double seq_overhead_s = 0;  // seconds per sequence per decode step (engine host work)
  std::string source = "defaults (docs/plan.md)";
};

struct StepTime {
  int64_t batch = 1;
  double kv_len = 0;
  double bytes = 0;  // per GPU
  double flops = 0;  // per GPU
  double t_mem = 0, t_compute = 0, t_comm = 0, t_host = 0;
  double seconds() const { return (t_mem > t_compute ? t_mem : t_compute) + t_comm + t_host; }
  double tok_per_s() const { return static_cast<double>(batch) / seconds(); }
  bool compute_bound() const { return t_compute >= t_mem; }
};

struct SpeedModel {
  WeightSummary weights;
  int n_gpus = 1;
  int64_t n_layers = 0;
  int64_t hidden = 0;
  double kv_bytes_per_token_rank = 0;
  double attn_flops_per_position = 0;  // whole model, per token, per context position
  double bandwidth = 0;                // bytes/s of one GPU (datasheet)
  double peak_flops = 0;               // one GPU, dense, in compute_dtype
  std::string compute_dtype;           // "bf16" or "fp8"
  double link_bandwidth = 0;           // bytes/s per direction
  double allreduce_latency = 0;        // seconds
  int64_t max_batched_tokens = 8192;   // prefill chunk
  Efficiency eff;

  double allreduce_seconds(double bytes) const;
  double decode_flops_per_token(double kv_len) const;
  double prefill_flops_per_token(int64_t prompt_len) const;
  StepTime decode(int64_t batch, double kv_len) const;
  // Seconds per prompt token when prefilling prompt_len tokens (chunks of max_batched_tokens).
  double prefill_seconds_per_token(int64_t prompt_len) const;
  double prefill_tok_per_s(int64_t prompt_len) const { return 1.0 / prefill_seconds_per_token(prompt_len); }
};

// Weight-only int8/int4 dequantize into bf16 GEMMs; fp8 uses fp8 tensor cores where the GPU
// has them (else bf16).
struct ComputePeak {
  double tflops = 0;
  std::string dtype;
  std::string note;
};
ComputePeak compute_peak(const GpuSpec& gpu, WeightPrecision p);

SpeedModel make_speed_model(const model::ModelConfig& c, const WeightSummary& w, const GpuSpec& gpu,
                            int n_gpus, double kv_bytes_per_token_rank, WeightPrecision p,
                            const Efficiency& eff);

}  // namespace frugal::plan
