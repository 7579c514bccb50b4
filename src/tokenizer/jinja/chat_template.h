// Chat-template rendering: our own Jinja implementation, matching what transformers' Jinja2
// environment (trim_blocks, lstrip_blocks, loopcontrols, tojson without HTML escaping,
// raise_exception, strftime_now) renders for the templates models ship.
// See docs/chat_templates.md for what is supported.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/jinja/evaluator.h"

namespace frugal::jinja {

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  nlohmann::json tools;          // null: the template sees `tools` as none, like transformers
  nlohmann::json extra_context;  // object: more variables (enable_thinking, date_string, ...)
};

class Template {
 public:
  // Parses once; render() may then be called any number of times, from any thread.
  static Result<Template> parse(const std::string& source, RenderLimits limits = {});

  // `context` must be a JSON object; its keys become template variables.
  Result<std::string> render(const nlohmann::json& context) const;
  // Keeps the caller's key order (tojson output follows it, as Python dicts do).
  Result<std::string> render(const nlohmann::ordered_json& context) const;

 private:
  Result<std::string> render_object(Object globals) const;

  std::shared_ptr<const Body> program_;
  RenderLimits limits_;
};

// messages: array of {role, content, ...}. Errors from raise_exception() carry its message.
// Parses `tmpl` on every call; a server should parse once (Template::parse) and render
// chat_template_context(...) per request.
Result<std::string> render_chat_template(const std::string& tmpl, const nlohmann::json& messages,
                                         const ChatTemplateOptions& opts);

// The variables transformers' apply_chat_template passes: extra_context, then messages,
// add_generation_prompt, bos_token, eos_token, tools.
Result<nlohmann::json> chat_template_context(const nlohmann::json& messages, const ChatTemplateOptions& opts);

}  // namespace frugal::jinja
