// Prompt building: chat messages through the model's chat template, completions prompts as
// text or token ids; BOS handled once; context-length checks with OpenAI's error wording.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "server/openai_errors.h"
#include "server/openai_params.h"
#include "server/text_codec.h"

namespace frugal::server {

struct BuiltPrompt {
  std::vector<int32_t> tokens;
  std::string text;          // rendered / given text ("" for token-id prompts: decoded instead)
  bool opens_think = false;  // the rendered chat prompt ends inside an open <think>
  int32_t max_tokens = 0;    // the completion budget after the context check
};

using BuildResult = std::variant<std::vector<BuiltPrompt>, ApiError>;

// Renders/tokenizes every prompt of `p` and checks it against the context (`max_model_len`).
BuildResult build_prompts(const CompletionParams& p, const TextCodec& codec, int32_t max_model_len);

// The plain "role: content" rendering used when a model ships no chat template.
std::string render_fallback_chat(const nlohmann::json& messages);

}  // namespace frugal::server
