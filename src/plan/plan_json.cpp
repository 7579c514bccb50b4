// --json: every figure of the plan, plus the arithmetic lines.
#include <nlohmann/json.hpp>

#include "kv/kv_geometry.h"
#include "plan/planner.h"

namespace frugal::plan {
namespace {

using json = nlohmann::json;

json step_json(const StepTime& s) {
  return {{"batch", s.batch}, {"kv_len", s.kv_len}, {"bytes_per_gpu", s.bytes}, {"flops_per_gpu", s.flops},
          {"t_mem_s", s.t_mem}, {"t_compute_s", s.t_compute}, {"t_comm_s", s.t_comm}, {"step_s", s.seconds()},
          {"tok_per_s", s.tok_per_s()}, {"bound", s.compute_bound() ? "compute" : "memory"}};
}

json efficiency_json(const Efficiency& e) {
  return {{"decode_bw", e.decode_bw}, {"decode_mfu", e.decode_mfu}, {"prefill_mfu", e.prefill_mfu}, {"seq_overhead_s", e.seq_overhead_s},
          {"link", e.link}, {"source", e.source}};
}

json request_json(const PlanRequest& r) {
  return {{"model", r.model.name},
          {"model_source", r.model.source},
          {"model_provenance", r.model.provenance},
          {"gpu", r.gpu.name},
          {"gpus", r.n_gpus},
          {"precision", precision_name(r.quant.precision)},
          {"group_size", r.quant.group_size},
          {"int4_zero_point", r.quant.int4_zero_point},
          {"fp8_block", r.quant.fp8_block},
          {"lm_head_int8", r.quant.lm_head_int8},
          {"kv_dtype", kv::kv_dtype_label(r.kv_dtype)},
          {"context", r.context},
          {"concurrency", r.concurrency},
          {"prompt_len", r.prompt_len},
          {"price_per_gpu_hour", r.price_per_hour},
          {"gpu_memory_utilization", r.over.gpu_memory_utilization},
          {"max_batched_tokens", r.over.max_batched_tokens},
          {"block_size", r.over.block_size}};
}

json weights_json(const Plan& p) {
  const WeightSummary& w = p.weights;
  json groups = json::array();
  for (const WeightGroup& g : w.groups) {
    groups.push_back({{"role", g.role}, {"format", g.format}, {"n_tensors", g.n_tensors}, {"params", g.params},
                      {"bytes", g.bytes}, {"quantized", g.format != "bf16"}});
  }
  return {{"total_params", w.total_params},
          {"total_bytes", w.total_bytes},
          {"published_params_b", p.req.model.published_params_b},
          {"embedding_params", w.embedding_params},
          {"embedding_bytes", w.embedding_bytes},
          {"lm_head_params", w.lm_head_params},
          {"routed_expert_params", w.routed_expert_params},
          {"routed_expert_bytes", w.routed_expert_bytes},
          {"n_moe_layers", w.n_moe_layers},
          {"active_params_per_token", w.active_params_per_token()},
          {"groups", groups}};
}

json memory_json(const MemoryPlan& m) {
  return {{"usable_bytes", m.usable_bytes},
          {"weights_bytes", m.weights_bytes},
          {"workspace_bytes", m.workspace_bytes},
          {"overhead_bytes", m.overhead_bytes},
          {"kv_budget_bytes", m.kv_budget_bytes},
          {"kv_bytes_per_token", m.kv_bytes_per_token},
          {"kv_bytes_per_token_model", m.kv_bytes_per_token_model},
          {"kv_blocks", m.kv_blocks},
          {"kv_tokens", m.kv_tokens},
          {"needed_blocks", m.needed_blocks},
          {"needed_kv_bytes", m.needed_kv_bytes},
          {"total_needed_bytes", m.total_needed_bytes},
          {"fits", m.fits},
          {"max_context_batch1", m.max_context_batch1},
          {"max_context_limited_by_model", m.max_context_limited_by_model},
          {"max_concurrency", m.max_concurrency}};
}

json speed_json(const Plan& p) {
  const SpeedPlan& s = p.speed;
  json sweep = json::array();
  for (const StepTime& t : s.sweep) sweep.push_back(step_json(t));
  return {{"efficiency", efficiency_json(p.req.eff)},
          {"compute_dtype", s.compute_dtype},
          {"compute_note", s.compute_note},
          {"peak_tflops", s.peak_tflops},
          {"decode_b1_tok_per_s", s.decode_b1.tok_per_s()},
          {"decode_b1_bytes_per_token", s.decode_b1_bytes_per_token},
          {"decode_b1", step_json(s.decode_b1)},
          {"prefill_flops_per_token", s.prefill_flops_per_token},
          {"prefill_tok_per_s", s.prefill_tok_per_s},
          {"ttft_s", s.ttft_s},
          {"decode_vs_concurrency", sweep},
          {"crossover_batch", s.crossover_batch},
          {"at_concurrency", step_json(s.at_concurrency)},
          {"decode_tok_per_s_at_concurrency", s.at_concurrency.tok_per_s()}};
}

json calibration_json(const CalibrationReport& c) {
  json rows = json::array();
  for (const CalibrationRow& r : c.rows) {
    rows.push_back({{"kind", r.point.kind}, {"batch", r.point.batch}, {"prompt_len", r.point.prompt_len},
                    {"kv_len", r.point.kv_len}, {"measured_tok_per_s", r.point.tok_per_s},
                    {"predicted_before", r.predicted_before}, {"error_before_pct", r.error_before_pct()},
                    {"predicted_after", r.predicted_after}, {"error_after_pct", r.error_after_pct()}});
  }
  return {{"path", c.path}, {"before", efficiency_json(c.before)}, {"after", efficiency_json(c.after)},
          {"rows", rows}, {"notes", c.notes}};
}


nlohmann::json own_json(const CostPlan& c) {
  if (!c.has_own) return {{"available", false}, {"why", c.own_missing}};
  const OwnershipCost& o = c.own_b1;
  return {{"available", true},
          {"purchase_usd", o.purchase_usd},
          {"purchase_source", o.purchase_source},
          {"power_w", o.power_w},
          {"power_source", o.power_source},
          {"capex_usd_per_hour", o.capex_per_hour},
          {"ops_usd_per_hour", o.ops_per_hour},
          {"energy_usd_per_hour", o.energy_per_hour},
          {"usd_per_gpu_hour", o.usd_per_hour},
          {"usd_per_m_tokens_b1", c.own_b1.usd_per_m_tokens},
          {"usd_per_m_tokens_concurrency", c.own_concurrency.usd_per_m_tokens},
          {"kwh_per_m_tokens_b1", c.own_b1.kwh_per_m_tokens}};
}

}  // namespace

json plan_to_json(const Plan& p) {
  json tp = json::array();
  for (const TpOption& o : p.tp_options) {
    tp.push_back({{"gpus", o.n_gpus}, {"possible", o.possible}, {"why_not", o.why_not}, {"fits", o.fits},
                  {"max_context_batch1", o.max_context_batch1}, {"max_concurrency", o.max_concurrency},
                  {"decode_b1_tok_per_s", o.decode_b1_tok_per_s}, {"usd_per_m_tokens_b1", o.usd_per_m_tokens_b1}});
  }
  json steps = json::array();
  for (const PlanStep& s : p.steps) {
    steps.push_back({{"section", s.section}, {"label", s.label}, {"formula", s.formula}, {"numbers", s.numbers},
                     {"result", s.result}, {"value", s.value}});
  }
  json j = {{"request", request_json(p.req)},
            {"gpu", {{"name", p.req.gpu.name}, {"display_name", p.req.gpu.display_name},
                     {"memory_gib", p.req.gpu.memory_gib}, {"bandwidth_gb_s", p.req.gpu.bandwidth_gb_s},
                     {"tflops_bf16", p.req.gpu.tflops_bf16}, {"tflops_fp8", p.req.gpu.tflops_fp8},
                     {"tflops_int8", p.req.gpu.tflops_int8}, {"link", p.req.gpu.link_name()},
                     {"price_source", p.req.gpu.price_source}, {"price_date", p.req.gpu.price_date},
                     {"spec_source", p.req.gpu.spec_source}}},
            {"fits", p.memory.fits},
            {"weights", weights_json(p)},
            {"memory", memory_json(p.memory)},
            {"speed", speed_json(p)},
            {"cost", {{"price_per_gpu_hour", p.cost.price_per_gpu_hour}, {"price_source", p.cost.price_source},
                      {"usd_per_m_tokens_b1", p.cost.usd_per_m_tokens_b1},
                      {"usd_per_m_tokens_concurrency", p.cost.usd_per_m_tokens_concurrency},
                      {"own", own_json(p.cost)}}},
            {"tensor_parallel", tp},
            {"smallest_fitting_gpus", p.smallest_fitting_gpus},
            {"steps", steps},
            {"notes", p.notes}};
  if (p.calibration) j["calibration"] = calibration_json(*p.calibration);
  return j;
}

}  // namespace frugal::plan
