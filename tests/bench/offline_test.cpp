// `frugal bench offline`'s batching checks (issue 5, acceptance 4 and 5), scaled down to the
// embedded stories260K model on the CPU and run in-process through bench::run_offline:
//  - the mixed-length load completes every request with its exact output length although the KV
//    pool holds a fraction of the demand (so requests had to wait), and its fragmentation figures
//    match block arithmetic done by hand for a case small enough to follow step by step;
//  - the ITL probe measures positive latencies, splits the long prompt into the configured
//    chunks (one step per chunk) and completes the long request;
//  - the throughput run's total rate counts input and output tokens; bad flags are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/model_cost.h"
#include "bench/offline.h"
#include "test_paths.h"

namespace frugal::bench {
namespace {

OfflineOptions base_options() {
  OfflineOptions o;
  o.engine.model_dir = frugal::testing::source_root() + "/models/stories260K";
  o.engine.device = "cpu";
  o.engine.threads = 2;
  o.prefill_lens = {};
  o.batches = {};
  o.reps = 1;
  o.warmup = 0;
  return o;
}

// A MoE decode step reads the routed experts its tokens chose, not all of them (hand count on the
// DeepSeek-V2 golden: bf16, hidden 128, moe_intermediate 64, 8 routed experts, top-2, layers 1
// and 2 of 3 are MoE; each expert has gate, up and down of 128 x 64).
TEST(BenchModelCost, MoeCountsOnlyTheRoutedExpertsAStepReads) {
  runtime::EngineOptions eo;
  eo.model_dir = frugal::testing::source_root() + "/tests/data/golden/deepseek_v2";
  auto mc = model_cost(eo, DType::kBF16);
  ASSERT_TRUE(mc.is_ok()) << mc.status().to_string();
  const int64_t per_expert_params = 3 * 128 * 64;
  const int64_t routed_params = 2 * 8 * per_expert_params;
  EXPECT_EQ(mc->routed_expert_params, routed_params);
  EXPECT_EQ(mc->routed_expert_bytes, 2 * routed_params);
  const double dense = static_cast<double>(mc->step_weight_bytes - mc->routed_expert_bytes);
  // Batch 1: 2 of 8 experts per MoE layer; batch b: 8 * (1 - (6/8)^b) distinct experts expected.
  EXPECT_DOUBLE_EQ(mc->step_bytes_at_batch(1), dense + 2.0 * routed_params * 2.0 / 8.0);
  EXPECT_NEAR(mc->step_bytes_at_batch(3), dense + 2.0 * routed_params * (1.0 - 0.421875), 1e-6);
  EXPECT_NEAR(mc->step_bytes_at_batch(1000), static_cast<double>(mc->step_weight_bytes), 1e-3);
  EXPECT_DOUBLE_EQ(mc->active_linear_params(),
                   static_cast<double>(mc->linear_params - routed_params) + routed_params * 2.0 / 8.0);
}

TEST(BenchModelCost, DenseModelReadsEveryWeightAtAnyBatch) {
  runtime::EngineOptions eo;
  eo.model_dir = frugal::testing::source_root() + "/models/stories260K";
  auto mc = model_cost(eo, DType::kBF16);
  ASSERT_TRUE(mc.is_ok()) << mc.status().to_string();
  EXPECT_EQ(mc->routed_expert_bytes, 0);
  EXPECT_DOUBLE_EQ(mc->step_bytes_at_batch(1), static_cast<double>(mc->step_weight_bytes));
  EXPECT_DOUBLE_EQ(mc->step_bytes_at_batch(64), static_cast<double>(mc->step_weight_bytes));
  EXPECT_DOUBLE_EQ(mc->active_linear_params(), static_cast<double>(mc->linear_params));
}

// A quantized checkpoint's step reads its formats' bytes, not the config dtype's per parameter
// (hand count on tests/data/quant/awq_w4g128: Qwen2, tied, vocab 512, hidden 256, 2 layers,
// inter 512, 4 heads of 64 and 2 KV heads; int4 g128 loads as k / 2 code bytes a row plus an f32
// scale and an f32 offset a group: 144 bytes a row at k 256, 288 at k 512):
//   a layer's linears: q, o 256 x 144; k, v 128 x 144; gate, up 512 x 144; down 256 x 288 = 331,776
//   a layer's f16 biases (q, k, v: 512) and norms (2 x 256): 2,048; the final norm: 512
//   the tied embedding, read as the lm_head: 512 x 256 x 2 = 262,144
// => 2 x (331,776 + 2,048) + 512 + 262,144 = 930,304 (dense f16 would be 2 x 1,572,864 + ...).
TEST(BenchOffline, QuantizedCheckpointCountsItsFormatsBytes) {
  OfflineOptions o = base_options();
  o.engine.model_dir = frugal::testing::source_root() + "/tests/data/quant/awq_w4g128";
  o.batches = {1};
  o.decode_prompt_len = 8;
  o.decode_tokens = 4;
  auto r = run_offline(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)["bytes_per_decode_step_weights"].get<int64_t>(), 930304);
}

TEST(BenchOffline, MixedLoadWaitsInsteadOfFailingWithASmallPool) {
  OfflineOptions o = base_options();
  o.engine.num_kv_blocks = 24;  // 384 token slots; the largest request needs 17 blocks
  o.mixed.num_prompts = 24;
  o.mixed.input = {.lo = 16, .hi = 200};
  o.mixed.output = {.lo = 1, .hi = 64};
  auto r = run_offline(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& m = (*r)["mixed"];
  EXPECT_EQ(m["failed"].get<int64_t>(), 0) << m["errors"].dump();
  EXPECT_EQ(m["completed"].get<int64_t>(), 24);
  EXPECT_EQ(m["output_len_mismatches"].get<int64_t>(), 0);
  EXPECT_EQ(m["output_tokens"].get<int64_t>(), m["output_tokens_requested"].get<int64_t>());
  EXPECT_EQ(m["kv_blocks_total"].get<int64_t>(), 24);
  // The pool could not hold everything at once, and the requests did wait for it.
  EXPECT_GT(m["demand_over_pool"].get<double>(), 3.0);
  EXPECT_GT(m["max_waiting"].get<int64_t>(), 0);
  EXPECT_GT(m["kv_used_peak_fraction"].get<double>(), 0.5);
  EXPECT_LE(m["kv_used_peak_blocks"].get<int64_t>(), 24);
  EXPECT_GT(m["steps"].get<int64_t>(), 24);
  const auto& f = m["fragmentation"];
  EXPECT_GE(f["max"].get<double>(), f["max_while_waiting"].get<double>());
  EXPECT_GE(f["max"].get<double>(), f["mean"].get<double>());
  EXPECT_GT(f["max"].get<double>(), 0.0);  // lengths are not multiples of 16 everywhere
  EXPECT_LE(f["max"].get<double>(), 1.0);
  EXPECT_GT(f["steps_while_waiting"].get<int64_t>(), 0);
  EXPECT_EQ(f["checked"].get<double>(), f["max_while_waiting"].get<double>());
  EXPECT_EQ(m["pass"].get<bool>(), f["checked"].get<double>() <= 0.04);
  EXPECT_GT(m["total_tok_per_s"].get<double>(), m["output_tok_per_s"].get<double>());
}

// One request, prompt 20, 5 outputs, block size 16. After step 1 its KV holds the 20 prompt
// tokens in 2 blocks (32 slots): 12 empty. Steps 2-4 each add the previous output: 21, 22, 23.
// Step 5 samples the 5th token and frees the request, leaving no block in use.
TEST(BenchOffline, MixedLoadFragmentationMatchesBlockArithmetic) {
  OfflineOptions o = base_options();
  o.mixed.num_prompts = 1;
  o.mixed.input = {.lo = 20, .hi = 20};
  o.mixed.output = {.lo = 5, .hi = 5};
  auto r = run_offline(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& m = (*r)["mixed"];
  EXPECT_EQ(m["completed"].get<int64_t>(), 1);
  EXPECT_EQ(m["output_tokens"].get<int64_t>(), 5);
  EXPECT_EQ(m["steps"].get<int64_t>(), 5);
  EXPECT_EQ(m["kv_used_peak_blocks"].get<int64_t>(), 2);
  EXPECT_EQ(m["demand_kv_tokens"].get<int64_t>(), 24);
  EXPECT_EQ(m["demand_blocks"].get<int64_t>(), 2);
  const auto& f = m["fragmentation"];
  EXPECT_EQ(f["steps_sampled"].get<int64_t>(), 4);
  EXPECT_DOUBLE_EQ(f["max"].get<double>(), 12.0 / 32.0);
  EXPECT_DOUBLE_EQ(f["mean"].get<double>(), (12.0 + 11.0 + 10.0 + 9.0) / 4.0 / 32.0);
  const double tw = f["time_weighted_mean"].get<double>();
  EXPECT_GE(tw, 9.0 / 32.0);
  EXPECT_LE(tw, 12.0 / 32.0);
  // Nothing waited, so the verdict is over all steps, and 37.5% is far above 4%.
  EXPECT_EQ(f["steps_while_waiting"].get<int64_t>(), 0);
  EXPECT_EQ(f["checked_over"].get<std::string>(), "all steps");
  EXPECT_FALSE(m["pass"].get<bool>());
}

TEST(BenchOffline, MixedLoadAtARateSpreadsTheArrivals) {
  OfflineOptions o = base_options();
  o.mixed.num_prompts = 12;
  o.mixed.input = {.lo = 16, .hi = 64};
  o.mixed.output = {.lo = 1, .hi = 8};
  o.mixed.rate = 400;  // mean gap 2.5 ms: the last of 12 is due after ~27 ms
  auto r = run_offline(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& m = (*r)["mixed"];
  EXPECT_EQ(m["completed"].get<int64_t>(), 12);
  EXPECT_EQ(m["failed"].get<int64_t>(), 0);
  EXPECT_GT(m["arrival_span_s"].get<double>(), 0.0);
  EXPECT_GE(m["seconds"].get<double>(), m["arrival_span_s"].get<double>());
}

nlohmann::json run_probe(int32_t chunk) {
  OfflineOptions o = base_options();
  o.engine.max_prefill_chunk_tokens = chunk;
  o.itl.batch = 8;
  o.itl.prompt_len = 8;
  o.itl.long_prompt = 300;
  o.itl.warmup_tokens = 4;
  o.itl.window = 8;
  auto r = run_offline(o);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? (*r)["itl_probe"] : nlohmann::json();
}

TEST(BenchOffline, ItlProbeSplitsTheLongPromptIntoChunks) {
  const nlohmann::json p = run_probe(32);
  ASSERT_TRUE(p.is_object());
  EXPECT_EQ(p["chunk_tokens_effective"].get<int>(), 32);
  EXPECT_EQ(p["prefill_steps"].get<int64_t>(), 10);  // ceil(300 / 32)
  EXPECT_EQ(p["preemptions"].get<int64_t>(), 0);
  const auto& b = p["itl_before_ms"];
  const auto& d = p["itl_during_ms"];
  const auto& a = p["itl_after_ms"];
  EXPECT_EQ(b["n"].get<int64_t>(), 8 * 8);
  EXPECT_EQ(a["n"].get<int64_t>(), 8 * 8);
  EXPECT_EQ(d["n"].get<int64_t>(), 8 * 10);  // one token per decoder per prefill step
  // Intervals resample steps (the decoders' gaps in one step are one measurement).
  EXPECT_EQ(d["steps"].get<int64_t>(), 10);
  EXPECT_GE(b["steps"].get<int64_t>(), 8);
  for (const auto* s : {&b, &d}) {
    ASSERT_TRUE((*s)["median_ci95"].is_array());
    EXPECT_GT((*s)["median_ci95"][0].get<double>(), 0.0);
    EXPECT_LE((*s)["median_ci95"][0].get<double>(), (*s)["median_ci95"][1].get<double>());
  }
  ASSERT_TRUE(p["ratio_median_ci95"].is_array());
  EXPECT_LE(p["ratio_median_ci95"][0].get<double>(), p["ratio_median_ci95"][1].get<double>());
  EXPECT_GT(b["median"].get<double>(), 0.0);
  EXPECT_GT(d["median"].get<double>(), 0.0);
  EXPECT_GE(d["max"].get<double>(), d["p90"].get<double>());
  EXPECT_GT(p["long_prefill_s"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(p["ratio_median"].get<double>(), d["median"].get<double>() / b["median"].get<double>());
  EXPECT_EQ(p["pass"].get<bool>(), p["ratio_median"].get<double>() <= 2.0);
}

TEST(BenchOffline, ItlProbeWithoutAChunkCapPrefillsInOneStep) {
  const nlohmann::json p = run_probe(0);
  ASSERT_TRUE(p.is_object());
  EXPECT_EQ(p["prefill_steps"].get<int64_t>(), 1);
  EXPECT_EQ(p["itl_during_ms"]["n"].get<int64_t>(), 8);
}

TEST(BenchOffline, ThroughputCountsInputAndOutputTokens) {
  OfflineOptions o = base_options();
  o.num_prompts = 16;
  o.input_len = 32;
  o.output_len = 8;
  o.throughput_reps = 3;
  auto r = run_offline(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& t = (*r)["throughput"];
  EXPECT_EQ(t["output_tok_per_s_reps"].size(), 3u);
  ASSERT_TRUE(t["output_tok_per_s_est"]["ci95"].is_array());
  EXPECT_LE(t["output_tok_per_s_est"]["ci95"][0].get<double>(), t["output_tok_per_s"].get<double>());
  EXPECT_GE(t["output_tok_per_s_est"]["ci95"][1].get<double>(), t["output_tok_per_s"].get<double>());
  // Every rep produced all 16 x 8 outputs, so total / output = (32 + 8) / 8 in each rep.
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(t["total_tok_per_s_reps"][i].get<double>() / t["output_tok_per_s_reps"][i].get<double>(), 5.0, 1e-9);
  }
  // Each rep: one step prefills the 16 prompts (512 tokens, under the 8192 budget) and samples
  // their first tokens, then 7 decode steps of 16 sequences: 24 steps, 21 of them decode steps.
  const auto& es = (*r)["engine_stats"];
  EXPECT_EQ(es["steps"].get<int64_t>(), 24);
  EXPECT_EQ(es["decode_steps"].get<int64_t>(), 21);
  EXPECT_EQ(es["decode_step_tokens"].get<int64_t>(), 21 * 16);
  EXPECT_GT(es["decode_forward_s"].get<double>(), 0.0);
  EXPECT_LT(es["decode_forward_s"].get<double>(), es["forward_s"].get<double>());
  EXPECT_NE(format_offline_table(*r).find("engine forward: 21 decode steps (mean batch 16.0)"), std::string::npos)
      << format_offline_table(*r);
}

TEST(BenchOffline, BadFlagsAreRefusedWithTheirNames) {
  OfflineOptions o = base_options();
  o.mixed.num_prompts = 4;
  o.mixed.input = {.lo = 100, .hi = 50};
  auto r = run_offline(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("--mixed-input-range"), std::string::npos) << r.status().to_string();

  o = base_options();
  o.mixed.num_prompts = 4;
  o.mixed.input = {.lo = 16, .hi = 500};  // + 64 outputs > stories260K's 512-token context
  o.mixed.output = {.lo = 1, .hi = 64};
  r = run_offline(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("context"), std::string::npos) << r.status().to_string();

  o = base_options();
  o.engine.max_num_seqs = 8;
  o.itl.batch = 8;
  r = run_offline(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("--max-num-seqs"), std::string::npos) << r.status().to_string();

  o = base_options();
  o.num_prompts = 2;
  o.input_len = 1024;  // beyond the 512-token context
  r = run_offline(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("--input-len"), std::string::npos) << r.status().to_string();
}


// --kernel-trace's wiring, with a stand-in tracer (the CUDA one needs a GPU: tests/cuda): one more,
// traced run of each prefill and decode point, its accounting in the point's JSON, the engine's
// step count as the eager divisor, a Chrome trace file per point, and a tracer's error named.
class FakeTracer : public KernelTracer {
 public:
  int starts = 0, stops = 0;
  bool fail = false;
  Status start() override {
    ++starts;
    return Status::ok();
  }
  Result<std::vector<KernelRecord>> stop() override {
    ++stops;
    if (fail) return resource_exhausted("kernel trace: CUPTI dropped 3 kernel records");
    std::vector<KernelRecord> rs;
    const auto add = [&](const char* name, uint64_t s, uint64_t e, uint32_t corr, uint32_t graph) {
      KernelRecord r;
      r.name = name;
      r.start_ns = s;
      r.end_ns = e;
      r.correlation = corr;
      r.graph_id = graph;
      rs.push_back(r);
    };
    if (stops == 1) {  // the prefill point: eager launches, 6 us busy of 8
      add("prefill_a", 0, 4000, 1, 0);
      add("prefill_b", 6000, 8000, 2, 0);
    } else {  // the decode point: 4 graph replays of 10 us kernels, 20 us apart
      for (uint32_t i = 0; i < 4; ++i) add("decode_k", 20000 * i, 20000 * i + 10000, 50 + i, 9);
    }
    return rs;
  }
};

TEST(BenchOffline, KernelTraceAddsATracedRunOfEachPoint) {
  OfflineOptions o = base_options();
  o.prefill_lens = {16};
  o.batches = {1};
  o.decode_prompt_len = 8;
  o.decode_tokens = 4;
  auto tracer = std::make_shared<FakeTracer>();
  o.kernel_tracer = tracer;
  o.kernel_trace_dir = frugal::testing::binary_dir() + "/bench_offline_kernel_trace";
  std::filesystem::remove_all(o.kernel_trace_dir);
  std::filesystem::create_directories(o.kernel_trace_dir);
  auto r = run_offline(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(tracer->starts, 2);
  EXPECT_EQ(tracer->stops, 2);
  const auto& p = (*r)["prefill"][0]["kernel_trace"];
  EXPECT_EQ(p["mode"], "eager");
  EXPECT_DOUBLE_EQ(p["steps"].get<double>(), 1);  // a 16-token prompt, one output token: one engine step
  EXPECT_NEAR(p["kernel_us"].get<double>(), 6, 1e-9);
  const auto& d = (*r)["decode"][0]["kernel_trace"];
  EXPECT_EQ(d["mode"], "graph");
  EXPECT_DOUBLE_EQ(d["steps"].get<double>(), 2);
  EXPECT_NEAR(d["step_us"].get<double>(), 15, 1e-9);  // replays 2 and 3: [20, 50] us
  // The timed figures are still there, and the table shows the traces.
  EXPECT_GT((*r)["decode"][0]["tok_per_s"]["median"].get<double>(), 0);
  const std::string table = format_offline_table(*r);
  EXPECT_NE(table.find("kernel trace, prefill 16"), std::string::npos) << table;
  EXPECT_NE(table.find("kernel trace, decode b=1 (timed step "), std::string::npos) << table;
  // The decode point's timed step against its traced kernels (the prefill point has no timed step).
  const double timed_us = 1000.0 * (*r)["decode"][0]["step_ms"].get<double>();
  EXPECT_NEAR(d["timed_step_us"].get<double>(), timed_us, 1e-6 * timed_us);
  EXPECT_NEAR(d["timed_outside_kernels_us"].get<double>(), std::max(0.0, timed_us - d["kernel_us"].get<double>()),
              1e-6 * timed_us);
  EXPECT_FALSE(p.contains("timed_step_us"));
  EXPECT_NE(table.find("outside the kernels untraced"), std::string::npos) << table;
  // One Chrome trace per point.
  for (const char* f : {"/prefill_16.trace.json", "/decode_b1.trace.json"}) {
    std::ifstream in(o.kernel_trace_dir + f);
    ASSERT_TRUE(in.good()) << f;
    const auto j = nlohmann::json::parse(in);
    EXPECT_FALSE(j["traceEvents"].empty()) << f;
  }
  EXPECT_EQ(d["file"], o.kernel_trace_dir + "/decode_b1.trace.json");
  EXPECT_TRUE(std::filesystem::exists(o.kernel_trace_dir + "/decode_b1.svg"));
  EXPECT_TRUE(std::filesystem::exists(o.kernel_trace_dir + "/prefill_16.svg"));

  tracer = std::make_shared<FakeTracer>();
  tracer->fail = true;
  o.kernel_tracer = tracer;
  r = run_offline(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("--kernel-trace prefill_16"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find("dropped 3"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace frugal::bench
