// `frugal report`: the cost-effectiveness table per precision (src/report, docs/report.md).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "report/report.h"

namespace frugal::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted.store(true); }

struct ReportArgs {
  report::ReportOptions o;
  std::string precisions;
  std::string dummy_config;
  std::vector<std::string> checkpoints;
};

int run_report_cmd(ReportArgs& a) {
  if (!a.dummy_config.empty()) {
    a.o.model_dir = a.dummy_config;
    a.o.dummy_weights = true;
  } else if (a.o.model_dir.empty()) {
    a.o.model_dir = std::string(FRUGAL_SOURCE_ROOT) + "/models/reference-qwen2-20m";
  }
  if (a.o.prefill_len < 0 || a.o.decode_tokens < 0 || a.o.reps < 0) {
    std::fprintf(stderr, "frugal report: --prefill-len, --decode-tokens and --bench-reps take positive counts\n");
    return 2;
  }
  if (a.o.calib_tokens < 0) {
    std::fprintf(stderr, "frugal report: --calib-tokens %lld: expected a positive count\n",
                 static_cast<long long>(a.o.calib_tokens));
    return 2;
  }
  if (!a.o.calib_file.empty() && !std::filesystem::exists(a.o.calib_file)) {
    std::fprintf(stderr, "frugal report: --calib %s: no such file\n", a.o.calib_file.c_str());
    return 2;
  }
  if (!a.precisions.empty()) {
    auto p = report::parse_precisions(a.precisions);
    if (!p.is_ok()) {
      std::fprintf(stderr, "frugal report: %s\n", p.status().to_string().c_str());
      return 2;
    }
    a.o.precisions = *p;
  }
  auto ck = report::parse_checkpoints(a.checkpoints);
  if (!ck.is_ok()) {
    std::fprintf(stderr, "frugal report: %s\n", ck.status().to_string().c_str());
    return 2;
  }
  a.o.checkpoints = *ck;
  // Ctrl-C finishes the row in progress, then writes the report with the rest marked not run.
  std::signal(SIGINT, on_sigint);
  a.o.should_stop = [] { return g_interrupted.load(); };
  a.o.progress = [](const std::string& s) { std::fprintf(stderr, "frugal report: %s\n", s.c_str()); };
  auto r = report::run_report(a.o);
  std::signal(SIGINT, SIG_DFL);
  if (!r.is_ok()) {
    std::fprintf(stderr, "frugal report: %s\n", r.status().to_string().c_str());
    return 2;
  }
  std::fputs(report::format_report_text(*r).c_str(), stdout);
  std::printf("report: %s/report.html (also report.md, report.json)\n", a.o.out_dir.c_str());
  return r->complete ? 0 : 3;
}

}  // namespace

void register_report(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "Speed, memory, cost and quality per precision on one page (docs/report.md)");
  cmd->add_option("--model", a->o.model_dir, "HF model directory (default: models/reference-qwen2-20m)");
  cmd->add_option("--dummy-weights", a->dummy_config, "config.json: random weights of this architecture (speed rows)");
  cmd->add_option("--precisions", a->precisions, "comma list: bf16,fp8,int8,int4-awq,int4-gptq,int4-rtn,nf4");
  cmd->add_option("--checkpoint", a->checkpoints, "reuse an existing checkpoint for a row: PRECISION=DIR (repeatable)");
  cmd->add_option("--quant-cache", a->o.quant_cache, "where quantized checkpoints are made and reused (default OUT/checkpoints)");
  cmd->add_option("--calib", a->o.calib_file, "AWQ / GPTQ calibration text (default data/calib/war-and-peace-ch1-3.txt)");
  cmd->add_option("--calib-tokens", a->o.calib_tokens, "calibration tokens at most (default 2048; 512 with --quick)");
  cmd->add_option("--group-size", a->o.group_size, "group size of the int4 rows (AWQ, GPTQ, RTN)")->capture_default_str();
  cmd->add_option("--lm-head", a->o.lm_head,
                  "untied lm_head of the quantized rows: bf16 | int8 (int8, int4-gptq and int4-rtn checkpoints; every "
                  "quantized row with --dummy-weights)")
      ->capture_default_str();
  cmd->add_option("--gpu", a->o.gpu, "catalog GPU: price, TDP and the planner's prediction");
  cmd->add_option("--price-per-hour", a->o.price_per_hour, "USD per GPU-hour (default: the catalog's)");
  cmd->add_option("--text", a->o.text_file, "perplexity text for the quality columns");
  cmd->add_option("--mc", a->o.mc_dir, "multiple-choice questions (MMLU-style) for the quality columns");
  cmd->add_flag("--quick", a->o.quick, "CI-sized runs");
  cmd->add_option("--out", a->o.out_dir, "output directory (report.md, report.json, report.html)")->required();
  cmd->add_option("--device", a->o.device, "cpu | cuda | cuda:N")->capture_default_str();
  cmd->add_option("--threads", a->o.threads, "CPU threads (0 = all)");
  cmd->add_option("--concurrency", a->o.concurrency, "decode concurrency sweep, e.g. 1,4,16,64")->delimiter(',');
  cmd->add_option("--prefill-len", a->o.prefill_len, "prefill point's prompt tokens (default: by device, docs/report.md)");
  cmd->add_option("--decode-tokens", a->o.decode_tokens, "tokens decoded per sweep point (default: by device)");
  cmd->add_option("--bench-reps", a->o.reps, "timed repetitions per bench point (default: by device)");
  cmd->add_option("--catalog", a->o.catalog, "catalog directory (default data/catalog)");
  cmd->add_option("--purchase-usd", a->o.own.purchase_usd, "owned: price per GPU (default: the catalog's)");
  cmd->add_option("--years", a->o.own.years, "owned: amortization years")->capture_default_str();
  cmd->add_option("--usd-per-kwh", a->o.own.usd_per_kwh, "owned: energy price")->capture_default_str();
  cmd->add_option("--utilization", a->o.own.utilization, "owned: fraction of hours serving")->capture_default_str();
  cmd->add_option("--ops-usd-per-year", a->o.own.ops_usd_per_year, "owned: operations per GPU per year")
      ->capture_default_str();
  cmd->add_option("--power-w", a->o.own.power_w, "owned: power while serving (default: NVML, else the catalog TDP)");
  cmd->callback([a] { set_exit_code(run_report_cmd(*a)); });
}

}  // namespace frugal::cli
