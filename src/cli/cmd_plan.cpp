// `frugal plan`: memory, speed and cost prediction (src/plan, docs/plan.md).
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "kv/kv_geometry.h"
#include "plan/compare.h"
#include "plan/planner.h"

namespace frugal::cli {
namespace {

struct PlanArgs {
  std::string model;
  std::string gpu;
  int gpus = 1;
  std::string precision = "bf16";
  int64_t group_size = 128;
  bool int4_symmetric = false;
  int64_t fp8_block = 128;
  std::string lm_head = "bf16";
  std::string kv_dtype = "bf16";
  int64_t context = 0;
  int64_t concurrency = 1;
  bool concurrency_given = false;
  int64_t prompt_len = 0;
  int64_t kv_window = 0;
  int64_t kv_sinks = 0;
  double price = -1;
  double utilization = 0.90;
  int64_t max_batched_tokens = 8192;
  std::string catalog;
  std::string calibrate;
  bool json = false;
  // --compare
  bool compare = false;
  int gpus_max = 8;
  std::string rank_by = "rent";
  // ownership cost (plan/ownership.h)
  double purchase_usd = -1;
  double years = 3;
  double usd_per_kwh = 0.15;
  double own_utilization = 1.0;
  double ops_usd_per_year = 0;
  double power_w = -1;
};

plan::OwnershipInputs ownership_inputs(const PlanArgs& a) {
  return plan::OwnershipInputs{.purchase_usd = a.purchase_usd,
                               .years = a.years,
                               .usd_per_kwh = a.usd_per_kwh,
                               .utilization = a.own_utilization,
                               .ops_usd_per_year = a.ops_usd_per_year,
                               .power_w = a.power_w};
}

Result<plan::PlanRequest> build_request(const PlanArgs& a) {
  plan::PlanRequest r;
  const std::string catalog = a.catalog.empty() ? plan::default_catalog_dir() : a.catalog;
  FRUGAL_ASSIGN_OR_RETURN(r.model, plan::resolve_model(a.model, catalog));
  FRUGAL_ASSIGN_OR_RETURN(auto gpus, plan::load_gpu_catalog(catalog));
  FRUGAL_ASSIGN_OR_RETURN(r.gpu, plan::find_gpu(gpus, a.gpu));
  r.n_gpus = a.gpus;
  FRUGAL_ASSIGN_OR_RETURN(r.quant.precision, plan::parse_precision(a.precision));
  r.quant.group_size = a.group_size;
  r.quant.int4_zero_point = !a.int4_symmetric;
  r.quant.fp8_block = a.fp8_block;
  if (a.lm_head != "bf16" && a.lm_head != "int8") {
    return invalid_argument("--lm-head: expected bf16 or int8, got '" + a.lm_head + "'");
  }
  r.quant.lm_head_int8 = a.lm_head == "int8";
  auto kv_dtype = kv::parse_kv_dtype(a.kv_dtype);
  if (!kv_dtype.is_ok()) return kv_dtype.status().with_context("--kv-dtype");
  r.kv_dtype = *kv_dtype;
  r.context = a.context;
  r.concurrency = a.concurrency;
  r.prompt_len = a.prompt_len;
  r.kv_window = a.kv_window;
  r.kv_sinks = a.kv_sinks;
  r.price_per_hour = a.price;
  if (!(a.utilization > 0 && a.utilization <= 1)) {
    return invalid_argument("--gpu-memory-utilization: expected a fraction in (0, 1]");
  }
  r.over.gpu_memory_utilization = a.utilization;
  if (a.max_batched_tokens < 1) return invalid_argument("--max-batched-tokens: expected >= 1");
  r.over.max_batched_tokens = a.max_batched_tokens;
  r.calibrate_path = a.calibrate;
  r.own = ownership_inputs(a);
  return r;
}

int run_compare(const PlanArgs& a) {
  plan::CompareRequest r;
  const std::string catalog = a.catalog.empty() ? plan::default_catalog_dir() : a.catalog;
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "frugal plan --compare: %s\n", s.to_string().c_str());
    return 2;
  };
  auto model = plan::resolve_model(a.model, catalog);
  if (!model.is_ok()) return fail(model.status());
  r.model = *model;
  auto gpus = plan::load_gpu_catalog(catalog);
  if (!gpus.is_ok()) return fail(gpus.status());
  r.gpus = *gpus;
  if (!a.gpu.empty()) {
    auto g = plan::find_gpu(*gpus, a.gpu);
    if (!g.is_ok()) return fail(g.status());
    r.gpus = {*g};
  }
  r.gpus_max = a.gpus_max;
  auto kv_dtype = kv::parse_kv_dtype(a.kv_dtype);
  if (!kv_dtype.is_ok()) return fail(kv_dtype.status().with_context("--kv-dtype"));
  r.kv_dtype = *kv_dtype;
  r.quant.group_size = a.group_size;
  r.quant.int4_zero_point = !a.int4_symmetric;
  r.quant.fp8_block = a.fp8_block;
  r.quant.lm_head_int8 = a.lm_head == "int8";
  r.context = a.context;
  r.concurrency = a.concurrency_given ? a.concurrency : 0;
  r.own = ownership_inputs(a);
  auto rank = plan::parse_rank_by(a.rank_by);
  if (!rank.is_ok()) return fail(rank.status());
  r.rank_by = *rank;
  r.over.gpu_memory_utilization = a.utilization;
  r.over.max_batched_tokens = a.max_batched_tokens;
  auto c = plan::compare_platforms(std::move(r));
  if (!c.is_ok()) return fail(c.status());
  if (a.json) {
    std::printf("%s\n", plan::comparison_to_json(*c).dump(2).c_str());
  } else {
    std::fputs(plan::format_comparison_text(*c).c_str(), stdout);
  }
  return 0;
}

