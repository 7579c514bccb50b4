// A tiny byte-level TextCodec for server tests: ids 0..4 are <unk>, <s>, </s>, <think>,
// </think>; ids 5..260 are the bytes 0..255. Multi-byte UTF-8 characters therefore always span
// several tokens, which exercises the streaming detokenizer.
#pragma once

#include <string>

#include "server/text_codec.h"

namespace frugal::server::testing {

enum : int32_t { kUnk = 0, kBos = 1, kEos = 2, kThinkOpen = 3, kThinkClose = 4, kByte0 = 5 };
constexpr int32_t kByteVocab = 261;

inline int32_t byte_token(unsigned char c) { return kByte0 + c; }

struct ByteCodecConfig {
  // "": no chat template (the server's plain fallback); otherwise the template's name:
  // "think" renders "<s>user: ...\nassistant: <think>\n" (opens <think> like R1 distills),
  // "plain-think" renders "<s>user: ...\nassistant:" but mentions <think> so reasoning is on.
  std::string chat_template;
  bool adds_bos = true;
};

class ByteCodec : public TextCodec {
 public:
  explicit ByteCodec(ByteCodecConfig cfg = {}) : cfg_(std::move(cfg)) {}
  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& opts) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;
  std::unique_ptr<StreamDetokenizer> stream_decoder() const override;
  std::string token_bytes(int32_t token) const override;
  int32_t vocab_size() const override { return kByteVocab; }
  std::string bos_text() const override { return "<s>"; }
  bool adds_bos() const override { return cfg_.adds_bos; }
  std::string chat_template() const override;
  Result<std::string> render_chat(const nlohmann::json& messages, const ChatRenderOptions& opts) const override;

 private:
  ByteCodecConfig cfg_;
};

}  // namespace frugal::server::testing
