#include "plan/compare.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "kv/kv_geometry.h"
#include "plan/plan_format.h"

namespace frugal::plan {
namespace {

constexpr int kCounts[] = {1, 2, 4, 8};
constexpr int64_t kMaxBatch = 4096;  // as the planner's sweep

PlanRequest plan_request(const CompareRequest& c, const GpuSpec& gpu, int n, WeightPrecision p, int64_t batch) {
  PlanRequest r;
  r.model = c.model;
  r.gpu = gpu;
  r.n_gpus = n;
  r.quant = c.quant;
  r.quant.precision = p;
  r.kv_dtype = c.kv_dtype;
  r.context = c.context;
  r.concurrency = batch;
  r.eff = c.eff;
  r.over = c.over;
  return r;
}

// The largest batch that fits: the pool's max concurrency at batch 1, lowered until the logits
// workspace of that batch leaves room for its KV (the workspace grows with the batch).
Result<Plan> plan_at_max_batch(const CompareRequest& c, const GpuSpec& gpu, int n, WeightPrecision p) {
  FRUGAL_ASSIGN_OR_RETURN(Plan one, make_plan(plan_request(c, gpu, n, p, 1)));
  if (!one.memory.fits) return one;
  int64_t b = std::min(one.memory.max_concurrency, kMaxBatch);
  while (b > 1) {
    FRUGAL_ASSIGN_OR_RETURN(Plan at, make_plan(plan_request(c, gpu, n, p, b)));
    if (at.memory.fits) return at;
    b = std::min(b - 1, at.memory.max_concurrency);
  }
  return one;
}

CompareRow make_row(const Plan& p, const OwnershipInputs& own) {
  CompareRow row;
  row.gpu = p.req.gpu.name;
  row.gpu_display = p.req.gpu.display_name;
  row.n_gpus = p.req.n_gpus;
  row.precision = precision_name(p.req.quant.precision);
  if (p.req.quant.precision == WeightPrecision::kInt4) row.precision += " g" + std::to_string(p.req.quant.group_size);
  row.weights_gib_per_gpu = static_cast<double>(p.memory.weights_bytes) / (1024.0 * 1024.0 * 1024.0);
  row.max_batch = p.memory.max_concurrency;
  row.batch = p.req.concurrency;
  row.tok_per_s = p.speed.at_concurrency.tok_per_s();
  row.tok_per_s_per_gpu = row.tok_per_s / row.n_gpus;
  row.decode_b1_tok_per_s = p.speed.decode_b1.tok_per_s();
  row.rent_per_gpu_hour = p.req.price_per_hour;
  row.usd_per_m_rent = rent_usd_per_m_tokens(row.rent_per_gpu_hour, row.n_gpus, row.tok_per_s);
  row.own = ownership_cost(own, row.n_gpus, row.tok_per_s);
  return row;
}

}  // namespace

Result<RankBy> parse_rank_by(const std::string& s) {
  if (s == "rent") return RankBy::kRent;
  if (s == "own") return RankBy::kOwn;
  return invalid_argument("--rank-by: expected rent or own, got '" + s + "'");
}

const char* rank_by_name(RankBy r) {
  switch (r) {
    case RankBy::kRent: return "rent";
    case RankBy::kOwn: return "own";
  }
  return "?";
}

Result<Comparison> compare_platforms(CompareRequest req) {
  if (req.gpus_max < 1) return invalid_argument("--gpus-max: expected >= 1, got " + std::to_string(req.gpus_max));
  if (req.concurrency < 0) return invalid_argument("--concurrency: expected >= 1");
  if (req.gpus.empty()) return invalid_argument("the GPU catalog is empty");
  if (req.context == 0) req.context = std::min<int64_t>(4096, req.model.config.max_position_embeddings);
  Comparison out;
  for (const GpuSpec& gpu : req.gpus) {
    auto own = resolve_ownership(req.own, gpu);
    if (!own.is_ok()) return own.status();
    for (int n : kCounts) {
      if (n > req.gpus_max) break;
      for (WeightPrecision p : req.precisions) {
        auto plan = req.concurrency > 0 ? make_plan(plan_request(req, gpu, n, p, req.concurrency))
                                        : plan_at_max_batch(req, gpu, n, p);
        if (!plan.is_ok()) {
          // make_plan refuses only counts the heads do not split over, or a precision the
          // model's shapes do not admit (named in the message).
          if (plan.status().message().find("--gpus") != std::string::npos) {
            ++out.n_not_splitting;
          } else {
            out.notes.push_back(gpu.name + " x " + std::to_string(n) + " " + precision_name(p) + ": " +
                                plan.status().message());
          }
          continue;
        }
        ++out.n_tried;
        if (!plan->memory.fits) {
          ++out.n_not_fitting;
          continue;
        }
        out.rows.push_back(make_row(*plan, *own));
      }
    }
  }
  out.req = std::move(req);
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [&](const CompareRow& a, const CompareRow& b) { return out.value(a) < out.value(b); });
  if (out.req.concurrency == 0) {
    out.notes.push_back("each configuration at its max batch (capped at " + with_commas(kMaxBatch) +
                        "), every sequence at the full context: the cheapest steady state");
  }
  return out;
}

