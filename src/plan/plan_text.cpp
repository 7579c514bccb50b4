// Terminal rendering of a Plan: every figure with the formula and numbers that produced it.
#include <sstream>

#include <fmt/format.h>

#include "kv/kv_geometry.h"
#include "plan/plan_format.h"
#include "plan/planner.h"

namespace frugal::plan {
namespace {

void section_steps(std::ostringstream& os, const Plan& p, const std::string& section) {
  for (const PlanStep& s : p.steps) {
    if (s.section != section) continue;
    os << "  " << s.label << ": " << s.formula << "\n      = " << s.numbers << " = " << s.result << "\n";
  }
}

void header(std::ostringstream& os, const Plan& p) {
  const PlanRequest& r = p.req;
  const model::ModelConfig& c = r.model.config;
  os << fmt::format("frugal plan: {} on {} x {}\n", r.model.name, r.n_gpus, r.gpu.display_name);
  std::string prec = precision_name(r.quant.precision);
  if (r.quant.precision == WeightPrecision::kInt4) prec += " g" + std::to_string(r.quant.group_size);
  os << fmt::format("  weights {}{}, KV {}, context {}, concurrency {}, prompt {}\n", prec,
                    r.quant.lm_head_int8 ? " (lm_head int8)" : "", kv::kv_dtype_label(r.kv_dtype),
                    with_commas(r.context), with_commas(r.concurrency), with_commas(r.prompt_len));
  os << fmt::format("  model: {}, {} layers, hidden {}, {} heads / {} KV heads x {}, vocab {}, max context {}\n",
                    c.architecture, c.num_hidden_layers, c.hidden_size, c.num_attention_heads,
                    c.num_key_value_heads, c.head_dim, with_commas(c.vocab_size),
                    with_commas(c.max_position_embeddings));
  if (c.is_mla()) {
    os << fmt::format("  MLA: kv_lora_rank {}, rope dim {}; MoE: {} routed (top {}) + {} shared experts\n",
                      c.mla.kv_lora_rank, c.mla.qk_rope_head_dim, c.moe.n_routed_experts,
                      c.moe.num_experts_per_tok, c.moe.n_shared_experts);
  }
  os << fmt::format("  GPU: {:.0f} GiB, {:.0f} GB/s, {:.1f} dense bf16 TFLOP/s, {}\n", r.gpu.memory_gib,
                    r.gpu.bandwidth_gb_s, r.gpu.tflops_bf16, r.gpu.link_name());
  if (!r.model.provenance.empty()) os << "  config provenance: " << r.model.provenance << "\n";
}

void weights_table(std::ostringstream& os, const Plan& p) {
  const WeightSummary& w = p.weights;
  os << "\nWeights (the tensors the engine loads; only linear projections are quantized)\n";
  os << fmt::format("  {:<22} {:<42} {:>8} {:>16} {:>12}\n", "role", "stored as", "tensors", "params", "bytes");
  for (const WeightGroup& g : w.groups) {
    os << fmt::format("  {:<22} {:<42} {:>8} {:>16} {:>12}\n", g.role, g.format, with_commas(g.n_tensors),
                      with_commas(g.params), human_bytes(static_cast<double>(g.bytes)));
  }
  os << fmt::format("  {:<22} {:<42} {:>8} {:>16} {:>12}\n", "total", "", "", with_commas(w.total_params),
                    gib(static_cast<double>(w.total_bytes)));
  const double pub = p.req.model.published_params_b;
  if (pub > 0) {
    const double ours = static_cast<double>(w.total_params) / 1e9;
    os << fmt::format("  parameters: {} (published {:.2f} B: {:+.2f}%)\n", billions(static_cast<double>(w.total_params)),
                      pub, (ours - pub) / pub * 100.0);
  }
  if (w.n_routed_experts > 0) {
    os << fmt::format("  active per token: {} ({} of {} routed experts in {} MoE layers)\n",
                      billions(w.active_params_per_token()), w.experts_per_token, w.n_routed_experts,
                      w.n_moe_layers);
  }
}

void sweep_table(std::ostringstream& os, const Plan& p) {
  os << fmt::format("\nDecode vs concurrency (every sequence at KV length {})\n", with_commas(p.req.context));
  os << fmt::format("  {:>7} {:>12} {:>12} {:>10} {:>12} {:>9}\n", "batch", "t_mem", "t_compute", "t_comm", "tok/s",
                    "bound");
  for (const StepTime& s : p.speed.sweep) {
    os << fmt::format("  {:>7} {:>12} {:>12} {:>10} {:>12} {:>9}\n", with_commas(s.batch), seconds(s.t_mem),
                      seconds(s.t_compute), seconds(s.t_comm), fixed(s.tok_per_s(), 0),
                      s.compute_bound() ? "compute" : "memory");
  }
}

void tp_table(std::ostringstream& os, const Plan& p) {
  os << fmt::format("\nTensor parallel options ({} {}, all-reduce over {})\n", precision_name(p.req.quant.precision),
                    p.req.gpu.name, p.req.gpu.link_name());
  os << fmt::format("  {:>4} {:>6} {:>14} {:>16} {:>16} {:>12}\n", "GPUs", "fits", "max context", "max concurrency",
                    "decode b1 tok/s", "$/1M (b1)");
  for (const TpOption& o : p.tp_options) {
    if (!o.possible) {
      os << fmt::format("  {:>4} {:>6}  ({})\n", o.n_gpus, "-", o.why_not);
      continue;
    }
    // Speed and cost of a configuration that does not fit would be hypothetical: not shown.
    os << fmt::format("  {:>4} {:>6} {:>14} {:>16} {:>16} {:>12}\n", o.n_gpus, o.fits ? "yes" : "no",
                      with_commas(o.max_context_batch1), with_commas(o.max_concurrency),
                      o.fits ? fixed(o.decode_b1_tok_per_s, 1) : "-", o.fits ? usd(o.usd_per_m_tokens_b1) : "-");
  }
  if (p.smallest_fitting_gpus > 0) {
    os << fmt::format("  smallest that fits: {} x {}\n", p.smallest_fitting_gpus, p.req.gpu.name);
  }
}

void calibration_table(std::ostringstream& os, const CalibrationReport& c) {
  os << "\nCalibration against " << c.path << "\n";
  os << fmt::format("  factors before: decode_bw {:.3f}, decode_mfu {:.3f}, prefill_mfu {:.3f}, seq_overhead {:.4f} ms\n",
                    c.before.decode_bw, c.before.decode_mfu, c.before.prefill_mfu, c.before.seq_overhead_s * 1e3);
  os << fmt::format("  factors after:  decode_bw {:.3f}, decode_mfu {:.3f}, prefill_mfu {:.3f}, seq_overhead {:.4f} ms\n",
                    c.after.decode_bw, c.after.decode_mfu, c.after.prefill_mfu, c.after.seq_overhead_s * 1e3);
  os << fmt::format("  {:<8} {:>6} {:>8} {:>12} {:>14} {:>8} {:>14} {:>8}\n", "kind", "batch", "length", "measured",
                    "predicted", "error", "calibrated", "error");
  for (const CalibrationRow& r : c.rows) {
    const double len = r.point.kind == "prefill" ? static_cast<double>(r.point.prompt_len) : r.point.kv_len;
    os << fmt::format("  {:<8} {:>6} {:>8.0f} {:>12.1f} {:>14.1f} {:>7.1f}% {:>14.1f} {:>7.1f}%\n", r.point.kind,
                      r.point.batch, len, r.point.tok_per_s, r.predicted_before, r.error_before_pct(),
                      r.predicted_after, r.error_after_pct());
  }
  for (const std::string& n : c.notes) os << "  note: " << n << "\n";
}

}  // namespace

std::string format_plan_text(const Plan& p) {
  std::ostringstream os;
  header(os, p);
  weights_table(os, p);
  os << "\nMemory per GPU (utilization " << fixed(p.req.over.gpu_memory_utilization, 2) << ")\n";
  section_steps(os, p, "memory");
  const Efficiency& e = p.req.eff;
  os << fmt::format("\nSpeed (decode_bw {:.2f}, decode_mfu {:.2f}, prefill_mfu {:.2f}, link {:.2f}: {})\n",
                    e.decode_bw, e.decode_mfu, e.prefill_mfu, e.link, e.source);
  os << "  compute: " << p.speed.compute_note << "\n";
  section_steps(os, p, "speed");
  sweep_table(os, p);
  os << "\nCost (" << usd(p.cost.price_per_gpu_hour) << " per GPU-hour: " << p.cost.price_source << ")\n";
  section_steps(os, p, "cost");
  if (p.cost.has_own) {
    os << "  owned: purchase " << usd(p.cost.own_b1.purchase_usd) << " (" << p.cost.own_b1.purchase_source
       << "), power " << fixed(p.cost.own_b1.power_w, 0) << " W (" << p.cost.own_b1.power_source << ")\n";
  } else {
    os << "  owned: not computed: " << p.cost.own_missing << "\n";
  }
  tp_table(os, p);
  if (p.calibration) calibration_table(os, *p.calibration);
  if (!p.notes.empty()) os << "\n";
  for (const std::string& n : p.notes) os << "note: " << n << "\n";
  os << "\nverdict: " << (p.memory.fits ? "fits" : "does NOT fit") << " on " << p.req.n_gpus << " x "
     << p.req.gpu.name << "; max context " << with_commas(p.memory.max_context_batch1) << "; decode "
     << fixed(p.speed.decode_b1.tok_per_s(), 1) << " tok/s at batch 1; " << usd(p.cost.usd_per_m_tokens_b1)
     << " per 1M tokens at batch 1, " << usd(p.cost.usd_per_m_tokens_concurrency) << " at concurrency "
     << p.req.concurrency << "\n";
  return os.str();
}

}  // namespace frugal::plan
