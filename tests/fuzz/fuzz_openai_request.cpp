// libFuzzer target for what the OpenAI server does with a request before the engine sees it, and
// with the text it sends back: the body parsed and validated (parse_completion_request), its
// prompts rendered through a real chat template and tokenized (build_prompts, with the reference
// model's tokenizer and DeepSeek-R1's template), then the prompt's own tokens fed, as if
// generated, through the stop-string matcher with the request's stops and through the <think>
// reasoning split.
//
// Input: one mode byte, then the request body. Mode bit 0: /v1/completions (else chat); bit 1: a
// 64-token context (else 4096); bits 2-4: tokens per engine callback, 1..8.
//
// Besides no crash, leak or undefined behaviour, what the engine and the client rely on:
//  - every rejection names what was wrong (a message);
//  - an accepted request has 1 <= n <= 16 and max_tokens >= 1 when given;
//  - every built prompt is non-empty, its ids are inside the vocabulary, and prompt + completion
//    budget fit the context, with a budget of at least one token;
//  - the text the stop matcher releases is a prefix of the detokenized stream that ends where the
//    earliest stop string starts (no stop string in it or across its end), or the whole stream
//    when none is in it; released tokens' offsets lie inside the released text;
//  - the reasoning split never invents text (reasoning + content no longer than what went in).
// Seeds: scripts/fuzz.sh writes a few chat and completions bodies.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "server/openai_params.h"
#include "server/openai_prompt.h"
#include "server/reasoning.h"
#include "server/stop_matcher.h"
#include "server/tokenizer_codec.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace frugal;
using namespace frugal::server;

// The file's bytes; a missing fixture aborts the target at its first input.
std::string fixture(const std::string& path) {
  auto r = read_file(path);
  if (!r.is_ok()) {
    std::fprintf(stderr, "fuzz_openai_request: %s\n", r.status().to_string().c_str());
    std::abort();
  }
  return std::move(*r);
}

struct Codec {
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<TokenizerCodec> codec;
};

// The reference model's tokenizer (Qwen2 BPE) with DeepSeek-R1-Distill-Qwen's chat template in
// its tokenizer_config.json: tool calls, reasoning and the <think> the template opens.
const TextCodec& codec() {
  static const Codec c = [] {
    const std::string root = FRUGAL_SOURCE_ROOT;
    nlohmann::json config = nlohmann::json::parse(fixture(root + "/models/reference-qwen2-20m/tokenizer_config.json"));
    config["chat_template"] = fixture(root + "/tests/data/shared/chat-templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja");
    auto tok = Tokenizer::from_json(fixture(root + "/models/reference-qwen2-20m/tokenizer.json"), config.dump(), "fuzz");
    if (!tok.is_ok()) {
      std::fprintf(stderr, "fuzz_openai_request: %s\n", tok.status().to_string().c_str());
      std::abort();
    }
    Codec out;
    out.tok = std::move(*tok);
    auto codec = TokenizerCodec::create(*out.tok);
    if (!codec.is_ok()) {
      std::fprintf(stderr, "fuzz_openai_request: %s\n", codec.status().to_string().c_str());
      std::abort();
    }
    out.codec = std::move(*codec);
    return out;
  }();
  return *c.codec;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_openai_request: %s\n", what);
  std::abort();
}

// The prompt's tokens through StopMatcher `per_call` at a time, checked against a plain
// detokenization of the same stream.
void check_stops(const std::vector<int32_t>& tokens, const std::vector<std::string>& stops, size_t per_call) {
  const TextCodec& c = codec();
  std::string reference;
  {
    auto d = c.stream_decoder();
    for (int32_t t : tokens) reference += d->push(t);
    reference += d->flush();
  }
  StopMatcher m(c.stream_decoder(), stops);
  std::string sent;
  bool stopped = false;
  auto take = [&](const TextDelta& d) {
    for (const EmittedToken& e : d.tokens)
      if (e.text_offset > sent.size() + d.text.size()) fail("a released token's offset lies past the released text");
    sent += d.text;
    stopped = stopped || d.stopped;
  };
  for (size_t i = 0; i < tokens.size() && !stopped; i += per_call) {
    std::vector<runtime::GeneratedToken> batch;
    for (size_t j = i; j < tokens.size() && j < i + per_call; ++j) batch.push_back({tokens[j], 0.f, {}});
    take(m.push(batch));
  }
  if (!stopped) take(m.finish());
  if (reference.compare(0, sent.size(), sent) != 0) fail("the released text is not a prefix of the detokenized stream");
  if (!stopped && sent != reference) fail("no stop matched, yet the released text is not the whole stream");
  // The stream stops at the earliest place any stop string starts: none starts before the end of
  // the released text (so none lies in it or straddles its end), and one starts there.
  bool one_at_end = false;
  for (const std::string& s : stops) {
    if (s.empty()) continue;
    const size_t at = reference.find(s);
    if (at < sent.size()) fail("a stop string starts inside the released text");
    if (at == sent.size() && at != std::string::npos) one_at_end = true;
  }
  if (stopped && !one_at_end) fail("stopped, but no stop string starts where the released text ends");
  if (!stopped && one_at_end) fail("a stop string is in the stream, but the stream did not stop");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const Endpoint endpoint = mode & 1 ? Endpoint::kCompletions : Endpoint::kChat;
  const int32_t max_model_len = mode & 2 ? 64 : 4096;
  const size_t per_call = 1 + ((mode >> 2) & 7);
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);

  ParseResult parsed = parse_completion_request(endpoint, body);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) {
      if (e->message.empty()) fail("a rejected request without a message");
    return 0;
  }
  const CompletionParams& p = std::get<CompletionParams>(parsed);
  if (p.n < 1 || p.n > 16) fail("n outside 1..16 accepted");
  if (p.max_tokens && *p.max_tokens < 1) fail("max_tokens < 1 accepted");

  BuildResult built = build_prompts(p, codec(), max_model_len);
  if (const ApiError* e = std::get_if<ApiError>(&built)) {
      if (e->message.empty()) fail("a rejected prompt without a message");
    return 0;
  }
  for (const BuiltPrompt& b : std::get<std::vector<BuiltPrompt>>(built)) {
    if (b.tokens.empty()) fail("an empty prompt accepted");
    for (int32_t t : b.tokens)
      if (t < 0 || t >= codec().vocab_size()) fail("a prompt token outside the vocabulary");
    if (b.max_tokens < 1) fail("a completion budget below one token");
    if (static_cast<int64_t>(b.tokens.size()) + b.max_tokens > max_model_len) fail("prompt + completion past the context");
    check_stops(b.tokens, p.stop, per_call);
    ReasoningParser rp(b.opens_think);
    const std::string text = codec().decode(b.tokens);
    size_t out = 0;
    for (size_t i = 0; i < text.size(); i += 7) {
      const ReasoningDelta d = rp.push(std::string_view(text).substr(i, 7));
      out += d.reasoning.size() + d.content.size();
    }
    const ReasoningDelta d = rp.finish();
    out += d.reasoning.size() + d.content.size();
    if (out > text.size()) fail("the reasoning split produced more text than it was given");
  }
  return 0;
}
