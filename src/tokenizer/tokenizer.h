// Text <-> token ids, matching Hugging Face tokenizers: tokenizer.json (+ tokenizer_config.json)
// or a GGUF vocabulary. See docs/tokenizer.md for the supported subset of the format.
//
// A Tokenizer is immutable after loading; encode/decode may be called from many threads at once
// (the word cache inside is internally locked).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace frugal {

namespace tok {
struct TokenizerData;
}

struct EncodeOptions {
  bool add_bos = false;       // apply the post-processor's template (or prepend bos_id)
  bool parse_special = true;  // false: special tokens written in the text are plain text
};

class Tokenizer {
 public:
  // Reads model_dir/tokenizer.json and, when present, model_dir/tokenizer_config.json.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& model_dir);
  // Reads the tokenizer.ggml.* keys of a GGUF file (models gpt2 and llama).
  static Result<std::unique_ptr<Tokenizer>> load_gguf(const std::string& path);
  // Same from a GGUF image in memory; `name` is used in errors.
  static Result<std::unique_ptr<Tokenizer>> from_gguf_bytes(const uint8_t* data, size_t size,
                                                            const std::string& name);
  // Builds from the two JSON texts; `config_json` may be empty. `source` names them in errors.
  static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view tokenizer_json,
                                                      std::string_view config_json,
                                                      const std::string& source);

  explicit Tokenizer(std::unique_ptr<tok::TokenizerData> data);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Invalid UTF-8 in `text` is replaced by U+FFFD first.
  std::vector<int32_t> encode(std::string_view text, EncodeOptions options = {}) const;
  // Ids outside the vocabulary are skipped. Always valid UTF-8.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The bytes one token stands for on its own (may be part of a UTF-8 character); empty for an
  // unknown id.
  std::string token_to_piece(int32_t id) const;
  // The vocabulary string of a token ("Ġhello", "<|im_end|>"); empty for an unknown id.
  std::string token_text(int32_t id) const;
  // Id of an exact vocabulary or added-token string, or -1.
  int32_t token_id(std::string_view text) const;

  int32_t vocab_size() const;
  // -1 when the tokenizer has no such token.
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;
  // tokenizer_config.json's add_bos_token (or what the post-processor template implies).
  bool add_bos_token() const;
  // True for added tokens marked special (skipped by decode(skip_special = true)).
  bool is_special(int32_t id) const;
  // The Jinja chat template from tokenizer_config.json (or GGUF), empty when there is none.
  const std::string& chat_template() const;

 private:
  void encode_segment(std::string_view segment, bool at_start, bool parse_special,
                      std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::unique_ptr<tok::TokenizerData> d_;
};

// Incremental detokenizer: feed ids one at a time, get back only complete UTF-8 text. Decodes a
// short window of context so decoders that depend on neighbours (Metaspace's leading space,
// byte fallback) give the same text as one decode() of all ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = true)
      : tokenizer_(&tokenizer), skip_special_(skip_special) {}
  // Text completed by this id (often empty while a multi-byte character is incomplete).
  std::string push(int32_t id);
  // Everything still pending, incomplete characters as U+FFFD; resets the stream.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  std::string prefix_;
  size_t prefix_index_ = 0;
};

}  // namespace frugal