std::string format_comparison_text(const Comparison& c) {
  const CompareRequest& r = c.req;
  std::ostringstream os;
  os << fmt::format("frugal plan --compare: {} (context {}, KV {}, {}), ranked by {} $/1M output tokens\n",
                    r.model.name, with_commas(r.context), kv::kv_dtype_label(r.kv_dtype),
                    r.concurrency > 0 ? "concurrency " + with_commas(r.concurrency) : "max batch",
                    r.rank_by == RankBy::kOwn ? "owned" : "rented");
  os << fmt::format("  own: {} years, ${}/kWh, utilization {}, ops ${}/year per GPU, purchase {}, power {}\n",
                    fixed(r.own.years, 1), fixed(r.own.usd_per_kwh, 3), fixed(r.own.utilization, 2),
                    fixed(r.own.ops_usd_per_year, 0),
                    r.own.purchase_usd < 0 ? std::string("catalog list price") : usd(r.own.purchase_usd),
                    r.own.power_w < 0 ? std::string("catalog TDP") : fixed(r.own.power_w, 0) + " W");
  os << fmt::format("  {:>4} {:<14} {:>4} {:<9} {:>10} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "rank",
                    "gpu", "n", "weights", "GiB/GPU", "max batch", "batch", "tok/s", "tok/s/GPU", "$/h rent",
                    "$/1M rent", "$/1M own");
  int rank = 1;
  for (const CompareRow& row : c.rows) {
    os << fmt::format("  {:>4} {:<14} {:>4} {:<9} {:>10.1f} {:>9} {:>7} {:>10.0f} {:>10.0f} {:>10} {:>10} {:>10}\n",
                      rank++, row.gpu, row.n_gpus, row.precision, row.weights_gib_per_gpu, with_commas(row.max_batch),
                      with_commas(row.batch), row.tok_per_s, row.tok_per_s_per_gpu,
                      usd(row.rent_per_gpu_hour * row.n_gpus), usd(row.usd_per_m_rent), usd(row.own.usd_per_m_tokens));
  }
  if (c.rows.empty()) os << "  no configuration fits\n";
  os << fmt::format("  {} configurations fit; {} do not fit and are not listed; {} GPU counts the heads do not split over\n",
                    c.rows.size(), c.n_not_fitting, c.n_not_splitting);
  os << "  $/1M rent = $/GPU-hour x N / (tok/s x 3600) x 1e6; $/1M own = N x (purchase / (years x 8760) + ops / 8760"
        " + W / 1000 x utilization x $/kWh) / (tok/s x 3600 x utilization) x 1e6\n";
  for (const std::string& n : c.notes) os << "  note: " << n << "\n";
  return os.str();
}

nlohmann::json comparison_to_json(const Comparison& c) {
  const CompareRequest& r = c.req;
  nlohmann::json j;
  j["model"] = r.model.name;
  j["context"] = r.context;
  j["kv_dtype"] = kv::kv_dtype_label(r.kv_dtype);
  j["concurrency"] = r.concurrency;  // 0: max batch per configuration
  j["gpus_max"] = r.gpus_max;
  j["rank_by"] = rank_by_name(r.rank_by);
  j["ownership"] = {{"years", r.own.years},
                    {"usd_per_kwh", r.own.usd_per_kwh},
                    {"utilization", r.own.utilization},
                    {"ops_usd_per_year", r.own.ops_usd_per_year},
                    {"purchase_usd", r.own.purchase_usd},
                    {"power_w", r.own.power_w}};
  j["n_fitting"] = c.rows.size();
  j["n_not_fitting"] = c.n_not_fitting;
  j["n_not_splitting"] = c.n_not_splitting;
  j["notes"] = c.notes;
  nlohmann::json rows = nlohmann::json::array();
  int rank = 1;
  for (const CompareRow& row : c.rows) {
    rows.push_back({{"rank", rank++},
                    {"gpu", row.gpu},
                    {"gpu_display", row.gpu_display},
                    {"n_gpus", row.n_gpus},
                    {"precision", row.precision},
                    {"weights_gib_per_gpu", row.weights_gib_per_gpu},
                    {"max_batch", row.max_batch},
                    {"batch", row.batch},
                    {"tok_per_s", row.tok_per_s},
                    {"tok_per_s_per_gpu", row.tok_per_s_per_gpu},
                    {"decode_b1_tok_per_s", row.decode_b1_tok_per_s},
                    {"rent_usd_per_gpu_hour", row.rent_per_gpu_hour},
                    {"usd_per_m_tokens_rent", row.usd_per_m_rent},
                    {"usd_per_m_tokens_own", row.own.usd_per_m_tokens},
                    {"own", {{"purchase_usd", row.own.purchase_usd},
                             {"purchase_source", row.own.purchase_source},
                             {"power_w", row.own.power_w},
                             {"power_source", row.own.power_source},
                             {"capex_usd_per_hour", row.own.capex_per_hour},
                             {"ops_usd_per_hour", row.own.ops_per_hour},
                             {"energy_usd_per_hour", row.own.energy_per_hour},
                             {"usd_per_gpu_hour", row.own.usd_per_hour},
                             {"kwh_per_m_tokens", row.own.kwh_per_m_tokens}}}});
  }
  j["rows"] = rows;
  return j;
}

}  // namespace frugal::plan
