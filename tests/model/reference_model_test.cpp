// The trained reference model (models/reference-qwen2-20m, written by scripts/gpu/train_reference.py
// on the GPU machine with PyTorch): frugal loads it; its tokenizer encodes exactly as the Python
// `tokenizers` library did (samples.json, and the eval oracles' ids when
// tests/data/eval_oracle/{ppl,mc}.json are present), decodes to the same text and round-trips text;
// its chat template renders ChatML; greedy generation on the CPU backend reproduces PyTorch's greedy
// samples (fp32 compute from the bf16 weights); teacher-forced log-probs of the oracle's wikitext
// chunks match PyTorch's (and, for every other model in tests/data/eval_oracle/ppl.json:
// stories260K and the golden models, the same model-level check). Every test skips while the model
// (or the fixture it needs) is absent.
// FRUGAL_REFERENCE_MODEL overrides the model directory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "core/mapped_file.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "test_paths.h"
#include "tokenizer/jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace frugal::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string model_dir() {
  if (const char* e = std::getenv("FRUGAL_REFERENCE_MODEL")) return e;
  return frugal::testing::source_root() + "/models/reference-qwen2-20m";
}
std::string oracle_dir() { return frugal::testing::source_root() + "/tests/data/eval_oracle"; }
bool have_model() { return fs::exists(model_dir() + "/config.json"); }

#define SKIP_WITHOUT_MODEL()                                                                  \
  if (!have_model()) GTEST_SKIP() << model_dir() << " is absent: run scripts/gpu/reference.sh " \
                                     "on the GPU machine and scripts/eval/install_reference.sh"

json read_json(const std::string& path) {
  auto text = read_file(path);
  if (!text.is_ok()) throw std::runtime_error(path + ": " + text.status().to_string());
  return json::parse(*text);
}

std::string read_text(const std::string& path) {
  auto text = read_file(path);
  if (!text.is_ok()) throw std::runtime_error(path + ": " + text.status().to_string());
  return *text;
}

std::unique_ptr<Tokenizer> load_tokenizer() {
  auto tok = Tokenizer::load(model_dir());
  if (!tok.is_ok()) throw std::runtime_error(tok.status().to_string());
  return std::move(*tok);
}

std::vector<int32_t> ids_of(const json& a) { return a.get<std::vector<int32_t>>(); }

TEST(ReferenceModel, TokenizerShapeAndSpecials) {
  SKIP_WITHOUT_MODEL();
  auto tok = load_tokenizer();
  const json cfg = read_json(model_dir() + "/config.json");
  EXPECT_EQ(tok->vocab_size(), cfg["vocab_size"].get<int32_t>());
  EXPECT_EQ(tok->token_id("<|endoftext|>"), 0);
  EXPECT_EQ(tok->token_id("<|im_start|>"), 1);
  EXPECT_EQ(tok->token_id("<|im_end|>"), 2);
  for (int32_t id : {0, 1, 2}) EXPECT_TRUE(tok->is_special(id)) << id;
  EXPECT_FALSE(tok->add_bos_token());
  // Special tokens written in the text are matched whole, and left as text with parse_special off.
  EXPECT_EQ(tok->encode("<|im_end|>"), std::vector<int32_t>{2});
  auto plain = tok->encode("<|im_end|>", {.parse_special = false});
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
}

TEST(ReferenceModel, TokenizerRoundTripsText) {
  SKIP_WITHOUT_MODEL();
  auto tok = load_tokenizer();
  const std::string root = frugal::testing::source_root();
  std::vector<std::string> texts = {
      read_text(oracle_dir() + "/wikitext-2-test-head.txt"),
      read_text(oracle_dir() + "/story.txt"),
      read_text(root + "/tests/data/eval/oracle-cmmlu/dev/arts.csv"),
      read_text(root + "/tests/data/eval/oracle-mmlu/dev/abstract_algebra_dev.csv"),
      "\"Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes.\"\n\n",
      "Natasha\tsaid:  'I'll go!'  1812 \xe2\x80\x94 \xd0\x9d\xd0\xb0\xd1\x82\xd0\xb0\xd1\x88\xd0\xb0 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\r\n   \n",
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
  };
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = tok->encode(texts[i]);
    EXPECT_FALSE(ids.empty()) << "text " << i;
    EXPECT_EQ(tok->decode(ids), texts[i]) << "text " << i;
  }
}

