// Terminal table, markdown and JSON of a Report.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "report/report.h"

namespace frugal::report {
namespace {

std::string opt(const std::optional<double>& v, const char* f = "{:.4f}") {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("-");
}

std::string ci(const Est& e, int decimals) {
  return fmt::format("{:.{}f} [{:.{}f}, {:.{}f}]", e.value, decimals, e.ci_lo, decimals, e.ci_hi, decimals);
}

nlohmann::json est_json(const Est& e) { return {{"value", e.value}, {"ci95", {e.ci_lo, e.ci_hi}}}; }

nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

std::string format_report_text(const Report& r) {
  std::ostringstream os;
  os << fmt::format("frugal report: {} on {}{}\n", r.model, r.device, r.quick ? " (--quick)" : "");
  os << fmt::format("  prediction: {}; price: {}\n", r.prediction_gpu,
                    r.price_per_hour >= 0 ? fmt::format("${:.4f}/h ({})", r.price_per_hour, r.price_source)
                                          : std::string("none"));
  os << fmt::format("  {:<10} {:<7} {:>9} {:>9} {:>22} {:>10} {:>20} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8}\n",
                    "precision", "status", "weights", "KV B/tok", "decode b1 tok/s [CI]", "pred", "prefill tok/s [CI]",
                    "best tok/s", "$/1M rent", "$/1M own", "PPL", "KLD", "MMLU");
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") {
      os << fmt::format("  {:<10} {:<7} {}\n", row.precision, row.status, row.why);
      continue;
    }
    os << fmt::format(
        "  {:<10} {:<7} {:>7.3f}Gi {:>9.0f} {:>22} {:>10.1f} {:>20} {:>10.1f} {:>10} {:>10} {:>8} {:>8} {:>8}\n",
        row.precision, row.status, row.weights_gib, row.kv_bytes_per_token, ci(row.decode_b1_tok_per_s, 1),
        row.pred_decode_b1_tok_per_s, ci(row.prefill_tok_per_s, 0), row.best_tok_per_s, opt(row.usd_per_m_rent),
        opt(row.usd_per_m_own), opt(row.ppl, "{:.2f}"), opt(row.kld_mean), opt(row.mmlu, "{:.3f}"));
  }
  for (const std::string& s : r.recommendations) os << "  -> " << s << "\n";
  for (const std::string& n : r.notes) os << "  note: " << n << "\n";
  return os.str();
}