int run_plan(const PlanArgs& a) {
  if (a.compare) return run_compare(a);
  if (a.gpu.empty()) {
    std::fprintf(stderr, "frugal plan: --gpu is required (or --compare to rank every catalog GPU)\n");
    return 2;
  }
  auto req = build_request(a);
  if (!req.is_ok()) {
    std::fprintf(stderr, "frugal plan: %s\n", req.status().to_string().c_str());
    return 2;
  }
  auto plan = plan::make_plan(std::move(req).value());
  if (!plan.is_ok()) {
    std::fprintf(stderr, "frugal plan: %s\n", plan.status().to_string().c_str());
    return 2;
  }
  if (a.json) {
    std::printf("%s\n", plan::plan_to_json(*plan).dump(2).c_str());
  } else {
    std::fputs(plan::format_plan_text(*plan).c_str(), stdout);
  }
  return 0;
}

}  // namespace

void register_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "Predict memory, speed and cost of a model on a GPU (docs/plan.md)");
  cmd->add_option("--model", args->model, "catalog name, model directory or config.json")->required();
  cmd->add_option("--gpu", args->gpu, "GPU from the catalog, e.g. rtx-4090, a100-80gb, h100-sxm, h200 (with --compare: only this GPU)");
  cmd->add_option("--gpus", args->gpus, "GPUs, tensor parallel")->capture_default_str();
  cmd->add_option("--precision", args->precision, "weights: bf16|fp8|int8|int4|nf4 (the engine's formats: docs/weight_formats.md)")->capture_default_str();
  cmd->add_option("--group-size", args->group_size, "int4 group size")->capture_default_str();
  cmd->add_flag("--int4-symmetric", args->int4_symmetric, "int4 without zero points");
  cmd->add_option("--fp8-block", args->fp8_block, "fp8 scale block (0: one scale per tensor)")->capture_default_str();
  cmd->add_option("--lm-head", args->lm_head, "lm_head storage: bf16|int8")->capture_default_str();
  cmd->add_option("--kv-dtype,--kv-cache-dtype", args->kv_dtype, "KV cache: bf16|fp8|int8")->capture_default_str();
  cmd->add_option("--kv-window", args->kv_window, "attend to (and keep blocks of) the last W tokens only (0 = off)");
  cmd->add_option("--kv-sinks", args->kv_sinks, "with --kv-window: also the first S tokens");
  cmd->add_option("--context", args->context, "tokens per sequence (default min(4096, model max))");
  cmd->add_option("--concurrency", args->concurrency, "sequences decoding together (--compare: default each configuration's max batch)")
      ->capture_default_str()
      ->each([args](const std::string&) { args->concurrency_given = true; });
  cmd->add_option("--prompt-len", args->prompt_len, "prompt length for TTFT (default min(1024, context))");
  cmd->add_option("--price-per-hour", args->price, "USD per GPU-hour (default: the catalog's)");
  cmd->add_option("--gpu-memory-utilization", args->utilization, "fraction of GPU memory the engine may use")
      ->capture_default_str();
  cmd->add_option("--max-batched-tokens", args->max_batched_tokens, "prefill chunk the workspace is sized for")
      ->capture_default_str();
  cmd->add_option("--catalog", args->catalog, "catalog directory (default data/catalog or $FRUGAL_CATALOG)");
  cmd->add_option("--calibrate", args->calibrate, "frugal bench JSON results to fit efficiency factors to");
  cmd->add_flag("--json", args->json, "print every figure as JSON");
  cmd->add_flag("--compare", args->compare, "every catalog GPU x count x precision that fits, ranked by $/1M tokens");
  cmd->add_option("--gpus-max", args->gpus_max, "--compare: largest GPU count (1, 2, 4, 8)")->capture_default_str();
  cmd->add_option("--rank-by", args->rank_by, "--compare: rent|own $/1M output tokens")->capture_default_str();
  cmd->add_option("--purchase-usd", args->purchase_usd, "owned: price per GPU (default: the catalog's list price)");
  cmd->add_option("--years", args->years, "owned: amortization years")->capture_default_str();
  cmd->add_option("--usd-per-kwh", args->usd_per_kwh, "owned: energy price")->capture_default_str();
  cmd->add_option("--utilization", args->own_utilization, "owned: fraction of hours the GPU serves, (0, 1]")
      ->capture_default_str();
  cmd->add_option("--ops-usd-per-year", args->ops_usd_per_year, "owned: operations cost per GPU per year")
      ->capture_default_str();
  cmd->add_option("--power-w", args->power_w, "owned: power per GPU while serving (default: the catalog's TDP)");
  cmd->callback([args] { set_exit_code(run_plan(*args)); });
}

}  // namespace frugal::cli
