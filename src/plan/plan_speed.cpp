// Speed and cost sections of the plan, each figure recorded with its arithmetic.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "plan/plan_format.h"
#include "plan/planner.h"

namespace frugal::plan {
namespace {

constexpr int64_t kMaxSweep = 4096;

void add_step(std::vector<PlanStep>* steps, const char* section, std::string label, std::string formula,
              std::string numbers, std::string result, double value) {
  steps->push_back(PlanStep{.section = section, .label = std::move(label), .formula = std::move(formula),
                            .numbers = std::move(numbers), .result = std::move(result), .value = value});
}

std::string tok_s(double v) { return fixed(v, v < 100 ? 1 : 0) + " tok/s"; }

void decode_steps(const PlanRequest& r, const SpeedModel& sm, const SpeedPlan& s, std::vector<PlanStep>* steps) {
  const StepTime& d = s.decode_b1;
  const double weights = sm.weights.step_weight_bytes(1) / sm.n_gpus;
  const int64_t attended = attended_kv_tokens(r, r.context);
  const double kv = static_cast<double>(attended) * sm.kv_bytes_per_token_rank;
  std::string what = "weights read per token (all but the embedding table";
  if (sm.weights.n_routed_experts > 0) {
    what += "; " + std::to_string(sm.weights.experts_per_token) + " of " +
            std::to_string(sm.weights.n_routed_experts) + " routed experts";
  }
  what += ") / N + context x KV bytes/token";
  add_step(steps, "speed", "decode bytes/token (batch 1)", what,
           gb(weights) + " + " + with_commas(attended) + " x " + with_commas(static_cast<int64_t>(sm.kv_bytes_per_token_rank)) +
               " B = " + gb(weights) + " + " + gb(kv),
           gb(d.bytes), d.bytes);
  std::string numbers = fixed(sm.eff.decode_bw, 2) + " x " + fixed(sm.bandwidth / 1e9, 0) + " GB/s / " + gb(d.bytes) +
                        " -> " + seconds(d.t_mem);
  if (d.t_comm > 0) numbers += " + all-reduce " + seconds(d.t_comm);
  if (d.compute_bound()) numbers += " (compute-bound: " + seconds(d.t_compute) + ")";
  add_step(steps, "speed", "decode tok/s (batch 1)", "decode_bw x bandwidth / bytes per token (+ 2 all-reduces/layer)",
           numbers, tok_s(d.tok_per_s()), d.tok_per_s());
}

void prefill_steps(const PlanRequest& r, const SpeedModel& sm, const SpeedPlan& s, std::vector<PlanStep>* steps) {
  const double linear = sm.weights.active_params_per_token() - static_cast<double>(sm.weights.lm_head_params);
  add_step(steps, "speed", "prefill FLOP/token", "2 x active params (no embedding, no lm_head) + attention at P/2",
           "2 x " + billions(linear) + " + " + fixed(sm.attn_flops_per_position / 1e6, 3) + " MFLOP x " +
               with_commas(r.prompt_len / 2),
           fixed(s.prefill_flops_per_token / 1e9, 2) + " GFLOP", s.prefill_flops_per_token);
  add_step(steps, "speed", "prefill tok/s", "prefill_mfu x peak(" + s.compute_dtype + ") x N / FLOP per token (+ all-reduces)",
           fixed(sm.eff.prefill_mfu, 2) + " x " + fixed(s.peak_tflops, 1) + " TFLOP/s x " + std::to_string(sm.n_gpus) +
               " / " + fixed(s.prefill_flops_per_token / 1e9, 2) + " GFLOP",
           tok_s(s.prefill_tok_per_s), s.prefill_tok_per_s);
  const StepTime first = sm.decode(1, static_cast<double>(attended_kv_tokens(r, r.prompt_len)));
  add_step(steps, "speed", "TTFT", "prompt / prefill tok/s + one decode step",
           with_commas(r.prompt_len) + " / " + fixed(s.prefill_tok_per_s, 0) + " + " + seconds(first.seconds()),
           seconds(s.ttft_s), s.ttft_s);
}

}  // namespace

SpeedPlan speed_plan(const PlanRequest& r, const SpeedModel& sm, const MemoryPlan& m, std::vector<PlanStep>* steps) {
  SpeedPlan s;
  const ComputePeak peak = compute_peak(r.gpu, r.quant.precision);
  s.compute_dtype = peak.dtype;
  s.compute_note = peak.note;
  s.peak_tflops = peak.tflops;
  const double ctx = static_cast<double>(attended_kv_tokens(r, r.context));  // a window reads W + S
  s.decode_b1 = sm.decode(1, ctx);
  s.decode_b1_bytes_per_token = s.decode_b1.bytes;
  s.prefill_flops_per_token = sm.prefill_flops_per_token(r.prompt_len);
  s.prefill_tok_per_s = sm.prefill_tok_per_s(r.prompt_len);
  s.ttft_s = static_cast<double>(r.prompt_len) / s.prefill_tok_per_s +
             sm.decode(1, static_cast<double>(attended_kv_tokens(r, r.prompt_len))).seconds();
  decode_steps(r, sm, s, steps);
  prefill_steps(r, sm, s, steps);

  const int64_t limit = std::clamp<int64_t>(m.max_concurrency, 1, kMaxSweep);
  for (int64_t b = 1; b <= limit; b *= 2) s.sweep.push_back(sm.decode(b, ctx));
  if (limit & (limit - 1)) s.sweep.push_back(sm.decode(limit, ctx));
  for (int64_t b = 1; b <= kMaxSweep; ++b) {
    if (sm.decode(b, ctx).compute_bound()) {
      s.crossover_batch = b;
      break;
    }
  }
  s.at_concurrency = sm.decode(r.concurrency, ctx);
  const StepTime& c = s.at_concurrency;
  add_step(steps, "speed", "decode tok/s at concurrency " + with_commas(r.concurrency),
           "B / max(t_mem, t_compute) + t_comm",
           with_commas(r.concurrency) + " / (max(" + seconds(c.t_mem) + ", " + seconds(c.t_compute) + ") + " +
               seconds(c.t_comm) + ")",
           tok_s(c.tok_per_s()), c.tok_per_s());
  add_step(steps, "speed", "memory/compute crossover",
           "first batch where B x FLOP/token / (decode_mfu x peak) >= step bytes / (decode_bw x bandwidth)",
           "at context " + with_commas(r.context),
           s.crossover_batch > 0 ? "batch " + with_commas(s.crossover_batch) : "none up to batch 4,096",
           static_cast<double>(s.crossover_batch));
  return s;
}

CostPlan cost_plan(const PlanRequest& r, const SpeedPlan& s, std::vector<PlanStep>* steps) {
  CostPlan c;
  c.price_per_gpu_hour = r.price_per_hour;
  const bool dated = r.gpu.price_date.empty() || r.gpu.price_source.find(r.gpu.price_date) != std::string::npos;
  c.price_source = r.price_per_hour == r.gpu.price_usd_per_hour
                       ? r.gpu.price_source + (dated ? "" : " (" + r.gpu.price_date + ")")
                       : "--price-per-hour";
  const double per_hour = r.price_per_hour * r.n_gpus;
  c.usd_per_m_tokens_b1 = per_hour / (s.decode_b1.tok_per_s() * 3600.0) * 1e6;
  c.usd_per_m_tokens_concurrency = per_hour / (s.at_concurrency.tok_per_s() * 3600.0) * 1e6;
  const std::string price = usd(r.price_per_hour) + "/h x " + std::to_string(r.n_gpus);
  add_step(steps, "cost", "USD per 1M output tokens (batch 1)", "price/h x GPUs / (tok/s x 3600) x 1e6",
           price + " / (" + fixed(s.decode_b1.tok_per_s(), 1) + " x 3600) x 1e6", usd(c.usd_per_m_tokens_b1),
           c.usd_per_m_tokens_b1);
  add_step(steps, "cost", "USD per 1M output tokens (concurrency " + with_commas(r.concurrency) + ")",
           "price/h x GPUs / (tok/s x 3600) x 1e6",
           price + " / (" + fixed(s.at_concurrency.tok_per_s(), 1) + " x 3600) x 1e6",
           usd(c.usd_per_m_tokens_concurrency), c.usd_per_m_tokens_concurrency);
  auto own = resolve_ownership(r.own, r.gpu);
  if (!own.is_ok()) {
    c.own_missing = own.status().message();
    return c;
  }
  c.has_own = true;
  c.own_b1 = ownership_cost(*own, r.n_gpus, s.decode_b1.tok_per_s());
  c.own_concurrency = ownership_cost(*own, r.n_gpus, s.at_concurrency.tok_per_s());
  const OwnershipCost& o = c.own_b1;
  add_step(steps, "cost", "owned USD per GPU-hour",
           "purchase / (years x 8760) + ops per year / 8760 + W / 1000 x utilization x USD/kWh",
           usd(o.purchase_usd) + " / (" + fixed(own->years, 1) + " x 8760) + " + usd(own->ops_usd_per_year) +
               " / 8760 + " + fixed(o.power_w, 0) + " W / 1000 x " + fixed(own->utilization, 2) + " x " +
               usd(own->usd_per_kwh),
           usd(o.usd_per_hour), o.usd_per_hour);
  for (const auto& [label, oc, tps] :
       {std::tuple{std::string("owned USD per 1M output tokens (batch 1)"), &c.own_b1, s.decode_b1.tok_per_s()},
        std::tuple{"owned USD per 1M output tokens (concurrency " + with_commas(r.concurrency) + ")",
                   &c.own_concurrency, s.at_concurrency.tok_per_s()}}) {
    add_step(steps, "cost", label, "GPUs x owned USD/h / (tok/s x 3600 x utilization) x 1e6",
             std::to_string(r.n_gpus) + " x " + usd(oc->usd_per_hour) + " / (" + fixed(tps, 1) + " x 3600 x " +
                 fixed(own->utilization, 2) + ") x 1e6",
             usd(oc->usd_per_m_tokens), oc->usd_per_m_tokens);
  }
  return c;
}

}  // namespace frugal::plan
