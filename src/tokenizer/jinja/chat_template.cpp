#include "tokenizer/jinja/chat_template.h"

#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace frugal::jinja {

Result<Template> Template::parse(const std::string& source, RenderLimits limits) {
  FRUGAL_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  FRUGAL_ASSIGN_OR_RETURN(Body body, jinja::parse(tokens));
  Template t;
  t.program_ = std::make_shared<const Body>(std::move(body));
  t.limits_ = limits;
  return t;
}

Result<std::string> Template::render_object(Object globals) const {
  Evaluator ev(limits_);
  return ev.render(*program_, std::move(globals));
}

template <typename Json>
static Result<Object> context_object(const Json& context) {
  if (!context.is_object() && !context.is_null()) {
    return invalid_argument(std::string("chat template context must be a JSON object, got ") + context.type_name());
  }
  Object globals;
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) globals.set(it.key(), Value::from_json(it.value()));
  }
  return globals;
}

Result<std::string> Template::render(const nlohmann::json& context) const {
  FRUGAL_ASSIGN_OR_RETURN(Object globals, context_object(context));
  return render_object(std::move(globals));
}

Result<std::string> Template::render(const nlohmann::ordered_json& context) const {
  FRUGAL_ASSIGN_OR_RETURN(Object globals, context_object(context));
  return render_object(std::move(globals));
}

Result<nlohmann::json> chat_template_context(const nlohmann::json& messages, const ChatTemplateOptions& opts) {
  if (!messages.is_array()) return invalid_argument("chat messages must be a JSON array");
  if (!opts.extra_context.is_null() && !opts.extra_context.is_object()) {
    return invalid_argument("ChatTemplateOptions.extra_context must be a JSON object");
  }
  nlohmann::json ctx = opts.extra_context.is_object() ? opts.extra_context : nlohmann::json::object();
  ctx["messages"] = messages;
  ctx["add_generation_prompt"] = opts.add_generation_prompt;
  ctx["bos_token"] = opts.bos_token;
  ctx["eos_token"] = opts.eos_token;
  ctx["tools"] = opts.tools;
  return ctx;
}

Result<std::string> render_chat_template(const std::string& tmpl, const nlohmann::json& messages,
                                         const ChatTemplateOptions& opts) {
  FRUGAL_ASSIGN_OR_RETURN(nlohmann::json ctx, chat_template_context(messages, opts));
  FRUGAL_ASSIGN_OR_RETURN(Template t, Template::parse(tmpl));
  return t.render(ctx);
}

}  // namespace frugal::jinja
