// The GPU and model catalogs: complete, sourced, and faithful to tests/data/shared/configs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "plan_test_util.h"

namespace frugal::plan {
namespace {

using testing_util::catalog_dir;

TEST(PlanCatalogTest, GpuCatalogHasEveryGpuWithSources) {
  auto gpus = load_gpu_catalog(catalog_dir());
  ASSERT_TRUE(gpus.is_ok()) << gpus.status().to_string();
  for (const char* name : {"rtx-3090", "rtx-4090", "rtx-5090", "l4", "a10g", "l40s", "a100-40gb", "a100-80gb",
                           "h100-pcie", "h100-sxm", "h200", "b200"}) {
    auto g = find_gpu(*gpus, name);
    ASSERT_TRUE(g.is_ok()) << name;
    EXPECT_GT(g->memory_gib, 0) << name;
    EXPECT_GT(g->bandwidth_gb_s, 0) << name;
    EXPECT_GT(g->tflops_bf16, 0) << name;
    EXPECT_GT(g->tflops_int8, 0) << name;
    EXPECT_GT(g->price_usd_per_hour, 0) << name;
    EXPECT_FALSE(g->price_source.empty()) << name;
    EXPECT_FALSE(g->price_date.empty()) << name;
    EXPECT_FALSE(g->spec_source.empty()) << name;
    EXPECT_GT(g->link_gb_s(), 0) << name;
  }
  // Datasheet anchors: H200 141 GB at 4.8 TB/s; RTX 4090 24 GB at 1008 GB/s; no fp8 on Ampere.
  EXPECT_EQ(find_gpu(*gpus, "h200")->bandwidth_gb_s, 4800);
  EXPECT_EQ(find_gpu(*gpus, "rtx-4090")->bandwidth_gb_s, 1008);
  EXPECT_EQ(find_gpu(*gpus, "a100-80gb")->tflops_fp8, 0);
}

TEST(PlanCatalogTest, GpuLookupByAliasAndCase) {
  auto gpus = load_gpu_catalog(catalog_dir());
  ASSERT_TRUE(gpus.is_ok());
  EXPECT_EQ(find_gpu(*gpus, "H100")->name, "h100-sxm");
  EXPECT_EQ(find_gpu(*gpus, "RTX-4090")->name, "rtx-4090");
  auto bad = find_gpu(*gpus, "voodoo2");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("--gpu"), std::string::npos);
  EXPECT_NE(bad.status().message().find("h200"), std::string::npos);  // lists the catalog
}

TEST(PlanCatalogTest, BrokenGpuCatalogNamesFileAndField) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "plan_bad_catalog";
  fs::create_directories(dir);
  std::ofstream(dir / "gpus.json") << R"({"gpus": [{"name": "x", "memory_gib": "24"}]})";
  auto gpus = load_gpu_catalog(dir.string());
  ASSERT_FALSE(gpus.is_ok());
  EXPECT_NE(gpus.status().message().find("gpus.json"), std::string::npos);
  EXPECT_NE(gpus.status().message().find("memory_gib"), std::string::npos);
  fs::remove_all(dir);
}

TEST(PlanCatalogTest, ModelCatalogCopiesSharedConfigsVerbatim) {
  const auto names = catalog_model_names(catalog_dir());
  EXPECT_EQ(names.size(), 12u);
  int copies = 0;
  for (const std::string& name : names) {
    const std::string shared = frugal::testing::shared_data_dir() + "/configs/" + name + ".json";
    std::ifstream entry(catalog_dir() + "/models/" + name + ".json");
    const auto j = nlohmann::json::parse(entry);
    EXPECT_FALSE(j.value("provenance", "").empty()) << name;
    if (!std::filesystem::exists(shared)) continue;
    std::ifstream in(shared);
    EXPECT_EQ(j["config"], nlohmann::json::parse(in)) << name;
    ++copies;
  }
  EXPECT_EQ(copies, 11);  // all but deepseek-llm-7b
}

TEST(PlanCatalogTest, DeepSeekLlm7bPublishedArchitecture) {
  const ModelEntry e = testing_util::model("deepseek-llm-7b");
  EXPECT_EQ(e.config.architecture, "LlamaForCausalLM");
  EXPECT_EQ(e.config.hidden_size, 4096);
  EXPECT_EQ(e.config.num_hidden_layers, 30);
  EXPECT_EQ(e.config.num_attention_heads, 32);
  EXPECT_EQ(e.config.num_key_value_heads, 32);
  EXPECT_EQ(e.config.intermediate_size, 11008);
  EXPECT_EQ(e.config.vocab_size, 102400);
  EXPECT_EQ(e.config.max_position_embeddings, 4096);
}

TEST(PlanCatalogTest, ModelByPathAndUnknownName) {
  auto byfile = resolve_model(frugal::testing::shared_data_dir() + "/configs/qwen2.5-0.5b-instruct.json",
                              catalog_dir());
  ASSERT_TRUE(byfile.is_ok()) << byfile.status().to_string();
  EXPECT_TRUE(byfile->config.tie_word_embeddings);
  auto bad = resolve_model("deepseek-r2", catalog_dir());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("--model"), std::string::npos);
  EXPECT_NE(bad.status().message().find("deepseek-r1-distill-qwen-7b"), std::string::npos);
}

}  // namespace
}  // namespace frugal::plan
