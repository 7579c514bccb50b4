// The real stories260K model (converted from llama2.c by scripts/convert_llama2c.py): greedy
// generation from BOS must reproduce llama2.c's output (expected_greedy_200.txt, computed by
// an independent NumPy forward pass) exactly, decoded with llama2.c's own rules.
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/mapped_file.h"
#include "model/model.h"
#include "ops/ref_backend.h"
#include "runtime/generate.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

std::string stories_dir() { return frugal::testing::source_root() + "/models/stories260K"; }
std::string shared_stories() { return frugal::testing::shared_dir() + "/data/models/stories260K"; }

// llama2.c tokenizer.bin: int32 max_token_length, then per token: f32 score, int32 len, bytes.
std::vector<std::string> read_llama2c_vocab(const std::string& path, int vocab) {
  std::ifstream f(path, std::ios::binary);
  int32_t max_len = 0;
  f.read(reinterpret_cast<char*>(&max_len), 4);
  std::vector<std::string> v(static_cast<size_t>(vocab));
  for (auto& s : v) {
    float score;
    int32_t len = 0;
    f.read(reinterpret_cast<char*>(&score), 4);
    f.read(reinterpret_cast<char*>(&len), 4);
    s.resize(static_cast<size_t>(len));
    f.read(s.data(), len);
  }
  return v;
}

// llama2.c decode() + safe_printf(): strip the leading space after BOS, map <0xHH> to the byte,
// drop single non-printable, non-space bytes.
std::string decode(const std::vector<std::string>& vocab, const std::vector<int32_t>& ids) {
  std::string out;
  int32_t prev = 1;
  for (int32_t id : ids) {
    std::string piece = vocab[static_cast<size_t>(id)];
    if (prev == 1 && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    unsigned int byte = 0;
    if (piece.size() == 6 && std::sscanf(piece.c_str(), "<0x%02X>", &byte) == 1) piece = std::string(1, static_cast<char>(byte));
    if (piece.size() == 1 && !std::isprint(static_cast<unsigned char>(piece[0])) && !std::isspace(static_cast<unsigned char>(piece[0]))) piece.clear();
    out += piece;
    prev = id;
  }
  return out;
}

TEST(Stories260K, GreedyFromBosMatchesLlama2c) {
  auto backend = ops::make_ref_backend();
  auto m = Model::load(stories_dir(), backend.get(), {});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ((*m)->generation_config().bos_token_ids, std::vector<int64_t>{1});
  // The reference decoded 200 tokens after BOS, stopping only on BOS (id 1) as llama2.c does,
  // never on eos.
  runtime::SamplingParams sp{.temperature = 0, .max_tokens = 200, .stop_token_ids = {1}, .ignore_eos = true};
  const int32_t bos[] = {1};
  std::vector<int32_t> streamed;
  auto r = runtime::generate(**m, bos, sp, [&](int32_t t) { streamed.push_back(t); return true; });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->tokens.size(), 200u);
  EXPECT_EQ(streamed, r->tokens);
  auto expected = read_file(shared_stories() + "/expected_greedy_200.txt");
  ASSERT_TRUE(expected.is_ok());
  std::string want = *expected;
  if (!want.empty() && want.back() == '\n') want.pop_back();  // llama2.c prints a final newline
  EXPECT_EQ(decode(read_llama2c_vocab(shared_stories() + "/tok512.bin", 512), r->tokens), want);
}

TEST(Stories260K, ChunkedPrefillMatchesOneShot) {
  // The same prompt prefilled in one step and in chunks of 5 gives the same next-token logits.
  auto backend = ops::make_ref_backend();
  auto one = Model::load(stories_dir(), backend.get(), {});
  auto chunked = Model::load(stories_dir(), backend.get(), {.max_batch_tokens = 5});
  ASSERT_TRUE(one.is_ok() && chunked.is_ok());
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 429, 275, 300, 261, 280, 431, 386, 271};
  runtime::SamplingParams sp{.temperature = 0, .max_tokens = 12, .ignore_eos = true};
  auto a = runtime::generate(**one, prompt, sp);
  auto b = runtime::generate(**chunked, prompt, sp);
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.status().to_string() << b.status().to_string();
  EXPECT_EQ(a->tokens, b->tokens);
}

}  // namespace
}  // namespace frugal::model
