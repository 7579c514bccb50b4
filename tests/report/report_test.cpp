// `frugal report --quick` on the default model (models/reference-qwen2-20m) on the CPU, every
// quantized row made by frugal quantize (issue 21, acceptance 1 and 2): every precision row
// present and ok, every number finite, AWQ and GPTQ closer to bf16 (mean KLD) than RTN at the
// same group size and INT8 closer than every 4-bit row, the JSON valid against
// docs/report.schema.json (checked by python3-jsonschema, an independent validator), the HTML
// rendered by headless Chromium with every plot and no console errors, and a screenshot left
// under the build tree (tests/report/artifacts/). The quantized-checkpoint cache; failing and
// interrupted rows (acceptance 6).
#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "report/report.h"
#include "report/report_quantize.h"
#include "test_paths.h"

namespace frugal::report {
namespace {

namespace fs = std::filesystem;

const char* kPlots[] = {"pareto", "sweep", "latency", "memory"};

std::string artifacts() { return frugal::testing::binary_dir() + "/tests/report/artifacts"; }

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct ShellRun {
  int code = -1;
  std::string out;
};

ShellRun sh(const std::string& cmd) {
  ShellRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

ReportOptions quick(const std::string& out) {
  ReportOptions o;
  o.model_dir = frugal::testing::source_root() + "/models/reference-qwen2-20m";
  o.quick = true;
  o.threads = 2;
  o.out_dir = out;
  o.price_per_hour = 0.10;
  o.text_file = frugal::testing::source_root() + "/tests/data/report/war-and-peace-excerpt.txt";
  o.mc_dir = frugal::testing::source_root() + "/tests/data/eval/oracle-mmlu";
  o.own = {.purchase_usd = 1000, .years = 3, .usd_per_kwh = 0.15, .utilization = 1.0, .power_w = 65};
  return o;
}

// Every number anywhere in the document is finite (NaN/Inf would not even serialize as JSON
// numbers: nlohmann writes them as null, so nulls are only allowed where a "why" explains them).
void expect_finite(const nlohmann::json& j, const std::string& where) {
  if (j.is_number()) {
    EXPECT_TRUE(std::isfinite(j.get<double>())) << where;
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) expect_finite(it.value(), where + "." + it.key());
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) expect_finite(j[i], where + "[" + std::to_string(i) + "]");
  }
}

std::string chromium() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"}) {
    if (sh(std::string("command -v ") + c + " >/dev/null 2>&1").code == 0) return c;
  }
  return "";
}

