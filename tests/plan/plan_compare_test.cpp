// `frugal plan --compare` and the ownership cost against hand arithmetic (issue 21, acceptance 4
// and 5): configurations that do not fit are never listed, the order follows $/1M tokens, and
// the owned cost of one GPU matches a case computed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "plan/compare.h"
#include "plan_test_util.h"

namespace frugal::plan {
namespace {

using testing_util::catalog_dir;
using testing_util::gpu;
using testing_util::model;

// R1-Distill-Qwen-7B: 7,615,616,512 parameters, embedding 152,064 x 3,584 (plan_speed_test);
// bf16 KV per token 2 x 28 layers x 4 KV heads x 128 x 2 B = 57,344 B.
constexpr double kParams7b = 7615616512.0;
constexpr double kEmbed7b = 544997376.0;
constexpr double kKv7b = 57344.0;

// DeepSeek LLM 67B (LlamaForCausalLM: hidden 8192, 95 layers, 64 heads / 8 KV heads x 128,
// intermediate 22016, vocab 102400, untied lm_head), counted by hand from its config.
constexpr double kHidden = 8192, kInter = 22016, kVocab = 102400, kLayers = 95, kKvDim = 8 * 128;
// Linear projections of one layer as [out, in]: q, k, v, o, gate, up, down.
const std::vector<std::pair<double, double>> kLinears67b = {
    {kHidden, kHidden}, {kKvDim, kHidden}, {kKvDim, kHidden}, {kHidden, kHidden},
    {kInter, kHidden},  {kInter, kHidden}, {kHidden, kInter}};
constexpr double kNorms67b = (2 * kLayers + 1) * kHidden;
constexpr double kKv67b = 2 * kLayers * kKvDim * 2;  // 389,120 B per token, bf16

std::vector<GpuSpec> catalog() {
  auto g = load_gpu_catalog(catalog_dir());
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  return g.is_ok() ? *g : std::vector<GpuSpec>{};
}

Comparison run(CompareRequest r) {
  auto c = compare_platforms(std::move(r));
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : Comparison{};
}

const CompareRow* find(const Comparison& c, const std::string& g, int n, const std::string& prec) {
  for (const CompareRow& r : c.rows) {
    if (r.gpu == g && r.n_gpus == n && r.precision == prec) return &r;
  }
  return nullptr;
}

// Batch-1 decode at context 4096 on one GPU: the bandwidth roofline (docs/plan.md).
double b1_tok_per_s(const GpuSpec& g, double weight_bytes_read, double kv_per_token) {
  return 0.75 * g.bandwidth_gb_s * 1e9 / (weight_bytes_read + 4096.0 * kv_per_token);
}

TEST(PlanCompareTest, Qwen7bBatch1RankingFollowsHandComputedCost) {
  CompareRequest r{.model = model("deepseek-r1-distill-qwen-7b"), .gpus = catalog()};
  r.precisions = {WeightPrecision::kBf16};
  r.gpus_max = 1;
  r.context = 4096;
  r.concurrency = 1;
  const Comparison c = run(r);
  // Every one-GPU bf16 configuration whose 14.2 GiB of weights fit: all catalog GPUs have >= 24 GB.
  ASSERT_EQ(c.rows.size(), catalog().size());
  std::vector<std::pair<double, std::string>> hand;
  for (const GpuSpec& g : catalog()) {
    const double tps = b1_tok_per_s(g, 2.0 * (kParams7b - kEmbed7b), kKv7b);
    const double usd = g.price_usd_per_hour / (tps * 3600.0) * 1e6;
    hand.emplace_back(usd, g.name);
    const CompareRow* row = find(c, g.name, 1, "bf16");
    ASSERT_NE(row, nullptr) << g.name;
    EXPECT_NEAR(row->tok_per_s, tps, tps * 1e-9) << g.name;
    EXPECT_NEAR(row->usd_per_m_rent, usd, usd * 1e-9) << g.name;
    EXPECT_EQ(row->batch, 1);
  }
  std::stable_sort(hand.begin(), hand.end());
  for (size_t i = 0; i < hand.size(); ++i) EXPECT_EQ(c.rows[i].gpu, hand[i].second) << "rank " << i + 1;
  // Worked by hand with the catalog's figures: RTX 4090 (1008 GB/s, $0.34/h) beats H200
  // (4800 GB/s, $3.59/h) at batch 1: 52.6 vs 250.4 tok/s -> $1.80 vs $3.98 per 1M.
  EXPECT_NEAR(find(c, "rtx-4090", 1, "bf16")->usd_per_m_rent, 1.795, 0.005);
  EXPECT_NEAR(find(c, "h200", 1, "bf16")->usd_per_m_rent, 3.982, 0.005);
}

TEST(PlanCompareTest, Llm67bListsOnlyWhatFits) {
  CompareRequest r{.model = model("deepseek-llm-67b"), .gpus = catalog()};
  r.context = 4096;
  r.concurrency = 1;
  const Comparison c = run(r);
  ASSERT_FALSE(c.rows.empty());
  // bf16 on one H200: 67,425,001,472 params x 2 B = 125.59 GiB of weights, + 0.75 GiB context
  // and graphs + 8192 x (4 x 8192 + 3 x 22016) x 2 B = 1.51 GiB workspace > 141 x 0.9 = 126.9 GiB.
  double params = 2 * kVocab * kHidden + kNorms67b;
  for (auto [out, in] : kLinears67b) params += kLayers * out * in;
  EXPECT_EQ(params, 67425001472.0);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  EXPECT_GT(2 * params / gib + 0.75 + 8192.0 * (4 * kHidden + 3 * kInter) * 2 / gib, 141 * 0.9);
  EXPECT_EQ(find(c, "h200", 1, "bf16"), nullptr);
  EXPECT_NE(find(c, "h200", 2, "bf16"), nullptr);
  // 24 GB GPUs: nothing on 1; on 2 only int4. Tensor-parallel ranks hold the shard the engine
  // loads (model/shard.h), the 102400 x 8192 bf16 embedding and lm_head split by vocab like the
  // rest: int4 on 2 is 65.75 G linear params x 0.5625 B / 2 = 17.22 GiB + 0.78 GiB embedding half
  // + 0.78 GiB lm_head half = 18.79 GiB per GPU: 24 GiB x 0.9 - 18.79 - 1.0 workspace - 0.75
  // overhead leaves a KV budget of 1.06 GiB, above the 4096 x 389,120 / 2 B = 0.74 GiB the
  // context needs. int8 (1 B + 4 B per row) is 32.4 GiB per GPU on 2: no.
  for (const std::string g : {"rtx-4090", "rtx-3090", "l4", "a10g"}) {
    for (const CompareRow& row : c.rows) {
      if (row.gpu != g) continue;
      EXPECT_FALSE(row.n_gpus == 1) << g;
      if (row.n_gpus == 2) {
        EXPECT_EQ(row.precision, "int4 g128") << g;
      }
    }
  }
  EXPECT_NE(find(c, "rtx-4090", 2, "int4 g128"), nullptr);
  EXPECT_NE(find(c, "rtx-4090", 4, "int4 g128"), nullptr);
  EXPECT_GT(c.n_not_fitting, 0);
  // int8 on one H200, by hand: linears out x in + 4 x out (the engine's f32 row scales), embedding,
  // lm_head and norms bf16; decode reads all but the embedding plus 4096 x 389,120 B of KV.
  double int8_bytes = 2 * (2 * kVocab * kHidden) + 2 * kNorms67b;  // embedding + lm_head, norms: bf16
  for (auto [out, in] : kLinears67b) int8_bytes += kLayers * (out * in + 4 * out);
  const GpuSpec h200 = gpu("h200");
  const double read = int8_bytes - 2 * kVocab * kHidden;  // everything but the embedding table
  const double tps_h200 = b1_tok_per_s(h200, read, kKv67b);
  const CompareRow* row = find(c, "h200", 1, "int8");
  ASSERT_NE(row, nullptr);
  EXPECT_NEAR(row->tok_per_s, tps_h200, tps_h200 * 1e-9);
  EXPECT_NEAR(row->usd_per_m_rent, 3.59 / (tps_h200 * 3600.0) * 1e6, 1e-9);
  // The ranking follows $/1M tokens.
  for (size_t i = 1; i < c.rows.size(); ++i) EXPECT_LE(c.rows[i - 1].usd_per_m_rent, c.rows[i].usd_per_m_rent) << i;
}

TEST(PlanCompareTest, MaxBatchIsTheLargestThatFits) {
  CompareRequest r{.model = model("deepseek-r1-distill-qwen-7b"), .gpus = {gpu("h200")}};
  r.precisions = {WeightPrecision::kBf16};
  r.gpus_max = 1;
  const Comparison c = run(r);
  ASSERT_EQ(c.rows.size(), 1u);
  const CompareRow& row = c.rows[0];
  EXPECT_EQ(row.batch, row.max_batch);
  PlanRequest at{.model = r.model, .gpu = r.gpus[0], .context = 4096, .concurrency = row.batch};
  auto p = make_plan(at);
  ASSERT_TRUE(p.is_ok());
  EXPECT_TRUE(p->memory.fits);
  at.concurrency = row.batch + 1;
  EXPECT_FALSE(make_plan(at)->memory.fits);
  EXPECT_NEAR(row.tok_per_s, p->speed.at_concurrency.tok_per_s(), 1e-9);
}

// Acceptance 5: one GPU, known price, power, utilization and throughput.
TEST(PlanOwnershipTest, HandComputedCase) {
  // $30,000 over 3 years, $1,000/year operations, 700 W at $0.10/kWh, busy half the hours,
  // 1,000 tok/s: capex 30000 / 26280 = 1.141553 $/h, ops 1000 / 8760 = 0.114155 $/h, energy
  // 0.7 kW x 0.5 x 0.10 = 0.035 $/h; 1.290708 $/h / (1000 x 3600 x 0.5 tokens/h) = $0.717060/1M.
  GpuSpec g = gpu("h100-sxm");
  auto in = resolve_ownership({.purchase_usd = 30000, .years = 3, .usd_per_kwh = 0.10, .utilization = 0.5,
                               .ops_usd_per_year = 1000, .power_w = 700},
                              g);
  ASSERT_TRUE(in.is_ok()) << in.status().to_string();
  const OwnershipCost c = ownership_cost(*in, 1, 1000.0);
  EXPECT_NEAR(c.capex_per_hour, 1.1415525114155252, 1e-12);
  EXPECT_NEAR(c.ops_per_hour, 0.1141552511415525, 1e-12);
  EXPECT_NEAR(c.energy_per_hour, 0.035, 1e-12);
  EXPECT_NEAR(c.usd_per_hour, 1.2907077625570775, 1e-12);
  EXPECT_NEAR(c.usd_per_m_tokens, 0.7170598680872653, 1e-12);
  // 0.7 kW for the 1,000 s one million tokens take.
  EXPECT_NEAR(c.kwh_per_m_tokens, 0.19444444444444445, 1e-12);
  // Two GPUs at the same total rate cost twice as much per token.
  EXPECT_NEAR(ownership_cost(*in, 2, 1000.0).usd_per_m_tokens, 2 * 0.7170598680872653, 1e-12);
}

TEST(PlanOwnershipTest, DefaultsComeFromTheCatalogAndBadInputIsNamed) {
  const GpuSpec g = gpu("h200");
  EXPECT_GT(g.list_price_usd, 0);
  EXPECT_EQ(g.tdp_w, 700);
  EXPECT_FALSE(g.list_price_source.empty());
  auto in = resolve_ownership({}, g);
  ASSERT_TRUE(in.is_ok());
  EXPECT_EQ(in->purchase_usd, g.list_price_usd);
  EXPECT_EQ(in->power_w, 700);
  EXPECT_NE(in->power_source.find("TDP"), std::string::npos);
  auto bad = resolve_ownership({.utilization = 1.5}, g);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("--utilization"), std::string::npos);
  EXPECT_NE(resolve_ownership({.years = 0}, g).status().message().find("--years"), std::string::npos);
  GpuSpec unpriced = g;
  unpriced.list_price_usd = 0;
  EXPECT_NE(resolve_ownership({}, unpriced).status().message().find("--purchase-usd"), std::string::npos);
  // Every catalog GPU carries a price and a TDP with a source.
  for (const GpuSpec& s : catalog()) {
    EXPECT_GT(s.list_price_usd, 0) << s.name;
    EXPECT_GT(s.tdp_w, 0) << s.name;
    EXPECT_FALSE(s.list_price_source.empty()) << s.name;
    EXPECT_FALSE(s.tdp_source.empty()) << s.name;
  }
}

TEST(PlanOwnershipTest, CompareRanksByOwnedCost) {
  CompareRequest r{.model = model("deepseek-r1-distill-qwen-7b"), .gpus = catalog()};
  r.precisions = {WeightPrecision::kBf16};
  r.gpus_max = 1;
  r.context = 4096;
  r.concurrency = 1;
  r.own = {.years = 3, .usd_per_kwh = 0.15, .utilization = 1.0};
  r.rank_by = RankBy::kOwn;
  const Comparison c = run(r);
  ASSERT_EQ(c.rows.size(), catalog().size());
  std::vector<std::pair<double, std::string>> hand;
  for (const GpuSpec& g : catalog()) {
    const double tps = b1_tok_per_s(g, 2.0 * (kParams7b - kEmbed7b), kKv7b);
    const double per_hour = g.list_price_usd / (3 * 8760.0) + g.tdp_w / 1000.0 * 0.15;
    const double usd = per_hour / (tps * 3600.0) * 1e6;
    hand.emplace_back(usd, g.name);
    EXPECT_NEAR(find(c, g.name, 1, "bf16")->own.usd_per_m_tokens, usd, usd * 1e-9) << g.name;
  }
  std::stable_sort(hand.begin(), hand.end());
  for (size_t i = 0; i < hand.size(); ++i) EXPECT_EQ(c.rows[i].gpu, hand[i].second) << "rank " << i + 1;
  // The owned ranking is not the rented one (B200's $5.98/h rent vs its amortized price).
  CompareRequest rent = r;
  rent.rank_by = RankBy::kRent;
  const Comparison by_rent = run(rent);
  bool differs = false;
  for (size_t i = 0; i < c.rows.size(); ++i) differs = differs || c.rows[i].gpu != by_rent.rows[i].gpu;
  EXPECT_TRUE(differs);
}

TEST(PlanOwnershipTest, SinglePlanShowsOwnedCostBesideRent) {
  PlanRequest r = testing_util::request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.own = {.purchase_usd = 30000, .years = 3, .usd_per_kwh = 0.10, .utilization = 0.5, .ops_usd_per_year = 1000,
           .power_w = 700};
  const Plan p = testing_util::plan(r);
  ASSERT_TRUE(p.cost.has_own);
  EXPECT_NEAR(p.cost.own_b1.usd_per_m_tokens,
              1.2907077625570775 / (p.speed.decode_b1.tok_per_s() * 3600.0 * 0.5) * 1e6, 1e-9);
}

}  // namespace
}  // namespace frugal::plan
