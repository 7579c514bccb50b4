#include "server/openai_prompt.h"

#include <fmt/format.h>

#include "server/reasoning.h"

namespace frugal::server {

namespace {
constexpr int32_t kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions

std::variant<BuiltPrompt, ApiError> build_chat(const CompletionParams& p, const TextCodec& codec) {
  BuiltPrompt b;
  if (codec.chat_template().empty()) {
    b.text = render_fallback_chat(p.messages);
  } else {
    auto r = codec.render_chat(p.messages, ChatRenderOptions{.add_generation_prompt = true, .tools = p.tools});
    if (!r) return bad_request("The chat template could not render these messages: " + r.status().message(), "messages");
    b.text = std::move(*r);
  }
  // Templates usually write the BOS text themselves; adding the tokenizer's BOS on top would
  // give the model a double BOS it never saw in training.
  const std::string bos = codec.bos_text();
  const bool template_has_bos = !bos.empty() && b.text.compare(0, bos.size(), bos) == 0;
  auto enc = codec.encode(b.text, EncodeOptions{.add_bos = codec.adds_bos() && !template_has_bos, .parse_special = true});
  if (!enc) return bad_request("The rendered chat prompt could not be tokenized: " + enc.status().message(), "messages");
  b.tokens = std::move(*enc);
  b.opens_think = prompt_opens_think(b.text);
  return b;
}

std::variant<BuiltPrompt, ApiError> build_completion(const PromptInput& in, const TextCodec& codec) {
  BuiltPrompt b;
  if (in.text) {
    b.text = *in.text;
    auto enc = codec.encode(b.text, EncodeOptions{.add_bos = codec.adds_bos(), .parse_special = true});
    if (!enc) return bad_request("The prompt could not be tokenized: " + enc.status().message(), "prompt");
    b.tokens = std::move(*enc);
    return b;
  }
  for (int32_t t : in.tokens) {
    if (t >= codec.vocab_size()) {
      return bad_request(fmt::format("Token id {} in 'prompt' is out of range: the vocabulary has {} tokens", t, codec.vocab_size()), "prompt");
    }
  }
  b.tokens = in.tokens;
  b.text = codec.decode(in.tokens);
  return b;
}

std::optional<ApiError> check_context(const CompletionParams& p, BuiltPrompt& b, int32_t max_model_len) {
  const int64_t n_prompt = static_cast<int64_t>(b.tokens.size());
  const char* param = p.endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (b.tokens.empty()) return bad_request("The prompt is empty (no tokens)", param);
  if (n_prompt >= max_model_len) {
    return bad_request(fmt::format("This model's maximum context length is {} tokens. However, your {} resulted in {} tokens, "
                                   "which leaves no room for a completion. Please reduce the length of the {}.",
                                   max_model_len, param, n_prompt, param),
                       param, "context_length_exceeded");
  }
  int64_t room = max_model_len - n_prompt;
  if (!p.max_tokens) {
    b.max_tokens = static_cast<int32_t>(p.endpoint == Endpoint::kChat ? room : std::min<int64_t>(room, kDefaultCompletionMaxTokens));
    return std::nullopt;
  }
  if (*p.max_tokens > room) {
    return bad_request(fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                   "({} in the {}, {} in the completion). Please reduce the length of the {} or the completion.",
                                   max_model_len, n_prompt + *p.max_tokens, n_prompt, param, *p.max_tokens, param),
                       param, "context_length_exceeded");
  }
  b.max_tokens = *p.max_tokens;
  return std::nullopt;
}
}  // namespace

std::string render_fallback_chat(const nlohmann::json& messages) {
  std::string out;
  for (const auto& m : messages) {
    out += m["role"].get<std::string>();
    out += ": ";
    if (m["content"].is_string()) out += m["content"].get<std::string>();
    out += "\n";
  }
  out += "assistant:";
  return out;
}

BuildResult build_prompts(const CompletionParams& p, const TextCodec& codec, int32_t max_model_len) {
  std::vector<BuiltPrompt> out;
  if (p.endpoint == Endpoint::kChat) {
    auto r = build_chat(p, codec);
    if (auto* e = std::get_if<ApiError>(&r)) return *e;
    out.push_back(std::move(std::get<BuiltPrompt>(r)));
  } else {
    for (const auto& in : p.prompts) {
      auto r = build_completion(in, codec);
      if (auto* e = std::get_if<ApiError>(&r)) return *e;
      out.push_back(std::move(std::get<BuiltPrompt>(r)));
    }
  }
  for (auto& b : out) {
    if (auto e = check_context(p, b, max_model_len)) return *e;
  }
  return out;
}

}  // namespace frugal::server
