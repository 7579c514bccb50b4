// llama.cpp's tokenizer vectors (ids produced by HF transformers) reproduced exactly, from
// tokenizer.json files (npm oracles) and from GGUF vocabularies.
#include "tokenizer_test_util.h"

namespace frugal::testing {
namespace {

struct VectorParam {
  const char* vectors;    // ggml-vocab-<name>.gguf.{inp,out}
  const char* tokenizer;  // cached_tokenizer() name
  bool needs_oracles;
};

class TokenizerVectors : public ::testing::TestWithParam<VectorParam> {};

TEST_P(TokenizerVectors, MatchesReferenceIds) {
  const VectorParam p = GetParam();
  if (p.needs_oracles) FRUGAL_REQUIRE_ORACLES();
  const Tokenizer& tok = cached_tokenizer(p.tokenizer);
  const auto cases = read_vectors(p.vectors);
  ASSERT_GT(cases.size(), 40u);
  int mismatches = 0;
  for (const auto& c : cases) {
    const auto ids = tok.encode(c.text);
    if (ids != c.ids) {
      ++mismatches;
      ADD_FAILURE() << p.vectors << ": text \"" << c.text << "\"\n  want " << ids_to_string(c.ids)
                    << "\n  got  " << ids_to_string(ids);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(
    All, TokenizerVectors,
    ::testing::Values(VectorParam{"qwen2", "qwen3", true}, VectorParam{"deepseek-r1-qwen", "r1-qwen", true},
                      VectorParam{"llama-bpe", "llama3", true}, VectorParam{"llama-bpe", "llama3_1", true},
                      VectorParam{"deepseek-llm", "gguf:deepseek-llm", false},
                      VectorParam{"deepseek-coder", "gguf:deepseek-coder", false},
                      VectorParam{"gpt-2", "gguf:gpt-2", false}, VectorParam{"llama-spm", "gguf:llama-spm", false}),
    [](const auto& info) {
      std::string n = std::string(info.param.vectors) + "_" + info.param.tokenizer;
      for (auto& c : n) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

}  // namespace
}  // namespace frugal::testing
