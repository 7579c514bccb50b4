// The stories260K tokenizer.json (converted from llama2.c's tok512.bin by
// scripts/convert_llama2c_tokenizer.py) against llama2.c's own encoder, reimplemented here from
// run.c as the oracle: prepend a dummy space, look up each UTF-8 char (bytes + 3 when unknown),
// then repeatedly merge the adjacent pair whose concatenation is the highest-scoring vocab entry.
#include <cstring>
#include <map>

#include "tokenizer_test_util.h"

namespace frugal::testing {
namespace {

struct Llama2cVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::map<std::string, int> lookup;
};

Llama2cVocab read_tok512() {
  Llama2cVocab v;
  auto data = read_file(shared_data_dir() + "/models/stories260K/tok512.bin");
  EXPECT_TRUE(data.is_ok());
  if (!data.is_ok()) return v;
  size_t off = 4;
  while (off + 8 <= data->size()) {
    float score;
    int32_t len;
    std::memcpy(&score, data->data() + off, 4);
    std::memcpy(&len, data->data() + off + 4, 4);
    off += 8;
    v.pieces.push_back(data->substr(off, static_cast<size_t>(len)));
    v.scores.push_back(score);
    off += static_cast<size_t>(len);
  }
  for (size_t i = 0; i < v.pieces.size(); ++i) v.lookup.emplace(v.pieces[i], static_cast<int>(i));
  return v;
}

// llama2.c run.c encode(), bos = eos = false.
std::vector<int32_t> llama2c_encode(const Llama2cVocab& v, const std::string& text) {
  std::vector<int32_t> tokens;
  auto find = [&](const std::string& s) {
    auto it = v.lookup.find(s);
    return it == v.lookup.end() ? -1 : it->second;
  };
  if (!text.empty()) tokens.push_back(find(" "));
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && (static_cast<uint8_t>(text[i + n]) & 0xC0) == 0x80 && n < 4) ++n;
    const std::string ch = text.substr(i, n);
    const int id = find(ch);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (char c : ch) tokens.push_back(static_cast<uint8_t>(c) + 3);
    }
    i += n;
  }
  while (true) {
    float best_score = -1e10f;
    int best_id = -1, best_idx = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int id = find(v.pieces[tokens[i]] + v.pieces[tokens[i + 1]]);
      if (id != -1 && v.scores[id] > best_score) {
        best_score = v.scores[id];
        best_id = id;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx == -1) break;
    tokens[best_idx] = best_id;
    tokens.erase(tokens.begin() + best_idx + 1);
  }
  return tokens;
}

std::vector<std::string> story_sentences() {
  std::vector<std::string> s = {
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the park with her dog, Max.",
      "\"Can I have the red ball?\" asked Tim. His mom smiled and said, \"Yes, you can!\"",
      "The sun was shining and the birds were singing.",
      "They were happy. The end.",
      "Ben's cat didn't want to go home... It ran away!",
      "One day, a big bear came to the forest.  It was very hungry.",
      "Sue and Tom played together all day long.\nAt night, they slept.",
      "Zoe found 3 shiny stones and 12 leaves.",
      "A café, a naïve duck and a 🦙 llama walked in.",
      "",
      " leading space",
      "trailing space ",
  };
  auto greedy = read_file(shared_data_dir() + "/models/stories260K/expected_greedy_200.txt");
  if (greedy.is_ok()) {
    size_t pos = 0;
    while (pos < greedy->size()) {
      size_t nl = greedy->find('\n', pos);
      if (nl == std::string::npos) nl = greedy->size();
      if (nl > pos) s.push_back(greedy->substr(pos, nl - pos));
      pos = nl + 1;
    }
    s.push_back(*greedy);
  }
  return s;
}

TEST(StoriesTokenizer, EncodesLikeLlama2c) {
  auto tok = Tokenizer::load(source_root() + "/models/stories260K");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const Llama2cVocab v = read_tok512();
  ASSERT_EQ(v.pieces.size(), 512u);
  EXPECT_EQ((*tok)->vocab_size(), 512);
  for (const auto& text : story_sentences()) {
    EXPECT_EQ(ids_to_string((*tok)->encode(text)), ids_to_string(llama2c_encode(v, text))) << "text: " << text;
  }
}

TEST(StoriesTokenizer, RoundTripsAndAddsBos) {
  auto tok = Tokenizer::load(source_root() + "/models/stories260K");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_TRUE(t.add_bos_token());
  for (const auto& text : story_sentences()) {
    const auto ids = t.encode(text, {.add_bos = true});
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(t.decode(ids, /*skip_special=*/true), text);
  }
}

}  // namespace
}  // namespace frugal::testing
