// Tokenizer behaviour beyond the vectors: malformed files, special-token switches, BOS, the
// streaming decoder, concurrency, GGUF robustness.
#include <cstdio>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "tokenizer/unicode_text.h"
#include "tokenizer_test_util.h"

namespace frugal::testing {
namespace {

// A tiny byte-level BPE tokenizer written by hand: "h","i","hi","Ġ", merges h+i.
std::string tiny_json(const std::string& model_type = "BPE", const std::string& merges = R"(["h i"])") {
  return R"({"version":"1.0","added_tokens":[{"id":4,"content":"<eos>","special":true}],
    "normalizer":null,
    "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},
    "post_processor":null,"decoder":{"type":"ByteLevel"},
    "model":{"type":")" + model_type + R"(","vocab":{"h":0,"i":1,"hi":2,"Ġ":3,"<eos>":4},"merges":)" + merges + "}}";
}

Status load_error(const std::string& json) {
  auto r = Tokenizer::from_json(json, "", "test.json");
  return r.is_ok() ? Status::ok() : r.status();
}

TEST(TokenizerLoad, TinyTokenizerWorks) {
  auto r = Tokenizer::from_json(tiny_json(), "", "tiny");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const auto& t = **r;
  EXPECT_EQ(t.encode("hi hi<eos>"), (std::vector<int32_t>{2, 3, 2, 4}));
  // Not matched as a token; its chars are not in this vocab and HF drops them (no unk_token).
  EXPECT_EQ(t.encode("hi<eos>", {.parse_special = false}), (std::vector<int32_t>{2}));
  const std::vector<int32_t> ids{2, 3, 2, 4};
  EXPECT_EQ(t.decode(ids), "hi hi<eos>");
  EXPECT_EQ(t.decode(ids, /*skip_special=*/true), "hi hi");
  EXPECT_TRUE(t.is_special(4));
  EXPECT_FALSE(t.is_special(2));
  EXPECT_EQ(t.token_to_piece(3), " ");
  EXPECT_EQ(t.vocab_size(), 5);
}

TEST(TokenizerLoad, TruncatedJsonIsAnError) {
  const std::string full = tiny_json();
  const Status s = load_error(full.substr(0, full.size() / 2));
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_NE(s.message().find("not valid JSON"), std::string::npos) << s.message();
}

TEST(TokenizerLoad, UnknownModelTypeIsAnError) {
  const Status s = load_error(tiny_json("Unigram"));
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("model.type"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Unigram"), std::string::npos) << s.message();
}

TEST(TokenizerLoad, MergeWithMissingTokenIsAnError) {
  const Status s = load_error(tiny_json("BPE", R"(["h x"])"));
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_NE(s.message().find("merges[0]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"x\""), std::string::npos) << s.message();
}

TEST(TokenizerLoad, UnsupportedPipelineStageIsNamed) {
  std::string j = tiny_json();
  j.replace(j.find("\"normalizer\":null"), 17, R"("normalizer":{"type":"BertNormalizer"})");
  const Status s = load_error(j);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("BertNormalizer"), std::string::npos) << s.message();
}

TEST(TokenizerLoad, MissingDirectoryIsNotFound) {
  auto r = Tokenizer::load("/nonexistent/model");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("tokenizer.json"), std::string::npos);
}

TEST(TokenizerLoad, GgufTruncationsAreErrorsNotCrashes) {
  auto bytes = read_file(shared_data_dir() + "/tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(bytes.is_ok());
  const std::string path = binary_dir() + "/tokenizer_test_truncated." + std::to_string(getpid()) + ".gguf";
  for (size_t n : {size_t{0}, size_t{3}, size_t{20}, size_t{100}, bytes->size() / 2, bytes->size() - 1}) {
    std::ofstream(path, std::ios::binary).write(bytes->data(), static_cast<std::streamsize>(n));
    auto r = Tokenizer::load_gguf(path);
    EXPECT_FALSE(r.is_ok()) << "prefix of " << n << " bytes loaded";
  }
  std::string bad = *bytes;
  bad[0] = 'X';
  std::ofstream(path, std::ios::binary).write(bad.data(), static_cast<std::streamsize>(bad.size()));
  auto r = Tokenizer::load_gguf(path);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);
  std::remove(path.c_str());
}

TEST(TokenizerSpecial, ParseSpecialSwitch) {
  FRUGAL_REQUIRE_ORACLES();
  const Tokenizer& t = cached_tokenizer("qwen3");
  const int32_t im_start = t.token_id("<|im_start|>");
  ASSERT_GE(im_start, 0);
  EXPECT_EQ(t.encode("<|im_start|>user"), (std::vector<int32_t>{im_start, t.token_id("user")}));
  const auto plain = t.encode("<|im_start|>user", {.parse_special = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
  EXPECT_EQ(t.decode(plain), "<|im_start|>user");
  EXPECT_FALSE(t.chat_template().empty());
  EXPECT_EQ(t.eos_id(), t.token_id("<|im_end|>"));
}

TEST(TokenizerSpecial, AddBos) {
  FRUGAL_REQUIRE_ORACLES();
  const Tokenizer& llama = cached_tokenizer("llama3_1");
  EXPECT_TRUE(llama.add_bos_token());
  EXPECT_EQ(llama.bos_id(), 128000);
  const auto ids = llama.encode("Hello", {.add_bos = true});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], 128000);
  const Tokenizer& qwen = cached_tokenizer("qwen3");
  EXPECT_FALSE(qwen.add_bos_token());
  EXPECT_EQ(qwen.encode("Hello", {.add_bos = true}), qwen.encode("Hello"));
}

TEST(StreamDecoder, NeverEmitsBrokenUtf8) {
  FRUGAL_REQUIRE_ORACLES();
  for (const char* name : {"qwen3", "gguf:llama-spm", "deepseek_v3"}) {
    const Tokenizer& t = cached_tokenizer(name);
    const std::string text = "Grüße 🦙🚀 ✅ 我想在apple工作 — ok <0x0A>\n  end 😶‍🌫️";
    const auto ids = t.encode(text);
    StreamDecoder stream(t, /*skip_special=*/false);
    std::string joined;
    for (int32_t id : ids) {
      const std::string piece = stream.push(id);
      EXPECT_EQ(tok::to_valid_utf8(piece), piece) << name << ": broken UTF-8 after id " << id;
      EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << name;
      joined += piece;
    }
    joined += stream.flush();
    EXPECT_EQ(joined, t.decode(ids)) << name;
  }
}

TEST(Tokenizer, InvalidUtf8IsReplaced) {
  FRUGAL_REQUIRE_ORACLES();
  const Tokenizer& t = cached_tokenizer("qwen3");
  EXPECT_EQ(t.encode("a\xFF" "b"), t.encode("a\xEF\xBF\xBD" "b"));
  EXPECT_EQ(t.decode(t.encode("a\xC3")), "a\xEF\xBF\xBD");
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  FRUGAL_REQUIRE_ORACLES();
  const Tokenizer& t = cached_tokenizer("qwen3");
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("line " + std::to_string(i * 7919) + ": The quick brown fox 🦊 jumps; " +
                    std::string(static_cast<size_t>(i % 7), ' ') + "über " + std::to_string(i));
  }
  std::vector<std::vector<int32_t>> serial;
  for (const auto& s : texts) serial.push_back(t.encode(s));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = w; i < texts.size(); i += 1)
          if (t.encode(texts[i]) != serial[i] || t.decode(serial[i]) != texts[i]) ++bad;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace frugal::testing
