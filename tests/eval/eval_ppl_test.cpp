// Perplexity and KLD on the embedded stories260K model (CPU), checked for internal consistency:
//  - the chunk plan of the llama.cpp protocol, and its errors;
//  - every scored log-prob equals the one a token-by-token decode (another attention path,
//    logits of one row at a time) gives for the same chunk;
//  - mean NLL / PPL / standard error follow from the per-token values;
//  - the model against its own --save-logits reference: KLD exactly 0, same top-1 100%,
//    ΔPPL 0; against the ref backend (the op oracle): KLD near 0.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace frugal::eval {
namespace {

std::string model_dir() { return frugal::testing::source_root() + "/models/stories260K"; }
std::string story() { return frugal::testing::source_root() + "/tests/data/eval_oracle/story.txt"; }

std::vector<int32_t> story_tokens(int32_t* bos) {
  auto tok = Tokenizer::load(model_dir());
  EXPECT_TRUE(tok.is_ok());
  auto text = read_text_file(story());
  EXPECT_TRUE(text.is_ok());
  *bos = (*tok)->add_bos_token() ? (*tok)->bos_id() : -1;
  return (*tok)->encode(*text, {.add_bos = *bos >= 0, .parse_special = false});
}

TEST(ChunkPlan, LlamaCppProtocolAndErrors) {
  auto p = plan_chunks(1394, 256, 0, "t.txt");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->n_chunks, 5);  // floor(1394 / 256), the tail dropped
  EXPECT_EQ(p->first, 128);
  EXPECT_EQ(p->scored_per_chunk(), 127);
  auto s = plan_chunks(1394, 256, 64, "t.txt");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->n_chunks, (1394 - 256) / 64 + 1);
  EXPECT_EQ(s->first, 256 - 1 - 64);
  EXPECT_EQ(s->scored_per_chunk(), 64);  // exactly the tokens the previous chunk did not score
  auto short_text = plan_chunks(100, 256, 0, "short.txt");
  ASSERT_FALSE(short_text.is_ok());
  EXPECT_NE(short_text.status().message().find("short.txt: the text is 100 tokens, shorter than one chunk"), std::string::npos);
  EXPECT_FALSE(plan_chunks(1000, 256, 200, "t.txt").is_ok());  // would score tokens twice
  EXPECT_FALSE(plan_chunks(1000, 2, 0, "t.txt").is_ok());
}