std::string format_report_markdown(const Report& r) {
  std::ostringstream os;
  os << "# frugal report: " << r.model << "\n\n";
  os << "- device: " << r.device << (r.quick ? " (--quick)" : "") << "\n";
  os << "- prediction: " << r.prediction_gpu << "\n";
  if (r.price_per_hour >= 0) os << fmt::format("- price: ${:.4f}/GPU-hour ({})\n", r.price_per_hour, r.price_source);
  if (r.own_why.empty()) {
    os << fmt::format("- owned: ${:.0f} over {:.1f} years, {:.0f} W ({}), ${:.3f}/kWh, utilization {:.2f}, ops ${:.0f}/year\n",
                      r.own.purchase_usd, r.own.years, r.own.power_w, r.own.power_source, r.own.usd_per_kwh,
                      r.own.utilization, r.own.ops_usd_per_year);
  } else {
    os << "- owned cost: not computed: " << r.own_why << "\n";
  }
  os << "- started " << r.started_utc << ", finished " << r.finished_utc << (r.complete ? "" : " (interrupted)")
     << "\n\n";
  os << "| precision | status | weights GiB (pred) | KV B/token (pred) | KV capacity tokens | decode b1 tok/s [95% CI] "
        "(pred) | prefill tok/s [95% CI] (pred) | TTFT ms [CI] | ITL p50 / p99 ms | best tok/s (batch) | $/1M rent "
        "| $/1M own | kWh/1M | PPL | dPPL | KLD mean / p99 | same top-1 | MMLU |\n";
  os << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") {
      os << "| " << row.precision << " | " << row.status << ": " << row.why
         << " | - | - | - | - | - | - | - | - | - | - | - | - | - | - | - | - |\n";
      continue;
    }
    os << fmt::format(
        "| {} | ok | {:.4f} ({:.4f}) | {:.0f} ({:.0f}) | {} | {} ({:.1f}) | {} ({}) | {} | {:.3f} / {:.3f} | {:.1f} "
        "({}) | {} | {} | {} | {} | {} | {} / {} | {} | {} |\n",
        row.precision, row.weights_gib, row.pred_weights_gib, row.kv_bytes_per_token, row.pred_kv_bytes_per_token,
        row.kv_capacity_tokens, ci(row.decode_b1_tok_per_s, 1), row.pred_decode_b1_tok_per_s,
        ci(row.prefill_tok_per_s, 0),
        row.pred_prefill_available ? fmt::format("{:.0f}", row.pred_prefill_tok_per_s) : std::string("-"),
        ci(row.ttft_ms, 2), row.itl_ms_p50.value, row.itl_ms_p99.value, row.best_tok_per_s, row.best_batch,
        opt(row.usd_per_m_rent), opt(row.usd_per_m_own), opt(row.kwh_per_m), opt(row.ppl), opt(row.delta_ppl),
        opt(row.kld_mean), opt(row.kld_p99), opt(row.same_top1), opt(row.mmlu));
  }
  os << "\n## Decode tok/s by concurrency (measured / predicted)\n\n| precision |";
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") continue;
    os << "\n| " << row.precision << " |";
    for (const SweepPoint& s : row.sweep) {
      os << fmt::format(" B={}: {} / {:.1f} |", s.batch, ci(s.tok_per_s, 1), s.predicted_tok_per_s);
    }
  }
  os << "\n\n## Weights of each row\n\n";
  for (const PrecisionRow& row : r.rows) {
    if (row.weights_source.empty()) continue;
    os << "- " << row.precision << ": " << row.weights_source;
    if (row.lm_head.starts_with("bf16 (")) os << "; lm_head " << row.lm_head;  // --lm-head int8 asked, not storable here
    if (!row.quantization.empty()) {
      os << (row.quant_reused ? fmt::format(" (quantized in {:.1f} s by an earlier run", row.quant_seconds)
                              : fmt::format(" (quantized in {:.1f} s", row.quant_seconds));
      os << (row.quant_calib_tokens > 0 ? fmt::format(", {} calibration tokens)", row.quant_calib_tokens)
                                        : std::string(", no calibration)"));
    }
    os << "\n";
  }
  os << "\n## Recommendations\n\n";
  for (const std::string& s : r.recommendations) os << "- " << s << "\n";
  os << "\n## Notes\n\n";
  for (const std::string& n : r.notes) os << "- " << n << "\n";
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") os << "- " << row.precision << " " << row.status << ": " << row.why << "\n";
  }
  return os.str();
}

