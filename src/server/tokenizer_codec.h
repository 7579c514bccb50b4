// TextCodec over the real tokenizer and the Jinja chat-template engine (what `frugal serve`
// uses). The template is parsed once at load; rendering is thread-safe.
#pragma once

#include <memory>
#include <optional>

#include "server/text_codec.h"
#include "tokenizer/jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace frugal::server {

class TokenizerCodec : public TextCodec {
 public:
  // Parses the tokenizer's chat template; an unparsable template is an error naming the model.
  static Result<std::unique_ptr<TokenizerCodec>> create(const Tokenizer& tokenizer);

  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& opts) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;
  std::unique_ptr<StreamDetokenizer> stream_decoder() const override;
  std::string token_bytes(int32_t token) const override;
  int32_t vocab_size() const override { return tok_.vocab_size(); }
  std::string bos_text() const override;
  bool adds_bos() const override { return tok_.add_bos_token(); }
  std::string chat_template() const override { return tok_.chat_template(); }
  Result<std::string> render_chat(const nlohmann::json& messages, const ChatRenderOptions& opts) const override;

 private:
  explicit TokenizerCodec(const Tokenizer& t) : tok_(t) {}
  const Tokenizer& tok_;
  std::optional<jinja::Template> template_;
};

}  // namespace frugal::server
