// Differential test against the reference JavaScript tokenizer (@huggingface/tokenizers under
// Node, see js_reference.mjs): thousands of generated strings, zero mismatches in ids and in the
// decoded text, for the Qwen2, Llama-3 and DeepSeek-V3 tokenizer.json files.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include <unistd.h>

#include "tokenizer/unicode_text.h"
#include "tokenizer_test_util.h"

namespace frugal::testing {
namespace {

constexpr int kStrings = 2000;

// Building blocks: scripts, emoji sequences, whitespace, digits, special-token look-alikes.
const std::vector<std::string>& fragments() {
  static const std::vector<std::string> f = {
      "Hello", "world", "The", "quick", "brown", "fox", "it's", "I'LL", "they've", "we'Re", "don't", "'s", "'d",
      "naïve", "café", "Cửa Việt", "straße", "ǅemal", "ΑΒΓ αβγ", "ΐΰ", "Ωmega", "Кириллица", "нещо на Български",
      "עברית", "العربية", "हिन्दी", "ภาษาไทย", "កាន់តែពិសេស", "中文字符", "我想在apple工作", "日本語のテキスト",
      "カタカナ", "한국어 텍스트", "e\xCC\x81", "A\xCC\x8A", "\xEF\xAC\x81", "①②③", "½", "²³", "Ⅻ", "٣٤٥",
      "🦙", "🚀", "😶‍🌫️", "👍🏽", "🇺🇸", "1️⃣", "👨‍👩‍👧", "✅", "❤️", "🤔🤔", "(", ")", "[", "]", "{", "}",
      "...", "!!!", "?!", ",", ";", ":", "--", "—", "…", "«", "»", "“quoted”", "$", "%", "^", "~", "`", "|", "\\",
      "/", "@", "#", "&", "*", "+", "=", "<", ">", "_", "'", "\"", "-", "x" ,
      " ", "  ", "   ", "    ", "\t", "\n", "\n\n", "\r\n", " \n ", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8",
      "\xE2\x80\x8B", "\xE2\x80\x83",
      "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "im_end|>", "<|begin_of_text|>", "<|eot_id|>",
      "<|start_header_id|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
      "<think>", "</think>", "<tool_call>", "<0x0A>", "▁", "▁▁", "Ġ", "<s>", "</s>", "<unk>",
      "def f(x):\n    return x**2", "int main() { return 0; }", "https://example.com/a?b=c&d=e", "foo.bar_baz",
      "user@example.org", "2024-01-02", "3.14159", "1,000,000", "0x1F", "v1.2.3",
  };
  return f;
}

// Invalid UTF-8 pieces: the tokenizer must replace them exactly like a String::from_utf8_lossy.
const std::vector<std::string>& invalid_bytes() {
  static const std::vector<std::string> f = {"\xFF", "\xC3", "\xE2\x82", "\xF0\x9F\x98", "\xC0\xAF", "\xED\xA0\x80",
                                             "\x80\x80", "\xF5\x80\x80\x80"};
  return f;
}

// A random code point from ranges that hold letters, marks, symbols and punctuation.
std::string random_code_point(std::mt19937& rng) {
  static const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x20, 0x7E}, {0xA0, 0x24F}, {0x370, 0x52F}, {0x590, 0x6FF}, {0x900, 0xDFF}, {0x1100, 0x11FF},
      {0x1E00, 0x1FFF}, {0x2000, 0x2BFF}, {0x3000, 0x30FF}, {0x4E00, 0x4F00}, {0xAC00, 0xAD00},
      {0xFF00, 0xFFEF}, {0x1F300, 0x1F64F}, {0x1D400, 0x1D7FF}};
  const auto& [lo, hi] = ranges[rng() % ranges.size()];
  std::string s;
  tok::append_utf8(s, lo + static_cast<uint32_t>(rng() % (hi - lo + 1)));
  return s;
}