nlohmann::json report_to_json(const Report& r) {
  nlohmann::json j;
  j["schema"] = "frugal report v1";
  j["model"] = r.model;
  j["model_dir"] = r.model_dir;
  j["device"] = r.device;
  j["gpu"] = r.gpu;
  j["prediction_gpu"] = r.prediction_gpu;
  j["price_per_gpu_hour"] = r.price_per_hour >= 0 ? nlohmann::json(r.price_per_hour) : nlohmann::json(nullptr);
  j["price_source"] = r.price_source;
  if (r.own_why.empty()) {
    j["ownership"] = {{"available", true},          {"purchase_usd", r.own.purchase_usd},
                      {"purchase_source", r.own.purchase_source}, {"years", r.own.years},
                      {"usd_per_kwh", r.own.usd_per_kwh}, {"utilization", r.own.utilization},
                      {"ops_usd_per_year", r.own.ops_usd_per_year}, {"power_w", r.own.power_w},
                      {"power_source", r.own.power_source}};
  } else {
    j["ownership"] = {{"available", false}, {"why", r.own_why}};
  }
  j["energy_source"] = r.energy_source;
  j["quick"] = r.quick;
  j["complete"] = r.complete;
  j["started_utc"] = r.started_utc;
  j["finished_utc"] = r.finished_utc;
  j["recommendations"] = r.recommendations;
  j["notes"] = r.notes;
  nlohmann::json rows = nlohmann::json::array();
  for (const PrecisionRow& row : r.rows) {
    nlohmann::json o{{"precision", row.precision}, {"status", row.status}, {"why", row.why}};
    if (row.status == "ok") {
      nlohmann::json sweep = nlohmann::json::array();
      for (const SweepPoint& s : row.sweep) {
        sweep.push_back({{"batch", s.batch}, {"tok_per_s", est_json(s.tok_per_s)},
                         {"predicted_tok_per_s", s.predicted_tok_per_s}});
      }
      o["weights_source"] = row.weights_source;
      o["lm_head"] = row.lm_head;
      if (!row.quantization.empty()) {
        o["quantization"] = {{"method", row.quantization},
                             {"checkpoint", row.model_dir},
                             {"reused", row.quant_reused},
                             {"calib_tokens", row.quant_calib_tokens},
                             {"seconds", row.quant_seconds}};
      }
      o["measured"] = {{"weights_gib", row.weights_gib},
                       {"kv_pool_gib", row.kv_pool_gib},
                       {"workspace_gib", row.workspace_gib},
                       {"graphs_gib", row.graphs_gib},
                       {"kv_bytes_per_token", row.kv_bytes_per_token},
                       {"kv_capacity_tokens", row.kv_capacity_tokens},
                       {"decode_b1_tok_per_s", est_json(row.decode_b1_tok_per_s)},
                       {"prefill_len", row.prefill_len},
                       {"prefill_tok_per_s", est_json(row.prefill_tok_per_s)},
                       {"ttft_ms", est_json(row.ttft_ms)},
                       {"itl_ms_p50", est_json(row.itl_ms_p50)},
                       {"itl_ms_p99", est_json(row.itl_ms_p99)},
                       {"itl_ms_cdf", row.itl_cdf_ms},
                       {"ttft_ms_samples", row.ttft_samples_ms},
                       {"sweep", sweep},
                       {"best_tok_per_s", row.best_tok_per_s},
                       {"best_batch", row.best_batch}};
      o["predicted"] = {{"weights_gib", row.pred_weights_gib},
                        {"kv_bytes_per_token", row.pred_kv_bytes_per_token},
                        {"decode_b1_tok_per_s", row.pred_decode_b1_tok_per_s},
                        {"prefill_tok_per_s", row.pred_prefill_available ? nlohmann::json(row.pred_prefill_tok_per_s)
                                                                         : nlohmann::json(nullptr)}};
      o["cost"] = {{"usd_per_m_tokens_rent", opt_json(row.usd_per_m_rent)},
                   {"usd_per_m_tokens_own", opt_json(row.usd_per_m_own)},
                   {"kwh_per_m_tokens", opt_json(row.kwh_per_m)},
                   {"why", row.cost_why}};
      o["quality"] = {{"ppl", opt_json(row.ppl)},           {"delta_ppl", opt_json(row.delta_ppl)},
                      {"kld_mean", opt_json(row.kld_mean)}, {"kld_p99", opt_json(row.kld_p99)},
                      {"same_top1", opt_json(row.same_top1)}, {"mmlu", opt_json(row.mmlu)},
                      {"mmlu_stderr", opt_json(row.mmlu_stderr)}, {"why", row.quality_why},
                      {"mmlu_why", row.mmlu_why}};
    }
    rows.push_back(o);
  }
  j["rows"] = rows;
  return j;
}

Status write_report(const Report& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("--out " + dir + ": cannot create the directory: " + ec.message());
  const auto write = [&](const std::string& name, const std::string& text) -> Status {
    const std::string path = dir + "/" + name;
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp);
      if (!f) return io_error(tmp + ": cannot write");
      f << text;
      if (!f) return io_error(tmp + ": write failed");
    }
    // Rename so an interrupted write never leaves a torn file.
    std::filesystem::rename(tmp, path, ec);
    if (ec) return io_error(path + ": " + ec.message());
    return Status::ok();
  };
  FRUGAL_RETURN_IF_ERROR(write("report.json", report_to_json(r).dump(2) + "\n"));
  FRUGAL_RETURN_IF_ERROR(write("report.md", format_report_markdown(r)));
  FRUGAL_RETURN_IF_ERROR(write("report.html", format_report_html(r)));
  return Status::ok();
}

}  // namespace frugal::report
