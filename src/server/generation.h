// One OpenAI completion request in flight: its n x prompts engine requests ("choices"), the
// queue their outputs arrive on, and the loop that turns outputs into a response or an event
// stream.
//
// Threading: engine callbacks (engine thread) only append the output to the queue and, at most
// once per wake-up, post a wake to the connection's strand. Detokenization, stop matching,
// reasoning split, JSON and socket writes all run in the connection's coroutine on an io thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "runtime/engine.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_params.h"
#include "server/text_codec.h"

namespace frugal::server {

struct ChoicePlan {
  int32_t prompt_index = 0;
  runtime::GenerateRequest request;
  bool opens_think = false;  // the chat prompt ends inside <think>
};

struct GenerationPlan {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;               // echoed in responses
  std::string system_fingerprint;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  bool reasoning = false;          // split reasoning_content (chat only)
  std::vector<std::string> stop;
  std::vector<int32_t> prompt_tokens;      // per prompt
  std::vector<std::string> echo_prefix;    // per prompt (completions echo), else empty
  std::vector<ChoicePlan> choices;         // index in this list = OpenAI choice index
};

struct GenerationServices {
  runtime::Engine& engine;
  const TextCodec& codec;
  Metrics& metrics;
};

// Submits every choice and writes the response (or the event stream) to `conn`. Returns the
// HTTP status written (for metrics). A client that goes away cancels every unfinished choice.
asio::awaitable<int> run_generation(GenerationPlan& plan, const GenerationServices& svc, HttpConnection& conn);

}  // namespace frugal::server
