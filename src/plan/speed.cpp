#include "plan/speed.h"

#include <algorithm>

namespace frugal::plan {

ComputePeak compute_peak(const GpuSpec& gpu, WeightPrecision p) {
  switch (p) {
    case WeightPrecision::kBf16:
      return {gpu.tflops_bf16, "bf16", "bf16 GEMMs"};
    case WeightPrecision::kFp8:
      if (gpu.tflops_fp8 > 0) return {gpu.tflops_fp8, "fp8", "fp8 weights and activations (W8A8)"};
      return {gpu.tflops_bf16, "bf16", "no fp8 tensor cores on this GPU: fp8 weights dequantized to bf16 GEMMs"};
    case WeightPrecision::kInt8:
    case WeightPrecision::kInt4:
    case WeightPrecision::kNf4:
      return {gpu.tflops_bf16, "bf16", "weight-only quantization: weights dequantized into bf16 GEMMs"};
  }
  return {gpu.tflops_bf16, "bf16", ""};
}

SpeedModel make_speed_model(const model::ModelConfig& c, const WeightSummary& w, const GpuSpec& gpu,
                            int n_gpus, double kv_bytes_per_token_rank, WeightPrecision p,
                            const Efficiency& eff) {
  SpeedModel m;
  m.weights = w;
  m.n_gpus = n_gpus;
  m.n_layers = c.num_hidden_layers;
  m.hidden = c.hidden_size;
  m.kv_bytes_per_token_rank = kv_bytes_per_token_rank;
  const double layers = static_cast<double>(c.num_hidden_layers);
  const double heads = static_cast<double>(c.num_attention_heads);
  if (c.is_mla()) {
    // Absorbed MLA decode: scores over (kv_lora_rank + rope) and values over kv_lora_rank.
    const double lora = static_cast<double>(c.mla.kv_lora_rank);
    const double rope = static_cast<double>(c.mla.qk_rope_head_dim);
    m.attn_flops_per_position = 2.0 * layers * heads * (2.0 * lora + rope);
  } else {
    // QK^T and PV: 2 FLOP per multiply-add each.
    m.attn_flops_per_position = 4.0 * layers * heads * static_cast<double>(c.head_dim);
  }
  m.bandwidth = gpu.bandwidth_gb_s * 1e9;
  const ComputePeak peak = compute_peak(gpu, p);
  m.peak_flops = peak.tflops * 1e12;
  m.compute_dtype = peak.dtype;
  m.link_bandwidth = gpu.link_gb_s() * 1e9;
  m.allreduce_latency = gpu.allreduce_latency_us * 1e-6;
  m.eff = eff;
  return m;
}

double SpeedModel::allreduce_seconds(double bytes) const {
  if (n_gpus <= 1) return 0;
  const double n = static_cast<double>(n_gpus);
  return allreduce_latency + 2.0 * (n - 1.0) / n * bytes / (link_bandwidth * eff.link);
}

double SpeedModel::decode_flops_per_token(double kv_len) const {
  return 2.0 * weights.active_params_per_token() + attn_flops_per_position * kv_len;
}

double SpeedModel::prefill_flops_per_token(int64_t prompt_len) const {
  const double linear = weights.active_params_per_token() - static_cast<double>(weights.lm_head_params);
  return 2.0 * linear + attn_flops_per_position * static_cast<double>(prompt_len) / 2.0;
}

StepTime SpeedModel::decode(int64_t batch, double kv_len) const {
  StepTime s;
  s.batch = batch;
  s.kv_len = kv_len;
  const double b = static_cast<double>(batch);
  s.bytes = weights.step_weight_bytes(batch) / n_gpus + b * kv_len * kv_bytes_per_token_rank;
  s.flops = b * decode_flops_per_token(kv_len) / n_gpus;
  s.t_mem = s.bytes / (bandwidth * eff.decode_bw);
  s.t_compute = s.flops / (peak_flops * eff.decode_mfu);
  s.t_comm = 2.0 * static_cast<double>(n_layers) * allreduce_seconds(b * static_cast<double>(hidden) * 2.0);
  s.t_host = b * eff.seq_overhead_s;
  return s;
}

double SpeedModel::prefill_seconds_per_token(int64_t prompt_len) const {
  const int64_t chunk = std::max<int64_t>(1, std::min(prompt_len, max_batched_tokens));
  const double c = static_cast<double>(chunk);
  const double t_compute = c * prefill_flops_per_token(prompt_len) / n_gpus / (peak_flops * eff.prefill_mfu);
  // Every chunk streams all weights once (all experts for MoE at this many tokens).
  const double t_mem = weights.step_weight_bytes(chunk) / n_gpus / (bandwidth * eff.decode_bw);
  const double t_comm = 2.0 * static_cast<double>(n_layers) * allreduce_seconds(c * static_cast<double>(hidden) * 2.0);
  return (std::max(t_compute, t_mem) + t_comm) / c;
}

}  // namespace frugal::plan
