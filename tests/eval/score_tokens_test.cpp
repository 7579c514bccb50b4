// The engine's SamplingParams::score_tokens (what frugal eval mc scores with): the log-probs
// of given tokens at the last prompt position equal the log-softmax of the model's own logits
// row computed here, come back even when the first token is a stop token, and out-of-vocabulary
// ids are refused.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "eval/kld.h"
#include "model/model.h"
#include "runtime/backends.h"
#include "runtime/engine.h"
#include "test_paths.h"

namespace frugal::runtime {
namespace {

std::string model_dir() { return frugal::testing::source_root() + "/models/stories260K"; }

// log_softmax of the logits at the prompt's last position, through Model::forward directly.
std::vector<float> last_row_logprobs(const std::vector<int32_t>& prompt) {
  auto be = make_backend("cpu", 2);
  EXPECT_TRUE(be.is_ok());
  auto m = model::Model::load(model_dir(), be->backend.get(), {});
  EXPECT_TRUE(m.is_ok());
  auto kv = model::KvStorage::create(be->backend.get(), (*m)->config(), {.n_blocks = 4, .block_size = 16});
  EXPECT_TRUE(kv.is_ok());
  const auto n = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> pos(prompt.size()), slots(prompt.size());
  for (int32_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = slots[static_cast<size_t>(i)] = i;
  const int32_t q[2] = {0, n}, cl[1] = {n}, rows[1] = {n - 1}, table[4] = {0, 1, 2, 3};
  model::ForwardBatch fb{.tokens = prompt, .positions = pos, .q_start = q, .ctx_len = cl, .block_tables = table,
                         .max_blocks_per_seq = 4, .slot_mapping = slots, .logits_rows = rows};
  std::vector<float> logits(static_cast<size_t>((*m)->config().vocab_size)), lp;
  EXPECT_TRUE((*m)->forward(fb, **kv, logits.data()).is_ok());
  eval::log_softmax(logits, lp);
  return lp;
}

struct Out {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<TokenLogprob> scored;
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
};

void run_one(Engine& e, GenerateRequest req, Out& o) {
  auto id = e.submit(std::move(req), [&o](const RequestOutput& r) {
    std::lock_guard<std::mutex> lk(o.mu);
    if (!r.scored.empty()) o.scored = r.scored;
    for (const auto& t : r.tokens) o.tokens.push_back(t.token);
    if (r.finish != FinishReason::kNone) {
      o.finish = r.finish;
      o.cv.notify_all();
    }
  });
  ASSERT_TRUE(id.is_ok()) << id.status().to_string();
  std::unique_lock<std::mutex> lk(o.mu);
  ASSERT_TRUE(o.cv.wait_for(lk, std::chrono::seconds(60), [&] { return o.finish != FinishReason::kNone; }));
}

TEST(EngineScoreTokens, EqualTheModelsLogSoftmaxAtTheLastPromptPosition) {
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 430, 285, 365, 266, 261, 342, 7, 13, 92, 401, 33, 20};
  const std::vector<float> want = last_row_logprobs(prompt);
  int32_t best = 0;
  for (size_t v = 1; v < want.size(); ++v)
    if (want[v] > want[static_cast<size_t>(best)]) best = static_cast<int32_t>(v);

  auto e = create_engine({.model_dir = model_dir(), .threads = 2, .max_num_seqs = 4});
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  GenerateRequest req{.prompt = prompt, .sampling = {}};
  req.sampling.temperature = 0;
  req.sampling.max_tokens = 3;
  req.sampling.score_tokens = {5, 300, best, 5};
  Out o;
  run_one(**e, req, o);
  ASSERT_EQ(o.scored.size(), 4u);
  for (size_t i = 0; i < o.scored.size(); ++i) {
    EXPECT_EQ(o.scored[i].token, req.sampling.score_tokens[i]);
    EXPECT_NEAR(o.scored[i].logprob, want[static_cast<size_t>(req.sampling.score_tokens[i])], 1e-4);
  }
  EXPECT_EQ(o.tokens.size(), 3u);
  EXPECT_EQ(o.tokens[0], best);

  // The greedy first token is a stop token: nothing is emitted, the scores still come back.
  req.sampling.stop_token_ids = {best};
  Out s;
  run_one(**e, req, s);
  EXPECT_EQ(s.finish, FinishReason::kStop);
  EXPECT_TRUE(s.tokens.empty());
  ASSERT_EQ(s.scored.size(), 4u);
  EXPECT_NEAR(s.scored[2].logprob, want[static_cast<size_t>(best)], 1e-4);

  GenerateRequest bad{.prompt = prompt, .sampling = {}};
  bad.sampling.score_tokens = {3, 512};
  auto r = (*e)->submit(bad, [](const RequestOutput&) {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("score_tokens: entry 1 has id 512"), std::string::npos) << r.status().message();
  (*e)->shutdown();
}

}  // namespace
}  // namespace frugal::runtime
