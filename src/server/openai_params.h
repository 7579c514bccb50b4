// Parsing and validation of /v1/chat/completions and /v1/completions request bodies into one
// typed aggregate. Every rejection is an OpenAI error object naming the parameter at fault.
// Unknown fields are ignored (clients send many optional ones); known fields are type- and
// range-checked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "server/openai_errors.h"

namespace frugal::server {

enum class Endpoint { kChat, kCompletions };

// A completions prompt: text, or token ids given by the client.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<int32_t> tokens;  // when text is unset
};

struct CompletionParams {
  Endpoint endpoint = Endpoint::kChat;
  std::optional<std::string> model;
  bool stream = false;
  bool include_usage = false;
  int32_t n = 1;
  std::optional<int32_t> max_tokens;   // unset: completions 16, chat the rest of the context
  runtime::SamplingParams sampling;    // max_tokens and top_logprobs filled later
  int32_t logprobs = -1;               // engine top_logprobs: -1 none, 0 chosen only, k top-k
  std::vector<std::string> stop;
  bool echo = false;                   // completions only
  nlohmann::json messages;             // chat: normalized (content always a string or null)
  nlohmann::json tools;                // chat: passed to the template
  std::vector<PromptInput> prompts;    // completions
};

using ParseResult = std::variant<CompletionParams, ApiError>;

// `body` is the raw request body; malformed JSON is a 400 too.
ParseResult parse_completion_request(Endpoint endpoint, const std::string& body);

}  // namespace frugal::server