TEST(Perplexity, ScoresEqualTokenByTokenDecodeAndStatisticsFollow) {
  int32_t bos = -1;
  const std::vector<int32_t> tokens = story_tokens(&bos);
  ASSERT_EQ(bos, 1);
  constexpr int32_t kCtx = 64;
  auto plan = plan_chunks(static_cast<int64_t>(tokens.size()), kCtx, 0, story());
  ASSERT_TRUE(plan.is_ok());
  auto m = load_scoring_model(model_dir(), "cpu", 2, kCtx);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto r = run_ppl(*m, tokens, bos, *plan, {});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(static_cast<int64_t>(r->logprobs.size()), plan->n_chunks * plan->scored_per_chunk());

  // Independent path: chunk 1 decoded one token per step (decode attention over the KV cache),
  // logits of that single row, log-softmax here.
  const std::vector<int32_t> in = chunk_input(tokens, *plan, 1, bos);
  EXPECT_EQ(in[0], bos);
  model::Model& mdl = *m->model;
  const auto vocab = static_cast<size_t>(mdl.config().vocab_size);
  std::vector<float> logits(vocab), lp;
  std::vector<int32_t> table = {0, 1, 2, 3};
  for (int32_t pos = 0; pos + 1 < kCtx; ++pos) {
    const int32_t tok[1] = {in[static_cast<size_t>(pos)]}, p[1] = {pos}, q[2] = {0, 1}, cl[1] = {pos + 1}, slot[1] = {pos},
                  row[1] = {0};
    model::ForwardBatch fb{.tokens = tok, .positions = p, .q_start = q, .ctx_len = cl, .block_tables = table,
                           .max_blocks_per_seq = 4, .slot_mapping = slot, .logits_rows = row};
    ASSERT_TRUE(mdl.forward(fb, *m->kv, logits.data()).is_ok());
    if (pos < plan->first) continue;
    log_softmax(logits, lp);
    const float want = lp[static_cast<size_t>(in[static_cast<size_t>(pos) + 1])];
    const float got = r->logprobs[static_cast<size_t>(plan->scored_per_chunk() + (pos - plan->first))];
    EXPECT_NEAR(got, want, 1e-4) << "chunk 1, row " << pos;
  }

  double sum = 0, sum2 = 0;
  for (float x : r->logprobs) {
    sum += -x;
    sum2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(r->logprobs.size());
  EXPECT_NEAR(r->nll.mean, sum / n, 1e-9);
  EXPECT_NEAR(r->ppl, std::exp(sum / n), 1e-9 * r->ppl);
  const double var = (sum2 - n * (sum / n) * (sum / n)) / (n - 1);
  EXPECT_NEAR(r->nll.se, std::sqrt(var / n), 1e-9);
  EXPECT_NEAR(r->ppl_se, r->ppl * r->nll.se, 1e-9);
  EXPECT_GT(r->ppl, 1.0);
  EXPECT_LT(r->ppl, 50.0);  // a trained model on a story in its own style
  ASSERT_EQ(r->chunk_ppl.size(), static_cast<size_t>(plan->n_chunks));
}

class KldSelf : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("frugal_eval_kld_" + std::to_string(::getpid()) + ".bin")).string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(KldSelf, ModelAgainstItselfIsZeroAndAgainstTheRefBackendNearZero) {
  int32_t bos = -1;
  const std::vector<int32_t> tokens = story_tokens(&bos);
  constexpr int32_t kCtx = 128;
  auto plan = plan_chunks(static_cast<int64_t>(tokens.size()), kCtx, 0, story());
  ASSERT_TRUE(plan.is_ok());
  auto m = load_scoring_model(model_dir(), "cpu", 2, kCtx);
  ASSERT_TRUE(m.is_ok());
  auto r = run_ppl(*m, tokens, bos, *plan, {.save_logits = path_, .top_k = 16, .model_hash = model_hash(model_dir())});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto ref = read_logits_file(path_);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  EXPECT_EQ(ref->tokens, tokens);
  EXPECT_EQ(ref->header.bos, bos);

  auto k = run_kld(*m, *ref, path_);
  ASSERT_TRUE(k.is_ok()) << k.status().to_string();
  EXPECT_EQ(k->n, r->nll.n);
  EXPECT_EQ(k->kld.mean, 0.0);
  EXPECT_EQ(k->kld_max, 0.0);
  EXPECT_EQ(k->same_top1.p, 1.0);
  EXPECT_EQ(k->rms_dp, 0.0);
  EXPECT_EQ(k->delta_ppl, 0.0);
  EXPECT_NEAR(k->ppl_ref, r->ppl, 1e-6 * r->ppl);

  auto oracle = load_scoring_model(model_dir(), "ref", 0, kCtx);
  ASSERT_TRUE(oracle.is_ok()) << oracle.status().to_string();
  auto ko = run_kld(*oracle, *ref, path_);
  ASSERT_TRUE(ko.is_ok()) << ko.status().to_string();
  EXPECT_LT(std::abs(ko->kld.mean), 1e-6);
  EXPECT_GT(ko->same_top1.p, 0.99);
  EXPECT_NEAR(ko->ppl_ratio, 1.0, 1e-4);
}

TEST_F(KldSelf, ReferenceFromAnotherVocabularyIsAClearError) {
  LogitsHeader h{.model_hash = 0, .vocab = 1000, .ctx = 8, .stride = 8, .top_k = 1, .first = 4, .bos = -1,
                 .n_chunks = 1, .n_tokens = 8, .n_scored = 3, .tokens_hash = 0};
  {
    auto w = LogitsWriter::open(path_, h, {1, 2, 3, 4, 5, 6, 7, 8});
    ASSERT_TRUE(w.is_ok());
    TopK t{.next = 6, .next_logprob = -1, .ids = {6}, .logprobs = {-1}, .log_rest = -0.5f};
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*w)->add(t).is_ok());
    ASSERT_TRUE((*w)->close().is_ok());
  }
  auto ref = read_logits_file(path_);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  auto m = load_scoring_model(model_dir(), "cpu", 2, 8);
  ASSERT_TRUE(m.is_ok());
  auto k = run_kld(*m, *ref, path_);
  ASSERT_FALSE(k.is_ok());
  EXPECT_NE(k.status().message().find("vocabulary of 1000"), std::string::npos) << k.status().message();
}

}  // namespace
}  // namespace frugal::eval