std::string random_string(std::mt19937& rng) {
  std::string s;
  const int n = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) {
    const uint32_t kind = rng() % 100;
    if (kind < 55) {
      s += fragments()[rng() % fragments().size()];
    } else if (kind < 70) {
      const int digits = 1 + static_cast<int>(rng() % 9);
      for (int d = 0; d < digits; ++d) s += static_cast<char>('0' + rng() % 10);
    } else if (kind < 80) {
      s += std::string(1 + rng() % 6, rng() % 2 ? ' ' : '\n');
    } else if (kind < 95) {
      const int k = 1 + static_cast<int>(rng() % 4);
      for (int c = 0; c < k; ++c) s += random_code_point(rng);
    } else {
      s += invalid_bytes()[rng() % invalid_bytes().size()];
    }
    if (rng() % 3 == 0) s += ' ';
  }
  return s;
}

struct Reference {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> text;
};

// Runs js_reference.mjs on the texts (valid UTF-8) and reads its JSON answer.
Result<Reference> run_reference(const std::string& dir, const std::vector<std::string>& texts, const std::string& tag) {
  const std::string in = binary_dir() + "/tokenizer_diff_" + tag + "." + std::to_string(getpid()) + ".in.json";
  const std::string out = binary_dir() + "/tokenizer_diff_" + tag + "." + std::to_string(getpid()) + ".out.json";
  std::ofstream(in) << nlohmann::json{{"texts", texts}, {"add_special_tokens", false}}.dump();
  const std::string cmd = "node '" + source_root() + "/tests/tokenizer/js_reference.mjs' '" + dir + "' '" + in +
                          "' > '" + out + "'";
  if (std::system(cmd.c_str()) != 0) return internal_error("reference failed: " + cmd);
  FRUGAL_ASSIGN_OR_RETURN(std::string text, read_file(out));
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return corrupt(out + ": not JSON");
  Reference r;
  r.ids = j["ids"].get<std::vector<std::vector<int32_t>>>();
  r.text = j["text"].get<std::vector<std::string>>();
  std::remove(in.c_str());
  std::remove(out.c_str());
  return r;
}

class TokenizerDiff : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerDiff, MatchesJavaScriptReference) {
  FRUGAL_REQUIRE_ORACLES();
  const std::string name = GetParam();
  std::mt19937 rng(20240607u + static_cast<uint32_t>(name.size()));
  std::vector<std::string> raw, valid;
  for (int i = 0; i < kStrings; ++i) {
    raw.push_back(random_string(rng));
    valid.push_back(tok::to_valid_utf8(raw.back()));
  }
  auto ref = run_reference(oracle_package(name), valid, name);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  ASSERT_EQ(ref->ids.size(), raw.size());
  const Tokenizer& t = cached_tokenizer(name);
  int id_mismatches = 0, text_mismatches = 0;
  size_t n_ids = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto ids = t.encode(raw[i]);
    n_ids += ref->ids[i].size();
    if (ids != ref->ids[i] && ++id_mismatches <= 10) {
      ADD_FAILURE() << name << " ids differ for " << nlohmann::json(valid[i]).dump() << "\n  js   "
                    << ids_to_string(ref->ids[i]) << "\n  ours " << ids_to_string(ids);
    }
    const std::string text = t.decode(ref->ids[i]);
    if (text != ref->text[i] && ++text_mismatches <= 10) {
      ADD_FAILURE() << name << " decoded text differs for " << nlohmann::json(valid[i]).dump() << "\n  js   "
                    << nlohmann::json(ref->text[i]).dump() << "\n  ours " << nlohmann::json(text).dump();
    }
  }
  EXPECT_GT(n_ids, raw.size() * 5) << "the reference returned suspiciously few ids";
  EXPECT_EQ(id_mismatches, 0);
  EXPECT_EQ(text_mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(Oracles, TokenizerDiff, ::testing::Values("qwen3", "llama3_1", "deepseek_v3"));

}  // namespace
}  // namespace frugal::testing
