// What the server needs from a tokenizer and chat template, as a small interface.
//
// The server never includes the tokenizer directly: `frugal serve` adapts the real tokenizer
// (tokenizer_codec.h), tests plug in a tiny byte-level codec. That keeps the OpenAI layer testable
// with scripted token ids and independent of how the tokenizer is built.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace frugal::server {

// Incremental detokenizer: returns only complete UTF-8 (bytes of a split character are held back
// until the token that completes them arrives).
class StreamDetokenizer {
 public:
  virtual ~StreamDetokenizer() = default;
  virtual std::string push(int32_t token) = 0;
  // Whatever is still held back at the end (an incomplete character becomes U+FFFD).
  virtual std::string flush() = 0;
};

struct EncodeOptions {
  bool add_bos = false;
  bool parse_special = false;  // "<think>" etc. in the text become their special ids
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  nlohmann::json tools;  // null: no tools
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& opts) const = 0;
  // Text of a whole token sequence (special tokens skipped): echo of token-id prompts.
  virtual std::string decode(const std::vector<int32_t>& tokens) const = 0;
  virtual std::unique_ptr<StreamDetokenizer> stream_decoder() const = 0;
  // The raw bytes one token stands for (may be part of a UTF-8 character): logprobs' "bytes".
  virtual std::string token_bytes(int32_t token) const = 0;
  virtual int32_t vocab_size() const = 0;
  // The BOS token's text ("<s>") and whether the tokenizer adds it (tokenizer_config.json
  // add_bos_token): used to avoid a double BOS when a chat template writes it already.
  virtual std::string bos_text() const = 0;
  virtual bool adds_bos() const = 0;
  // The chat template source ("" when the model has none).
  virtual std::string chat_template() const = 0;
  // Renders messages with the chat template (only called when chat_template() is non-empty).
  virtual Result<std::string> render_chat(const nlohmann::json& messages,
                                          const ChatRenderOptions& opts) const = 0;
};

}  // namespace frugal::server
