// JSON pieces of OpenAI responses: logprobs in the chat and the completions formats, usage,
// ids. Pure functions over tokens and text; the generation loop assembles them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/stop_matcher.h"
#include "server/text_codec.h"

namespace frugal::server {

// Dumps JSON for the wire; invalid UTF-8 (a token that is half a character) becomes U+FFFD
// instead of throwing.
std::string dump_json(const nlohmann::json& j);

// Chat format: [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}].
nlohmann::json chat_logprobs_content(const TextCodec& codec, const std::vector<EmittedToken>& tokens);

// Completions format, appended to `lp` = {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"}; offsets are relative to the choice text and shifted by `base_offset` (the
// echoed prompt's length).
void append_completion_logprobs(const TextCodec& codec, const std::vector<EmittedToken>& tokens,
                                size_t base_offset, nlohmann::json& lp);
nlohmann::json empty_completion_logprobs();

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// "chatcmpl-<24 hex>" / "cmpl-<24 hex>".
std::string make_response_id(const char* prefix);

}  // namespace frugal::server
