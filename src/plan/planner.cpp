#include "plan/planner.h"

#include <algorithm>
#include <cmath>

#include "kv/kv_geometry.h"
#include "plan/plan_format.h"

namespace frugal::plan {
namespace {

constexpr int64_t kMaxSweep = 4096;  // largest batch the concurrency sweep and crossover look at
constexpr int kTpCandidates[] = {1, 2, 4, 8};

void add_step(std::vector<PlanStep>* steps, const char* section, std::string label, std::string formula,
              std::string numbers, std::string result, double value) {
  if (steps == nullptr) return;
  steps->push_back(PlanStep{.section = section, .label = std::move(label), .formula = std::move(formula),
                            .numbers = std::move(numbers), .result = std::move(result), .value = value});
}

Status resolve_defaults(PlanRequest& r) {
  const model::ModelConfig& c = r.model.config;
  if (r.n_gpus < 1) return invalid_argument("--gpus: expected >= 1, got " + std::to_string(r.n_gpus));
  if (r.context == 0) r.context = std::min<int64_t>(4096, c.max_position_embeddings);
  if (r.context < 1) return invalid_argument("--context: expected >= 1, got " + std::to_string(r.context));
  if (r.concurrency < 1) {
    return invalid_argument("--concurrency: expected >= 1, got " + std::to_string(r.concurrency));
  }
  if (r.prompt_len == 0) r.prompt_len = std::min<int64_t>(1024, r.context);
  if (r.kv_window < 0 || r.kv_sinks < 0 || (r.kv_sinks > 0 && r.kv_window == 0))
    return invalid_argument("--kv-window / --kv-sinks: expected >= 0, and sinks only with a window (got " +
                            std::to_string(r.kv_window) + ", " + std::to_string(r.kv_sinks) + ")");
  if (r.prompt_len < 1) return invalid_argument("--prompt-len: expected >= 1");
  if (r.price_per_hour < 0) r.price_per_hour = r.gpu.price_usd_per_hour;
  if (r.over.block_size < 1) return invalid_argument("block size: expected >= 1");
  return Status::ok();
}

// Why tensor parallelism over n GPUs cannot split this model's heads ("" when it can).
std::string tp_obstacle(const model::ModelConfig& c, int n) {
  if (c.num_attention_heads % n != 0) {
    return std::to_string(c.num_attention_heads) + " attention heads do not split over " + std::to_string(n);
  }
  const int64_t kv = c.num_key_value_heads;
  if (!c.is_mla() && kv % n != 0 && n % kv != 0) {
    return std::to_string(kv) + " KV heads neither split over nor replicate onto " + std::to_string(n);
  }
  return "";
}

int64_t workspace_bytes(const model::ModelConfig& c, const PlanRequest& r, int n, std::string* formula) {
  const int64_t q = c.is_mla() ? c.num_attention_heads * (c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim)
                               : c.num_attention_heads * c.head_dim;
  int64_t ffn = c.intermediate_size;
  if (c.is_moe()) {
    ffn = std::max(ffn, (c.moe.num_experts_per_tok + c.moe.n_shared_experts) * c.moe.moe_intermediate_size);
  }
  const int64_t wide = std::max(q, ffn) / n;
  const int64_t t = r.over.max_batched_tokens;
  const int64_t act = t * (4 * c.hidden_size + 3 * wide) * 2;
  const int64_t logits = r.concurrency * c.vocab_size * 4;
  // MoE: the grouped experts' scratch, f32 per (token, expert) pair: h [inter] and the down
  // output [hidden] (ops::moe_experts_scratch_bytes).
  const int64_t moe = c.is_moe() ? t * c.moe.num_experts_per_tok * (c.moe.moe_intermediate_size / n + c.hidden_size) * 4 : 0;
  if (formula) {
    *formula = "tokens " + with_commas(t) + " x (4 x hidden " + with_commas(c.hidden_size) +
               " + 3 x max(q, ffn)/N " + with_commas(wide) + ") x 2 B + " + with_commas(r.concurrency) +
               " seqs x vocab " + with_commas(c.vocab_size) + " x 4 B";
    if (moe > 0)
      *formula += " + tokens x top_k " + with_commas(c.moe.num_experts_per_tok) + " x (moe_inter/N + hidden) x 4 B";
  }
  return act + logits + moe;
}

MemoryPlan memory_plan(const PlanRequest& r, const WeightSummary& w, int n, std::vector<PlanStep>* steps) {
  const model::ModelConfig& c = r.model.config;
  MemoryPlan m;
  const double mem = static_cast<double>(r.gpu.memory_bytes());
  m.usable_bytes = static_cast<int64_t>(mem * r.over.gpu_memory_utilization);
  add_step(steps, "memory", "usable per GPU", "GPU memory x utilization",
           gib(mem) + " x " + fixed(r.over.gpu_memory_utilization, 2), gib(m.usable_bytes), m.usable_bytes);
  // Tensor parallel: the bytes of the largest rank's shard as the engine cuts it (model/shard.h:
  // embedding and lm_head split by vocab, norms replicated); an even split where the engine cannot shard the model.
  const Result<int64_t> sharded = n > 1 ? per_gpu_weight_bytes(c, r.quant, n) : Result<int64_t>(w.total_bytes);
  if (sharded) {
    m.weights_bytes = *sharded;
    add_step(steps, "memory", "weights per GPU", n > 1 ? "largest rank's shard (heads, MLP, embedding and lm_head split, routed experts spread; norms replicated)" : "weight bytes",
             with_commas(w.total_bytes) + " B over " + std::to_string(n), gib(m.weights_bytes), m.weights_bytes);
  } else {
    m.weights_bytes = (w.total_bytes + n - 1) / n;
    add_step(steps, "memory", "weights per GPU", "weight bytes / GPUs (the engine cannot shard it yet: " + sharded.status().message() + ")",
             with_commas(w.total_bytes) + " B / " + std::to_string(n), gib(m.weights_bytes), m.weights_bytes);
  }
  std::string wf;
  m.workspace_bytes = workspace_bytes(c, r, n, &wf);
  add_step(steps, "memory", "workspace", "activations of one prefill chunk + logits", wf, gib(m.workspace_bytes),
           m.workspace_bytes);
  m.overhead_bytes = r.over.cuda_context_bytes + r.over.graphs_bytes;
  add_step(steps, "memory", "CUDA context + graphs", "context and cuBLAS workspaces + captured graphs",
           gib(r.over.cuda_context_bytes) + " + " + gib(r.over.graphs_bytes), gib(m.overhead_bytes),
           m.overhead_bytes);
  m.kv_budget_bytes = m.usable_bytes - m.weights_bytes - m.workspace_bytes - m.overhead_bytes;
  add_step(steps, "memory", "KV budget", "usable - weights - workspace - overhead",
           gib(m.usable_bytes) + " - " + gib(m.weights_bytes) + " - " + gib(m.workspace_bytes) + " - " +
               gib(m.overhead_bytes),
           gib(m.kv_budget_bytes), m.kv_budget_bytes);

  const kv::KvCacheOptions kv_opts{.dtype = r.kv_dtype, .block_size = r.over.block_size};
  const kv::KvGeometry g = kv::kv_geometry(c, {.tensor_parallel = n}, kv_opts);
  m.kv_bytes_per_token = kv::bytes_per_token(g);
  m.kv_bytes_per_token_model = kv::bytes_per_token(kv::kv_geometry(c, {.tensor_parallel = 1}, kv_opts));
  const std::string dt = kv::kv_dtype_label(r.kv_dtype);
  const std::string per_layer = with_commas(kv::bytes_per_token_per_layer(g));
  if (c.is_mla()) {
    add_step(steps, "memory", "KV bytes per token", "layers x (kv_lora_rank + qk_rope_head_dim) x " + dt + " (+ scales)",
             std::to_string(c.num_hidden_layers) + " x (" + std::to_string(c.mla.kv_lora_rank) + " + " +
                 std::to_string(c.mla.qk_rope_head_dim) + ") -> " + per_layer + " B/layer",
             with_commas(m.kv_bytes_per_token) + " B", m.kv_bytes_per_token);
  } else {
    add_step(steps, "memory", "KV bytes per token", "2 (K,V) x layers x KV heads per GPU x head_dim x " + dt + " (+ scales)",
             "2 x " + std::to_string(c.num_hidden_layers) + " x " + std::to_string(g.n_head_kv) + " x " +
                 std::to_string(c.head_dim) + " -> " + per_layer + " B/layer",
             with_commas(m.kv_bytes_per_token) + " B", m.kv_bytes_per_token);
  }
  m.kv_blocks = m.kv_budget_bytes > 0 ? kv::n_blocks_for_budget(g, m.kv_budget_bytes) : 0;
  m.kv_tokens = int64_t{m.kv_blocks} * g.block_size;
  add_step(steps, "memory", "KV pool", "blocks of " + std::to_string(g.block_size) + " tokens in the budget (kv_layout)",
           gib(std::max<int64_t>(0, m.kv_budget_bytes)) + " / " + with_commas(kv::bytes_per_block(g)) + " B per block",
           with_commas(m.kv_blocks) + " blocks = " + with_commas(m.kv_tokens) + " tokens", m.kv_blocks);
  int64_t blocks_per_seq = (r.context + g.block_size - 1) / g.block_size;
  if (r.kv_window > 0) {
    // Blocks wholly behind the window and holding no sink go back to the pool (the engine's
    // scheduler, kv::BlockPool::release_behind): a decoding sequence keeps the sink blocks and
    // the <= W + 1 positions (p - W, p], which touch at most ceil(W / block) + 1 blocks.
    const int64_t bs = g.block_size;
    const int64_t window_blocks = (r.kv_sinks + bs - 1) / bs + (r.kv_window + bs - 1) / bs + 1;
    add_step(steps, "memory", "blocks per sequence (window)", "ceil(sinks / block) + ceil(window / block) + 1",
             "ceil(" + with_commas(r.kv_sinks) + " / " + std::to_string(bs) + ") + ceil(" + with_commas(r.kv_window) +
                 " / " + std::to_string(bs) + ") + 1, against ceil(context / block) = " + with_commas(blocks_per_seq),
             with_commas(std::min(blocks_per_seq, window_blocks)) + " blocks", static_cast<double>(std::min(blocks_per_seq, window_blocks)));
    blocks_per_seq = std::min(blocks_per_seq, window_blocks);
  }
  m.needed_blocks = r.concurrency * blocks_per_seq;
  m.needed_kv_bytes = kv::arena_bytes(g, static_cast<int32_t>(std::min<int64_t>(m.needed_blocks, INT32_MAX)));
  m.total_needed_bytes = m.weights_bytes + m.workspace_bytes + m.overhead_bytes + m.needed_kv_bytes;
  m.fits = m.kv_budget_bytes > 0 && m.kv_blocks >= m.needed_blocks;
  add_step(steps, "memory", "needed", "concurrency x blocks per sequence",
           with_commas(r.concurrency) + " x " + with_commas(blocks_per_seq) + " = " + with_commas(m.needed_blocks) +
               " blocks (" + gib(m.needed_kv_bytes) + "); total " + gib(m.total_needed_bytes) + " of " +
               gib(m.usable_bytes),
           m.fits ? "fits" : "does not fit", m.fits ? 1 : 0);
  m.max_context_batch1 = std::min(m.kv_tokens, c.max_position_embeddings);
  m.max_context_limited_by_model = m.kv_tokens >= c.max_position_embeddings;
  if (r.kv_window > 0 && m.kv_blocks >= blocks_per_seq) {  // a window that fits runs any length
    m.max_context_batch1 = c.max_position_embeddings;
    m.max_context_limited_by_model = true;
  }
  add_step(steps, "memory", "max context (batch 1)", "min(pool tokens, max_position_embeddings)",
           "min(" + with_commas(m.kv_tokens) + ", " + with_commas(c.max_position_embeddings) + ")",
           with_commas(m.max_context_batch1) + " tokens", m.max_context_batch1);
  m.max_concurrency = blocks_per_seq > 0 ? m.kv_blocks / blocks_per_seq : 0;
  add_step(steps, "memory", "max concurrency at context", "pool blocks / blocks per sequence",
           with_commas(m.kv_blocks) + " / " + with_commas(blocks_per_seq), with_commas(m.max_concurrency),
           m.max_concurrency);
  return m;
}

}  // namespace

// Defined in plan_speed.cpp.
SpeedPlan speed_plan(const PlanRequest& r, const SpeedModel& sm, const MemoryPlan& m, std::vector<PlanStep>* steps);
CostPlan cost_plan(const PlanRequest& r, const SpeedPlan& s, std::vector<PlanStep>* steps);

namespace {

TpOption tp_option(const PlanRequest& r, const WeightSummary& w, int n) {
  TpOption o;
  o.n_gpus = n;
  o.why_not = tp_obstacle(r.model.config, n);
  o.possible = o.why_not.empty();
  if (!o.possible) return o;
  const MemoryPlan m = memory_plan(r, w, n, nullptr);
  o.fits = m.fits;
  o.max_context_batch1 = m.max_context_batch1;
  o.max_concurrency = m.max_concurrency;
  const SpeedModel sm = make_speed_model(r.model.config, w, r.gpu, n, static_cast<double>(m.kv_bytes_per_token),
                                         r.quant.precision, r.eff);
  o.decode_b1_tok_per_s = sm.decode(1, static_cast<double>(attended_kv_tokens(r, r.context))).tok_per_s();
  o.usd_per_m_tokens_b1 = r.price_per_hour * n / (o.decode_b1_tok_per_s * 3600.0) * 1e6;
  return o;
}

// Calibration still applies across a mismatch, but the reader should know.
void note_bench_mismatch(const PlanRequest& r, const BenchResults& b, std::vector<std::string>* notes) {
  bool gpu_ok = b.gpu.empty() || b.gpu == r.gpu.name;
  for (const std::string& a : r.gpu.aliases) gpu_ok = gpu_ok || b.gpu == a;
  if (!gpu_ok) notes->push_back("measured on GPU '" + b.gpu + "', planning for '" + r.gpu.name + "'");
  const std::string prec = precision_name(r.quant.precision);
  if (!b.precision.empty() && b.precision != prec) {
    notes->push_back("measured at precision '" + b.precision + "', planning for '" + prec + "'");
  }
  if (b.gpus != r.n_gpus) {
    notes->push_back("measured on " + std::to_string(b.gpus) + " GPU(s), planning for " + std::to_string(r.n_gpus));
  }
  if (!b.model.empty() && b.model.find(r.model.name) == std::string::npos &&
      r.model.name.find(b.model) == std::string::npos) {
    notes->push_back("measured model '" + b.model + "', planning for '" + r.model.name + "'");
  }
}

}  // namespace

Result<Plan> make_plan(PlanRequest req) {
  FRUGAL_RETURN_IF_ERROR(resolve_defaults(req));
  const std::string obstacle = tp_obstacle(req.model.config, req.n_gpus);
  if (!obstacle.empty()) return invalid_argument("--gpus " + std::to_string(req.n_gpus) + ": " + obstacle);
  Plan p;
  FRUGAL_ASSIGN_OR_RETURN(p.weights, summarize_weights(req.model.config, req.quant));
  p.memory = memory_plan(req, p.weights, req.n_gpus, &p.steps);
  SpeedModel sm = make_speed_model(req.model.config, p.weights, req.gpu, req.n_gpus,
                                   static_cast<double>(p.memory.kv_bytes_per_token), req.quant.precision, req.eff);
  sm.max_batched_tokens = req.over.max_batched_tokens;
  if (!req.calibrate_path.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(BenchResults bench, load_bench_results(req.calibrate_path));
    p.calibration = calibrate(sm, bench);
    note_bench_mismatch(req, bench, &p.calibration->notes);
    req.eff = p.calibration->after;
    sm.eff = req.eff;
  }
  p.req = req;
  p.speed = speed_plan(req, sm, p.memory, &p.steps);
  p.cost = cost_plan(req, p.speed, &p.steps);
  for (int n : kTpCandidates) {
    p.tp_options.push_back(tp_option(req, p.weights, n));
    if (p.smallest_fitting_gpus == 0 && p.tp_options.back().fits) p.smallest_fitting_gpus = n;
  }
  if (!p.memory.fits) {
    p.notes.push_back(p.smallest_fitting_gpus > 0
                          ? "does not fit on " + std::to_string(req.n_gpus) + " GPU(s); fits on " +
                                std::to_string(p.smallest_fitting_gpus) + " (--gpus " +
                                std::to_string(p.smallest_fitting_gpus) + ")"
                          : "does not fit on up to 8 GPUs at this precision, context and concurrency");
  }
  if (req.n_gpus > 1) p.notes.push_back("weights per GPU = the largest rank's shard as the engine cuts it (docs/parallelism.md: embedding and lm_head split by vocab, routed experts spread over the ranks, norms replicated)");
  return p;
}

}  // namespace frugal::plan
