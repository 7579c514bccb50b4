#include "server/tokenizer_codec.h"

namespace frugal::server {

namespace {
class Detok : public StreamDetokenizer {
 public:
  explicit Detok(const Tokenizer& t) : dec_(t, /*skip_special=*/true) {}
  std::string push(int32_t token) override { return dec_.push(token); }
  std::string flush() override { return dec_.flush(); }

 private:
  StreamDecoder dec_;
};
}  // namespace

Result<std::unique_ptr<TokenizerCodec>> TokenizerCodec::create(const Tokenizer& tokenizer) {
  std::unique_ptr<TokenizerCodec> c(new TokenizerCodec(tokenizer));
  if (!tokenizer.chat_template().empty()) {
    auto t = jinja::Template::parse(tokenizer.chat_template());
    if (!t) return t.status().with_context("parsing the chat template of tokenizer_config.json");
    c->template_.emplace(std::move(*t));
  }
  return c;
}

Result<std::vector<int32_t>> TokenizerCodec::encode(std::string_view text, const EncodeOptions& opts) const {
  return tok_.encode(text, ::frugal::EncodeOptions{.add_bos = opts.add_bos, .parse_special = opts.parse_special});
}

std::string TokenizerCodec::decode(const std::vector<int32_t>& tokens) const { return tok_.decode(tokens, true); }

std::unique_ptr<StreamDetokenizer> TokenizerCodec::stream_decoder() const { return std::make_unique<Detok>(tok_); }

std::string TokenizerCodec::token_bytes(int32_t token) const { return tok_.token_to_piece(token); }

std::string TokenizerCodec::bos_text() const {
  return tok_.bos_id() >= 0 ? tok_.token_text(tok_.bos_id()) : std::string();
}

Result<std::string> TokenizerCodec::render_chat(const nlohmann::json& messages, const ChatRenderOptions& opts) const {
  if (!template_) return invalid_argument("the model has no chat template");
  // The same variables transformers' apply_chat_template passes.
  nlohmann::json ctx = nlohmann::json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = opts.add_generation_prompt;
  ctx["bos_token"] = bos_text();
  ctx["eos_token"] = tok_.eos_id() >= 0 ? tok_.token_text(tok_.eos_id()) : std::string();
  ctx["tools"] = opts.tools;
  return template_->render(ctx);
}

}  // namespace frugal::server