// Every row ran: measured, predicted, priced and scored against bf16.
void check_rows(const nlohmann::json& j) {
  ASSERT_EQ(j["rows"].size(), known_precisions().size());
  for (size_t i = 0; i < known_precisions().size(); ++i) {
    const auto& row = j["rows"][i];
    SCOPED_TRACE(row.dump().substr(0, 400));
    EXPECT_EQ(row["precision"], known_precisions()[i]);
    ASSERT_EQ(row["status"], "ok");
    const auto& m = row["measured"];
    EXPECT_GT(m["weights_gib"].get<double>(), 0);
    EXPECT_GT(m["decode_b1_tok_per_s"]["value"].get<double>(), 0);
    EXPECT_GT(m["prefill_tok_per_s"]["value"].get<double>(), 0);
    EXPECT_GT(m["ttft_ms"]["value"].get<double>(), 0);
    EXPECT_GE(m["itl_ms_p99"]["value"].get<double>(), m["itl_ms_p50"]["value"].get<double>());
    EXPECT_LE(m["decode_b1_tok_per_s"]["ci95"][0].get<double>(), m["decode_b1_tok_per_s"]["value"].get<double>());
    // KV per token of the CPU engine (f32), by hand: 2 (K, V) x 6 layers x 2 KV heads x 64 x 4 B,
    // whatever the weights' precision.
    EXPECT_EQ(m["kv_bytes_per_token"].get<double>(), 2 * 6 * 2 * 64 * 4);
    EXPECT_EQ(row["predicted"]["kv_bytes_per_token"].get<double>(), 6144);
    EXPECT_EQ(m["sweep"].size(), 3u);  // --quick: 1, 2, 4
    // $/1M at the best batch: $0.10/h / (tok/s x 3600) x 1e6.
    const double best = m["best_tok_per_s"].get<double>();
    EXPECT_NEAR(row["cost"]["usd_per_m_tokens_rent"].get<double>(), 0.10 / (best * 3600) * 1e6, 1e-12);
    // Owned: $1000 / (3 x 8760) + 0.065 kW x $0.15 per hour.
    EXPECT_NEAR(row["cost"]["usd_per_m_tokens_own"].get<double>(),
                (1000.0 / (3 * 8760) + 0.065 * 0.15) / (best * 3600) * 1e6, 1e-12);
    EXPECT_NEAR(row["cost"]["kwh_per_m_tokens"].get<double>(), 0.065 * 1e6 / best / 3600, 1e-12);
    // Quality through frugal eval: PPL of the held-out text, MMLU over the 4 x 4 questions
    // (--quick: 1 shot, 4 test questions per subject), KLD against the bf16 row.
    const auto& q = row["quality"];
    EXPECT_GT(q["ppl"].get<double>(), 1.0) << q.dump();
    EXPECT_GE(q["mmlu"].get<double>(), 0.0);
    EXPECT_LE(q["mmlu"].get<double>(), 1.0);
    EXPECT_NE(q["mmlu_why"].get<std::string>().find("16 questions"), std::string::npos) << q.dump();
    if (row["precision"] == "bf16") {
      EXPECT_EQ(q["kld_mean"].get<double>(), 0.0);
      EXPECT_EQ(q["same_top1"].get<double>(), 1.0);
      EXPECT_FALSE(row.contains("quantization"));
    } else {
      // Quantized by this run through frugal quantize, into the report's checkpoint cache.
      ASSERT_TRUE(row.contains("quantization"));
      const auto& qz = row["quantization"];
      EXPECT_FALSE(qz["reused"].get<bool>());
      EXPECT_NE(qz["checkpoint"].get<std::string>().find("/checkpoints/" + row["precision"].get<std::string>() + "-"),
                std::string::npos);
      EXPECT_TRUE(fs::exists(qz["checkpoint"].get<std::string>() + "/config.json"));
      const bool calibrated = row["precision"] == "int4-awq" || row["precision"] == "int4-gptq";
      EXPECT_EQ(qz["calib_tokens"].get<int64_t>(), calibrated ? 512 : 0);  // --quick: 512
      // Lossy, but close: KLD above 0 (bf16 itself is 0) and the top-1 mostly kept.
      EXPECT_GT(q["kld_mean"].get<double>(), 0.0);
      EXPECT_GE(q["kld_p99"].get<double>(), q["kld_mean"].get<double>());
      EXPECT_GT(q["same_top1"].get<double>(), 0.5);
      // Quantized weights are smaller than bf16's (embeddings and lm_head stay bf16).
      EXPECT_LT(m["weights_gib"].get<double>(), j["rows"][0]["measured"]["weights_gib"].get<double>());
    }
  }
}

// Acceptance 2, read from report.json: AWQ and GPTQ at 4 bits lose less than RTN at the same
// group size (mean KLD vs bf16), and INT8 less than every 4-bit row.
void check_kld_order(const nlohmann::json& j) {
  std::map<std::string, double> kld;
  for (const auto& row : j["rows"]) {
    if (row["status"] == "ok" && row["quality"]["kld_mean"].is_number()) {
      kld[row["precision"].get<std::string>()] = row["quality"]["kld_mean"].get<double>();
    }
  }
  for (const char* p : {"int8", "int4-awq", "int4-gptq", "int4-rtn", "nf4"}) ASSERT_TRUE(kld.count(p)) << p;
  std::printf("mean KLD vs bf16: int8 %.6f, int4-awq %.6f, int4-gptq %.6f, int4-rtn %.6f, nf4 %.6f, fp8 %.6f\n",
              kld["int8"], kld["int4-awq"], kld["int4-gptq"], kld["int4-rtn"], kld["nf4"], kld["fp8"]);
  EXPECT_LT(kld["int4-awq"], kld["int4-rtn"]);
  EXPECT_LT(kld["int4-gptq"], kld["int4-rtn"]);
  for (const char* p : {"int4-awq", "int4-gptq", "int4-rtn", "nf4"}) EXPECT_LT(kld["int8"], kld[p]) << p;
}

