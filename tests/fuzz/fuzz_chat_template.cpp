// libFuzzer target for the Jinja chat-template engine (src/tokenizer/jinja). The input is a
// template source, optionally followed by a NUL byte and a messages JSON array; without one (or
// when it does not parse) a fixed conversation is used: system, user, assistant with a tool call
// and reasoning, tool reply, user. Parsing and rendering must end in a result or an error, never a
// crash, a hang or unbounded memory: the render limits below bound loops, output and call depth.
// Seeds: the chat templates under tests/data/shared/chat-templates (scripts/fuzz.sh copies them).
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/chat_template.h"

namespace {

const nlohmann::json& default_messages() {
  static const nlohmann::json m = nlohmann::json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2? héllo 🦙"},
    {"role": "assistant", "content": "<think>add</think>Let me check.", "reasoning_content": "add",
     "tool_calls": [{"type": "function", "id": "call_1",
                     "function": {"name": "calc", "arguments": {"expr": "2+2"}}}]},
    {"role": "tool", "content": "4", "tool_call_id": "call_1"},
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
  ])");
  return m;
}

const nlohmann::json& tools() {
  static const nlohmann::json t = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "calc", "description": "evaluates",
     "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}}
  ])");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source = input.substr(0, nul);
  nlohmann::json messages = default_messages();
  if (nul != std::string::npos) {
    nlohmann::json m = nlohmann::json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (m.is_array()) messages = std::move(m);
  }
  // Smaller than the defaults so that each input runs in milliseconds; the same checks enforce them.
  const frugal::jinja::RenderLimits limits{
      .max_output_bytes = 1u << 20, .max_loop_iterations = 100'000, .max_call_depth = 50};
  auto t = frugal::jinja::Template::parse(source, limits);
  if (!t.is_ok()) return 0;
  frugal::jinja::ChatTemplateOptions opts{.add_generation_prompt = size % 2 == 0,
                                          .bos_token = "<s>",
                                          .eos_token = "</s>",
                                          .tools = size % 3 == 0 ? tools() : nlohmann::json(),
                                          .extra_context = {{"enable_thinking", size % 5 == 0}}};
  auto ctx = frugal::jinja::chat_template_context(messages, opts);
  if (!ctx.is_ok()) return 0;
  auto out = t->render(*ctx);
  if (out.is_ok() && out->size() > limits.max_output_bytes) std::abort();
  return 0;
}
