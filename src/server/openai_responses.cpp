#include "server/openai_responses.h"

#include <random>

namespace frugal::server {

using nlohmann::json;

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {
json token_entry(const TextCodec& codec, int32_t token, float logprob) {
  std::string bytes = codec.token_bytes(token);
  json b = json::array();
  for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
  return {{"token", bytes}, {"logprob", logprob}, {"bytes", b}};
}
}  // namespace

json chat_logprobs_content(const TextCodec& codec, const std::vector<EmittedToken>& tokens) {
  json content = json::array();
  for (const auto& t : tokens) {
    json e = token_entry(codec, t.token.token, t.token.logprob);
    json top = json::array();
    for (const auto& alt : t.token.top) top.push_back(token_entry(codec, alt.token, alt.logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return content;
}

json empty_completion_logprobs() {
  return {{"tokens", json::array()}, {"token_logprobs", json::array()},
          {"top_logprobs", json::array()}, {"text_offset", json::array()}};
}

void append_completion_logprobs(const TextCodec& codec, const std::vector<EmittedToken>& tokens,
                                size_t base_offset, json& lp) {
  for (const auto& t : tokens) {
    lp["tokens"].push_back(codec.token_bytes(t.token.token));
    lp["token_logprobs"].push_back(t.token.logprob);
    json top = json::object();
    for (const auto& alt : t.token.top) top[codec.token_bytes(alt.token)] = alt.logprob;
    lp["top_logprobs"].push_back(std::move(top));
    lp["text_offset"].push_back(base_offset + t.text_offset);
  }
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

std::string make_response_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

}  // namespace frugal::server