void check_schema(const std::string& dir) {
  if (sh("python3 -c 'import jsonschema' 2>&1").code != 0) {
    std::printf("python3-jsonschema not installed: schema check skipped\n");
    return;
  }
  const std::string schema = frugal::testing::source_root() + "/docs/report.schema.json";
  const std::string check =
      "import json, sys, jsonschema\n"
      "s = json.load(open(sys.argv[1])); j = json.load(open(sys.argv[2]))\n"
      "V = jsonschema.Draft202012Validator; V.check_schema(s); V(s).validate(j)\n"
      "j['rows'][0]['measured'].pop('sweep'); ok = not V(s).is_valid(j)\n"
      "j = json.load(open(sys.argv[2])); j['rows'][1]['quantization'].pop('method'); ok = ok and not V(s).is_valid(j)\n"
      "print('schema ok' if ok else 'schema accepted a row without its sweep or a quantization without its method')\n"
      "sys.exit(0 if ok else 1)\n";
  std::ofstream(artifacts() + "/check_schema.py") << check;
  const ShellRun r = sh("python3 " + artifacts() + "/check_schema.py " + schema + " " + dir + "/report.json 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
}

void check_html(const std::string& dir) {
  const std::string html = read(dir + "/report.html");
  for (const char* id : kPlots) {
    const size_t at = html.find(std::string("<figure class=\"plot\" id=\"") + id + "\">");
    ASSERT_NE(at, std::string::npos) << id;
    EXPECT_EQ(html.compare(at + std::string("<figure class=\"plot\" id=\"").size() + std::string(id).size() + 2, 4,
                           "<svg"),
              0)
        << id;
  }
  // No network: nothing is fetched (no external scripts, styles, images or fonts).
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // Every precision is on the page, with its point on the Pareto plot (all rows have a KLD).
  for (const std::string& p : known_precisions()) EXPECT_NE(html.find(">" + p + "<"), std::string::npos) << p;
}

void check_chromium(const std::string& dir) {
  const std::string browser = chromium();
  if (browser.empty()) {
    std::printf("chromium not installed (scripts/setup.sh installs Debian's): rendering check skipped\n");
    return;
  }
  const std::string url = "file://" + fs::absolute(dir + "/report.html").string();
  const std::string flags = " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" + artifacts() +
                            "/chromium-profile --enable-logging=stderr --v=0 --virtual-time-budget=2000";
  const std::string log = artifacts() + "/chromium.log";
  const ShellRun dom = sh(browser + flags + " --dump-dom " + url + " 2>" + log);
  ASSERT_EQ(dom.code, 0) << read(log);
  for (const char* id : kPlots) {
    const size_t at = dom.out.find(std::string("id=\"") + id + "\"");
    ASSERT_NE(at, std::string::npos) << id << "\n" << dom.out.substr(0, 2000);
    EXPECT_NE(dom.out.find("<svg", at), std::string::npos) << id;
  }
  // Chromium logs console messages as "CONSOLE(line)" (errors also as "Uncaught ...").
  const std::string errors = read(log);
  EXPECT_EQ(errors.find("CONSOLE"), std::string::npos) << errors;
  EXPECT_EQ(errors.find("Uncaught"), std::string::npos) << errors;
  const std::string png = artifacts() + "/report.png";
  fs::remove(png);
  const ShellRun shot = sh(browser + flags + " --window-size=1280,2600 --screenshot=" + png + " " + url + " 2>>" + log);
  EXPECT_EQ(shot.code, 0) << read(log);
  ASSERT_TRUE(fs::exists(png)) << read(log);
  EXPECT_GT(fs::file_size(png), 10000u);
  std::printf("screenshot: %s\n", png.c_str());
}

// One run (the seven rows take most of this test's time), then each check on its outputs.
TEST(ReportEndToEnd, QuickReportOnTheDefaultModel) {
  const std::string dir = artifacts() + "/e2e";
  fs::remove_all(dir);
  auto r = run_report(quick(dir));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto j = nlohmann::json::parse(read(dir + "/report.json"));
  {
    SCOPED_TRACE("rows");
    check_rows(j);
  }
  expect_finite(j, "report");
  EXPECT_TRUE(j["complete"].get<bool>());
  EXPECT_FALSE(j["recommendations"].empty());
  const std::string md = read(dir + "/report.md");
  for (const std::string& p : known_precisions()) EXPECT_NE(md.find("| " + p + " |"), std::string::npos) << p;
  EXPECT_NE(md.find("int4 AWQ g128"), std::string::npos) << md;
  {
    SCOPED_TRACE("acceptance 2: KLD order");
    check_kld_order(j);
  }
  {
    SCOPED_TRACE("schema");
    check_schema(dir);
  }
  {
    SCOPED_TRACE("html");
    check_html(dir);
  }
  {
    SCOPED_TRACE("chromium");
    check_chromium(dir);
  }
}

TEST(ReportTest, InterruptedRunWritesTheRowsItHas) {
  const std::string dir = artifacts() + "/interrupted";
  fs::remove_all(dir);
  // A checkpoint with a config and no weights: its row fails with the loader's reason.
  const std::string broken = dir + "-broken-int8";
  fs::remove_all(broken);
  fs::create_directories(broken);
  fs::copy_file(frugal::testing::source_root() + "/models/reference-qwen2-20m/config.json", broken + "/config.json");
  ReportOptions o = quick(dir);
  o.precisions = {"int8", "bf16", "nf4", "fp8"};
  o.checkpoints["int8"] = broken;
  int polls = 0;
  std::string snapshot;  // report.json as a run killed after the first row would leave it
  o.should_stop = [&] {
    if (++polls == 2) snapshot = read(dir + "/report.json");
    return polls > 2;  // stop after two rows
  };
  auto r = run_report(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto j = nlohmann::json::parse(read(dir + "/report.json"));
  EXPECT_FALSE(j["complete"].get<bool>());
  ASSERT_EQ(j["rows"].size(), 4u);
  // A failing precision before a working one: the working row still runs.
  EXPECT_EQ(j["rows"][0]["status"], "failed");
  EXPECT_NE(j["rows"][0]["why"].get<std::string>().find(broken), std::string::npos) << j["rows"][0].dump();
  EXPECT_EQ(j["rows"][1]["status"], "ok");
  for (int i : {2, 3}) {
    EXPECT_EQ(j["rows"][i]["status"], "not run");
    EXPECT_NE(j["rows"][i]["why"].get<std::string>().find("interrupted"), std::string::npos);
  }
  // The rows not run were never quantized.
  EXPECT_FALSE(fs::exists(dir + "/checkpoints"));
  const auto snap = nlohmann::json::parse(snapshot);
  EXPECT_EQ(snap["rows"][0]["status"], "failed");
  for (int i : {1, 2, 3}) {
    EXPECT_EQ(snap["rows"][i]["status"], "not run");
    EXPECT_NE(snap["rows"][i]["why"].get<std::string>().find("not run yet"), std::string::npos) << snap.dump();
  }
  const std::string md = read(dir + "/report.md");
  EXPECT_NE(md.find("nf4 not run: interrupted"), std::string::npos) << md;
  EXPECT_NE(md.find("int8 failed: "), std::string::npos) << md;
  EXPECT_NE(read(dir + "/report.html").find("interrupted"), std::string::npos);
  fs::remove_all(broken);
}

// The cache of quantized checkpoints: made once, reused while nothing that determines the bytes
// changes, remade when something does; a directory left without its stamp is redone. (int4 RTN:
// no calibration, about a second on the default model.)
TEST(ReportQuantize, CacheReusesAndKeysOnEverySetting) {
  const std::string cache = artifacts() + "/quant-cache";
  fs::remove_all(cache);
  QuantizeRowOptions q{.model_dir = frugal::testing::source_root() + "/models/reference-qwen2-20m",
                       .precision = "int4-rtn", .cache_dir = cache, .default_calib_file = default_calib_file()};
  auto a = quantize_or_reuse(q);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_FALSE(a->reused);
  EXPECT_EQ(a->description, "int4 RTN g128 (gptq)");
  EXPECT_EQ(a->calib_tokens, 0);
  EXPECT_TRUE(fs::exists(a->dir + "/config.json"));
  EXPECT_EQ(fs::path(a->dir).parent_path(), fs::path(cache));
  auto b = quantize_or_reuse(q);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  EXPECT_TRUE(b->reused);
  EXPECT_EQ(b->dir, a->dir);
  // Calibration settings do not key an uncalibrated method...
  q.calib_tokens = 256;
  EXPECT_EQ(*quantize_cache_key(q, *quantize_options_for("int4-rtn", 128)),
            fs::path(a->dir).filename().string().substr(std::string("int4-rtn-").size()));
  // ...but they key a calibrated one, as the group size keys every grouped format.
  const auto awq = *quantize_options_for("int4-awq", 128);
  const std::string k256 = *quantize_cache_key(q, awq);
  q.calib_tokens = 512;
  EXPECT_NE(*quantize_cache_key(q, awq), k256);
  q.group_size = 64;
  auto c = quantize_or_reuse(q);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_FALSE(c->reused);
  EXPECT_NE(c->dir, a->dir);
  EXPECT_EQ(c->description, "int4 RTN g64 (gptq)");
  // A run killed between the quantizer's rename and the stamp: redone, not trusted.
  fs::remove(c->dir + "/report-quantize.json");
  auto d = quantize_or_reuse(q);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_FALSE(d->reused);
  EXPECT_TRUE(fs::exists(d->dir + "/report-quantize.json"));
  // Bad settings are named.
  EXPECT_NE(quantize_options_for("int4-awq", 100).status().message().find("100"), std::string::npos);
  EXPECT_NE(quantize_options_for("bf16", 128).status().message().find("bf16"), std::string::npos);
  q.group_size = 96;  // a multiple of 8 that does not divide the 512-wide inputs: the quantizer says so
  auto e = quantize_or_reuse(q);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("int4 RTN g96"), std::string::npos) << e.status().to_string();
  EXPECT_FALSE(fs::exists(cache + "/int4-rtn-" + *quantize_cache_key(q, *quantize_options_for("int4-rtn", 96))));
  fs::remove_all(cache);
}

// --lm-head int8: the quantized rows whose checkpoint layouts store a quantized lm_head (int8,
// int4-gptq, int4-rtn) get one (keyed in the cache, named in the description, written as the
// quantizer's published config says), the others keep it dense and say so; with dummy weights
// every quantized row runs an int8 lm_head, which the measured and the predicted weight bytes
// both show; a tied model is refused, naming the flag. The golden qwen2 (untied, 192 x 384).
TEST(ReportLmHead, QuantizedWhereTheLayoutStoresItAndRefusedWhenTied) {
  const std::string golden = frugal::testing::source_root() + "/tests/data/golden/qwen2";
  EXPECT_TRUE(quantize_options_for("int8", 128, true)->lm_head);
  EXPECT_EQ(quantize_options_for("int4-gptq", 128, true)->lm_head_bits, 8);
  EXPECT_EQ(quantize_options_for("int4-rtn", 128, true)->lm_head_bits, 8);
  for (const char* p : {"int4-awq", "fp8", "nf4"}) {
    const auto q = quantize_options_for(p, 128, true);
    ASSERT_TRUE(q.is_ok()) << p;
    EXPECT_FALSE(q->lm_head || q->lm_head_bits != 0) << p;
    EXPECT_FALSE(lm_head_storable(p)) << p;
  }
  EXPECT_FALSE(quantize_options_for("int8", 128, false)->lm_head);
  {  // The checkpoint: int4 RTN g64 with the lm_head at 8 bits (a GPTQModel "dynamic" rule).
    const std::string cache = artifacts() + "/lm-head-cache";
    fs::remove_all(cache);
    QuantizeRowOptions q{.model_dir = golden, .precision = "int4-rtn", .cache_dir = cache,
                         .default_calib_file = default_calib_file(), .group_size = 64};
    const std::string dense_key = *quantize_cache_key(q, *quantize_options_for("int4-rtn", 64));
    q.lm_head_int8 = true;
    auto ck = quantize_or_reuse(q);
    ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
    EXPECT_EQ(ck->description, "int4 RTN g64 (gptq), lm_head int8");
    EXPECT_NE(fs::path(ck->dir).filename().string(), "int4-rtn-" + dense_key) << "the lm_head keys the cache";
    const auto qc = nlohmann::json::parse(read(ck->dir + "/config.json"))["quantization_config"];
    EXPECT_TRUE(qc["lm_head"].get<bool>()) << qc.dump();
    EXPECT_EQ(qc["bits"], 4);
    EXPECT_EQ(qc["dynamic"]["+:^lm_head$"]["bits"], 8) << qc.dump();
    fs::remove_all(cache);
  }
  {  // Dummy weights: every quantized row with an int8 lm_head; bf16 stays the baseline.
    auto run = [&](const std::string& lm_head, const std::string& dir) {
      ReportOptions o = quick(dir);
      fs::remove_all(dir);
      o.model_dir = golden + "/config.json";
      o.dummy_weights = true;
      o.precisions = {"bf16", "int8", "int4-awq", "int4-rtn"};
      o.concurrency = {1};
      o.lm_head = lm_head;
      auto r = run_report(o);
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      return nlohmann::json::parse(read(dir + "/report.json"));
    };
    const auto j8 = run("int8", artifacts() + "/lm-head-dummy"), jb = run("bf16", artifacts() + "/lm-head-dummy-bf16");
    ASSERT_EQ(j8["rows"].size(), 4u);
    const char* want[] = {"bf16", "int8", "int8", "int8"};
    for (size_t i = 0; i < 4; ++i) {
      const auto& row = j8["rows"][i];
      ASSERT_EQ(row["status"], "ok") << row.dump();
      EXPECT_EQ(row["lm_head"], want[i]) << row.dump();
      EXPECT_EQ(row["weights_source"].get<std::string>().find("lm_head int8") != std::string::npos, i > 0) << row.dump();
      EXPECT_EQ(jb["rows"][i]["lm_head"], "bf16");
    }
    // int4-rtn shares int4-awq's measurement (same format, same lm_head).
    EXPECT_NE(j8["rows"][3]["weights_source"].get<std::string>().find("int4-awq row's measurement"), std::string::npos);
    for (size_t i : {1, 2}) {  // an int8 lm_head (vocab x hidden bytes + scales) is smaller than a bf16 one
      const double m8 = j8["rows"][i]["measured"]["weights_gib"].get<double>(), mb = jb["rows"][i]["measured"]["weights_gib"].get<double>();
      const double p8 = j8["rows"][i]["predicted"]["weights_gib"].get<double>(), pb = jb["rows"][i]["predicted"]["weights_gib"].get<double>();
      EXPECT_LT(m8, mb) << i;
      EXPECT_LT(p8, pb) << i;
    }
    EXPECT_EQ(j8["rows"][0]["measured"]["weights_gib"], jb["rows"][0]["measured"]["weights_gib"]) << "the bf16 row is untouched";
  }
  {  // A checkpoint layout that keeps the lm_head dense (bitsandbytes nf4): said in the row and the page.
    const std::string dir = artifacts() + "/lm-head-nf4";
    fs::remove_all(dir);
    ReportOptions o = quick(dir);
    o.model_dir = golden;
    o.precisions = {"nf4"};
    o.concurrency = {1};
    o.lm_head = "int8";
    auto r = run_report(o);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const auto j = nlohmann::json::parse(read(dir + "/report.json"));
    ASSERT_EQ(j["rows"][0]["status"], "ok") << j["rows"][0].dump();
    EXPECT_EQ(j["rows"][0]["lm_head"], "bf16 (the nf4 checkpoint layout keeps it dense)");
    EXPECT_EQ(j["rows"][0]["quantization"]["method"].get<std::string>().find("lm_head"), std::string::npos);
    EXPECT_NE(read(dir + "/report.md").find("lm_head bf16 (the nf4 checkpoint layout keeps it dense)"), std::string::npos);
    fs::remove_all(dir);
  }
  // Refused: a tied model (the default one), and a value other than bf16 / int8.
  ReportOptions o = quick(artifacts() + "/lm-head-tied");
  o.lm_head = "int8";
  auto tied = run_report(o);
  ASSERT_FALSE(tied.is_ok());
  EXPECT_NE(tied.status().message().find("tie_word_embeddings"), std::string::npos) << tied.status().to_string();
  EXPECT_NE(tied.status().message().find("--lm-head"), std::string::npos) << tied.status().to_string();
  o.lm_head = "int4";
  EXPECT_NE(run_report(o).status().message().find("'int4'"), std::string::npos);
}

TEST(ReportTest, BadInputIsNamed) {
  auto p = parse_precisions("bf16,int3");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("'int3'"), std::string::npos);
  EXPECT_EQ(*parse_precisions("int8,bf16,int8"), (std::vector<std::string>{"int8", "bf16"}));
  ReportOptions o = quick(artifacts() + "/bad");
  o.model_dir = "/nonexistent/model";
  auto r = run_report(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("/nonexistent/model"), std::string::npos) << r.status().to_string();
  o = quick("");
  EXPECT_NE(run_report(o).status().message().find("--out"), std::string::npos);
}

}  // namespace
}  // namespace frugal::report