TEST(ReferenceModel, ChatTemplateRendersChatML) {
  SKIP_WITHOUT_MODEL();
  auto tok = load_tokenizer();
  ASSERT_FALSE(tok->chat_template().empty());
  const json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "Hi"}},
                                     {{"role", "assistant"}, {"content", "Hello."}},
                                     {{"role", "user"}, {"content", "2+2?"}}});
  auto r = jinja::render_chat_template(tok->chat_template(), messages, {.add_generation_prompt = true});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(*r,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto no_gen = jinja::render_chat_template(tok->chat_template(), json::array({messages[1]}),
                                            {.add_generation_prompt = false});
  ASSERT_TRUE(no_gen.is_ok()) << no_gen.status().to_string();
  EXPECT_EQ(*no_gen, "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(tok->encode(*no_gen).front(), 1);
}

TEST(ReferenceModel, TokenizerMatchesPythonTokenizers) {
  SKIP_WITHOUT_MODEL();
  auto tok = load_tokenizer();
  const json samples = read_json(model_dir() + "/samples.json").at("samples");
  ASSERT_FALSE(samples.empty());
  for (const auto& s : samples) {
    const std::string prompt = s["prompt"];
    EXPECT_EQ(tok->encode(prompt), ids_of(s["prompt_ids"])) << prompt;
    // decode as tokenizers' decode(skip_special_tokens=False) did (partial UTF-8 -> U+FFFD).
    EXPECT_EQ(tok->decode(ids_of(s["output_ids"])), s["output_text"].get<std::string>()) << prompt;
  }
  if (fs::exists(oracle_dir() + "/ppl.json")) {
    const json ppl = read_json(oracle_dir() + "/ppl.json");
    for (const auto& e : ppl["entries"]) {
      if (e["name"] != "reference") continue;
      const std::string text = read_text(frugal::testing::source_root() + "/" + e["text_file"].get<std::string>());
      EXPECT_EQ(tok->encode(text, {.add_bos = tok->add_bos_token()}), ids_of(e["tokens"]));
    }
  }
  if (fs::exists(oracle_dir() + "/mc.json")) {
    const json mc = read_json(oracle_dir() + "/mc.json");
    for (const auto& q : mc["questions"]) {
      const std::string where = q["test_file"].get<std::string>() + " row " + std::to_string(q["row"].get<int>());
      EXPECT_EQ(tok->encode(q["context"].get<std::string>(), {.add_bos = tok->add_bos_token()}),
                ids_of(q["context_ids"])) << where;
      for (const char* letter : {"A", "B", "C", "D"}) {
        EXPECT_EQ(tok->encode(std::string(" ") + letter, {.parse_special = false}), ids_of(q["choices"][letter]["ids"]))
            << where << " " << letter;
      }
    }
  }
}

TEST(ReferenceModel, GreedyMatchesPyTorchSamples) {
  SKIP_WITHOUT_MODEL();
  auto backend = make_cpu_backend();
  auto m = Model::load(model_dir(), backend.get(), {});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const json samples = read_json(model_dir() + "/samples.json").at("samples");
  ASSERT_FALSE(samples.empty());
  // PyTorch (fp32, CPU) and frugal round differently (their log-probs differ by ~3e-5 on this
  // model, see TeacherForcedLogprobsMatchPyTorch), so a step whose top-2 logits are within 1e-3 may
  // go either way; compare up to the first such step (margins[i]: top1 - top2 at step i).
  constexpr double kTie = 1e-3;
  int compared = 0, total = 0;
  for (const auto& s : samples) {
    const auto prompt = ids_of(s["prompt_ids"]);
    const auto want = ids_of(s["output_ids"]);
    const auto margins = s["margins"].get<std::vector<double>>();
    ASSERT_EQ(margins.size(), want.size());
    runtime::SamplingParams sp{.temperature = 0, .max_tokens = static_cast<int32_t>(want.size()), .ignore_eos = true};
    auto r = runtime::generate(**m, prompt, sp);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    // Tokens before the first near-tie step are determined; compare those.
    size_t n = 0;
    while (n < want.size() && margins[n] >= kTie) ++n;
    ASSERT_GE(r->tokens.size(), n);
    EXPECT_EQ(std::vector<int32_t>(r->tokens.begin(), r->tokens.begin() + static_cast<std::ptrdiff_t>(n)),
              std::vector<int32_t>(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(n)))
        << s["prompt"].get<std::string>();
    compared += static_cast<int>(n);
    total += static_cast<int>(want.size());
  }
  // Most steps must be comparable, or the check says little.
  EXPECT_GE(compared * 2, total) << compared << " of " << total << " greedy steps compared";
  std::printf("greedy: %d of %d PyTorch steps compared, all equal\n", compared, total);
}

// Feeds every chunk of a ppl.json entry (the exact ids PyTorch saw) to the model on the CPU
// backend and compares the scored tokens' log-probs and the perplexity with PyTorch's.
void check_ppl_entry(const json& entry, double per_token_tol) {  // observed: <= 3e-5
  const std::string name = entry["name"];
  const int32_t ctx = entry["ctx"], first = entry["first_scored"];
  auto backend = make_cpu_backend();
  auto m = Model::load(frugal::testing::source_root() + "/" + entry["model_dir"].get<std::string>(), backend.get(),
                       // max_context: llama_dynamic_rope's default (2 x 24) is below the chunk; dynamic
                       // NTK scaling exists to run past max_position_embeddings.
                       {.max_batch_tokens = ctx, .max_logit_rows = ctx, .max_context = ctx});
  ASSERT_TRUE(m.is_ok()) << name << ": " << m.status().to_string();
  const int32_t vocab = static_cast<int32_t>((*m)->config().vocab_size);
  constexpr int32_t kBlock = 16;
  double nll = 0, nll_ref = 0, max_diff = 0;
  int64_t n = 0;
  for (size_t k = 0; k < entry["chunks"].size(); ++k) {
    const auto ids = ids_of(entry["chunks"][k]);
    ASSERT_EQ(static_cast<int32_t>(ids.size()), ctx) << name;
    std::vector<int32_t> pos(static_cast<size_t>(ctx)), table;
    for (int32_t i = 0; i < ctx; ++i) pos[static_cast<size_t>(i)] = i;
    for (int32_t b = 0; b < (ctx + kBlock - 1) / kBlock; ++b) table.push_back(b);
    const std::vector<int32_t> q_start = {0, ctx}, ctx_len = {ctx};
    auto kv = KvStorage::create(backend.get(), (*m)->config(),
                                {.n_blocks = static_cast<int32_t>(table.size()), .block_size = kBlock});
    ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
    std::vector<float> logits(static_cast<size_t>(ctx) * static_cast<size_t>(vocab));
    auto st = (*m)->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx_len,
                             .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                             .slot_mapping = pos, .logits_rows = pos},
                            **kv, logits.data());
    ASSERT_TRUE(st.is_ok()) << name << ": " << st.to_string();
    const auto& want = entry["logprobs"][k];
    for (int32_t j = first; j < ctx - 1; ++j) {
      const float* row = logits.data() + static_cast<size_t>(j) * static_cast<size_t>(vocab);
      double mx = row[0];
      for (int32_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      double sum = 0;
      for (int32_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      const double lp = static_cast<double>(row[ids[static_cast<size_t>(j + 1)]]) - mx - std::log(sum);
      const double ref = want[static_cast<size_t>(j - first)].get<double>();
      max_diff = std::max(max_diff, std::abs(lp - ref));
      nll -= lp;
      nll_ref -= ref;
      ++n;
    }
  }
  ASSERT_EQ(n, entry["n_scored"].get<int64_t>()) << name;
  EXPECT_LE(max_diff, per_token_tol) << name << ": largest per-token log-prob difference";
  const double ppl = std::exp(nll / static_cast<double>(n));
  const double ppl_ref = entry["ppl"].get<double>();
  EXPECT_NEAR(std::exp(nll_ref / static_cast<double>(n)), ppl_ref, 1e-6 * ppl_ref) << name << ": ppl.json is inconsistent";
  EXPECT_LE(std::abs(ppl - ppl_ref) / ppl_ref, 1e-3) << name << ": frugal PPL " << ppl << " PyTorch " << ppl_ref;
  std::printf("%-28s %5lld tokens  PPL frugal %.6g PyTorch %.6g  max |log-prob diff| %.3g\n", name.c_str(),
              static_cast<long long>(n), ppl, ppl_ref, max_diff);
}

json ppl_fixture() { return read_json(oracle_dir() + "/ppl.json"); }

TEST(ReferenceModel, TeacherForcedLogprobsMatchPyTorch) {
  SKIP_WITHOUT_MODEL();
  if (!fs::exists(oracle_dir() + "/ppl.json")) GTEST_SKIP() << oracle_dir() << "/ppl.json is absent";
  const json fixture = ppl_fixture();
  bool found = false;
  for (const auto& e : fixture["entries"]) {
    if (e["name"] != "reference") continue;
    found = true;
    if (const char* dir = std::getenv("FRUGAL_REFERENCE_MODEL")) {
      GTEST_SKIP() << "FRUGAL_REFERENCE_MODEL=" << dir << ": the fixture is for the committed model";
    }
    check_ppl_entry(e, 1e-3);
  }
  EXPECT_TRUE(found) << "ppl.json has no 'reference' entry";
}

// The same check on the fixture's other models (stories260K and the golden random models): not
// about the reference model, but the same PyTorch run produced them.
TEST(EvalOracleModels, TeacherForcedLogprobsMatchPyTorch) {
  if (!fs::exists(oracle_dir() + "/ppl.json")) GTEST_SKIP() << oracle_dir() << "/ppl.json is absent";
  const json fixture = ppl_fixture();
  int checked = 0;
  for (const auto& e : fixture["entries"]) {
    if (e["name"] == "reference") continue;
    check_ppl_entry(e, 1e-3);
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

}  // namespace
}  // namespace frugal::model
