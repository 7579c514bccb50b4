// frugal eval against the PyTorch oracles of tests/data/eval_oracle (issue 15, acceptance 1;
// format: tests/data/eval_oracle/README.md, written by scripts/gpu/eval_oracles.py), fp32 on
// the CPU:
//  - ppl.json: per entry (the reference model on wikitext-2, stories260K on a story, the golden
//    models on fixed ids) our tokenization equals the fixture's, our chunks are its chunks, every
//    per-token log-prob is within 1e-3 and the PPL within 0.1%;
//  - mc.json: 20 MMLU + 20 CMMLU questions (5-shot) on the reference model through the engine:
//    the context and continuation ids equal the fixture's and every choice log-likelihood is
//    within 1e-3.
// Skips (GTEST_SKIP) only while the fixture files are absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "eval/mc.h"
#include "eval/mc_data.h"
#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "runtime/engine.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace frugal::eval {
namespace {

std::string root() { return frugal::testing::source_root(); }

bool load_fixture(const std::string& name, nlohmann::json* out) {
  const std::string path = root() + "/tests/data/eval_oracle/" + name;
  if (!std::filesystem::exists(path)) return false;
  std::ifstream f(path);
  *out = nlohmann::json::parse(f);
  return true;
}

TEST(EvalOracle, PerplexityMatchesPyTorch) {
  nlohmann::json fx;
  if (!load_fixture("ppl.json", &fx)) GTEST_SKIP() << "tests/data/eval_oracle/ppl.json not present yet";
  ASSERT_EQ(fx["format"], "frugal-eval-oracle-ppl");
  ASSERT_GE(fx["entries"].size(), 2u);
  for (const auto& e : fx["entries"]) {
    const std::string name = e["name"];
    SCOPED_TRACE(name);
    const std::string dir = root() + "/" + e["model_dir"].get<std::string>();
    const int32_t ctx = e["ctx"];
    const auto tokens = e["tokens"].get<std::vector<int32_t>>();
    const int32_t bos = e["add_bos"].get<bool>() ? e["bos_id"].get<int32_t>() : -1;
    if (!e["text_file"].is_null()) {
      auto tok = Tokenizer::load(dir);
      ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
      auto text = read_text_file(root() + "/" + e["text_file"].get<std::string>());
      ASSERT_TRUE(text.is_ok());
      EXPECT_EQ((*tok)->add_bos_token(), e["add_bos"].get<bool>());
      EXPECT_EQ((*tok)->encode(*text, {.add_bos = bos >= 0, .parse_special = false}), tokens) << "tokenization differs";
    }
    auto plan = plan_chunks(static_cast<int64_t>(tokens.size()), ctx, 0, name);
    ASSERT_TRUE(plan.is_ok());
    ASSERT_EQ(plan->n_chunks, e["n_chunks"].get<int64_t>());
    ASSERT_EQ(plan->first, e["first_scored"].get<int32_t>());
    for (int64_t k = 0; k < plan->n_chunks; ++k)
      EXPECT_EQ(chunk_input(tokens, *plan, k, bos), e["chunks"][static_cast<size_t>(k)].get<std::vector<int32_t>>()) << "chunk " << k;

    auto m = load_scoring_model(dir, "cpu", 0, ctx);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    auto r = run_ppl(*m, tokens, bos, *plan, {});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_EQ(r->nll.n, e["n_scored"].get<int64_t>());
    double max_diff = 0;
    size_t i = 0;
    for (const auto& chunk : e["logprobs"])
      for (const auto& lp : chunk) max_diff = std::max(max_diff, std::abs(r->logprobs[i++] - lp.get<double>()));
    EXPECT_LT(max_diff, 1e-3) << "largest per-token log-prob difference";
    const double ppl = e["ppl"];
    EXPECT_NEAR(r->ppl, ppl, 1e-3 * ppl);
    EXPECT_NEAR(r->nll.se, e["nll_stderr"].get<double>(), 1e-3 * e["nll_stderr"].get<double>());
    std::printf("[ oracle ] %-28s PPL %.6f (PyTorch %.6f), max |Δ log p| %.2e\n", name.c_str(), r->ppl, ppl, max_diff);
  }
}

TEST(EvalOracle, ChoiceLogLikelihoodsMatchPyTorch) {
  nlohmann::json fx;
  if (!load_fixture("mc.json", &fx)) GTEST_SKIP() << "tests/data/eval_oracle/mc.json not present yet";
  ASSERT_EQ(fx["format"], "frugal-eval-oracle-mc");
  const std::string model = root() + "/" + fx["model_dir"].get<std::string>();
  const int32_t shots = fx["shots"];
  auto tok = Tokenizer::load(model);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  auto engine = runtime::create_engine({.model_dir = model, .threads = 0, .max_num_seqs = 16});
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();

  // Group the questions by data set; each subject's fixture rows are its first test records.
  std::map<std::pair<std::string, std::string>, std::vector<const nlohmann::json*>> groups;
  for (const auto& q : fx["questions"]) groups[{q["format"], q["data_dir"]}].push_back(&q);
  int64_t compared = 0;
  for (const auto& [key, qs] : groups) {
    SCOPED_TRACE(key.first);
    auto fmt = parse_mc_format(key.first);
    ASSERT_TRUE(fmt.is_ok());
    auto subjects = load_mc(root() + "/" + key.second, *fmt, {.shots = shots, .subjects = {}, .limit = 0});
    ASSERT_TRUE(subjects.is_ok()) << subjects.status().to_string();
    auto items = build_mc_items(*subjects, **tok, (*engine)->max_model_len());
    ASSERT_TRUE(items.is_ok()) << items.status().to_string();
    auto rep = run_mc(**engine, *subjects, *items, {.max_in_flight = 16});
    ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
    std::map<std::string, size_t> subject_index;
    for (size_t s = 0; s < subjects->size(); ++s) subject_index[(*subjects)[s].name] = s;
    // Items are in subject order, test questions in file order.
    std::map<std::pair<size_t, size_t>, const McItem*> item_of;
    {
      std::vector<size_t> seen(subjects->size(), 0);
      for (const auto& it : *items) item_of[{it.subject, seen[it.subject]++}] = &it;
    }
    for (const nlohmann::json* q : qs) {
      const std::string subject = (*q)["subject"];
      const size_t row = (*q)["row"];
      SCOPED_TRACE(subject + " row " + std::to_string(row));
      ASSERT_TRUE(subject_index.count(subject));
      const size_t s = subject_index[subject];
      ASSERT_LT(row, rep->questions[s].size());
      const McItem* it = item_of[{s, row}];
      EXPECT_EQ(it->context, (*q)["context_ids"].get<std::vector<int32_t>>()) << "context tokenization differs";
      EXPECT_EQ(std::string(1, static_cast<char>('A' + it->q->answer)), (*q)["answer"].get<std::string>());
      for (int c = 0; c < 4; ++c) {
        const std::string letter(1, static_cast<char>('A' + c));
        const auto& ch = (*q)["choices"][letter];
        EXPECT_EQ(it->continuation[static_cast<size_t>(c)], ch["ids"].get<std::vector<int32_t>>());
        EXPECT_NEAR(rep->questions[s][row].loglik[static_cast<size_t>(c)], ch["loglik"].get<double>(), 1e-3) << letter;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int64_t>(fx["questions"].size()));
  (*engine)->shutdown();
}

}  // namespace
}  // namespace frugal::eval
