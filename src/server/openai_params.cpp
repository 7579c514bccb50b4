#include "server/openai_params.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace frugal::server {

namespace {
using nlohmann::json;

constexpr int32_t kMaxN = 16;
constexpr int32_t kMaxLogprobs = 20;
constexpr size_t kMaxStops = 16;

// Reads optional fields of one request object; the first problem found is kept in err_.
class FieldReader {
 public:
  explicit FieldReader(const json& obj) : obj_(obj) {}
  const std::optional<ApiError>& error() const { return err_; }
  void fail(std::string msg, const std::string& param) {
    if (!err_) err_ = bad_request(std::move(msg), param);
  }
  // The field when present and not null.
  const json* get(const char* name) const {
    auto it = obj_.find(name);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<bool> boolean(const char* name) {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) return fail(fmt::format("'{}' must be a boolean, got {}", name, v->type_name()), name), std::nullopt;
    return v->get<bool>();
  }

  std::optional<double> number(const char* name, double lo, double hi, bool lo_open = false) {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) return fail(fmt::format("'{}' must be a number, got {}", name, v->type_name()), name), std::nullopt;
    double x = v->get<double>();
    if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo)) {
      fail(fmt::format("{} is {} the allowed range for '{}': expected a value {} {} and <= {}", x,
                       "outside", name, lo_open ? ">" : ">=", lo, hi), name);
      return std::nullopt;
    }
    return x;
  }

  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) return fail(fmt::format("'{}' must be an integer, got {}", name, v->type_name()), name), std::nullopt;
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return fail(fmt::format("'{}' is too large: expected an integer <= {}", name, hi), name), std::nullopt;
    }
    int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) {
      fail(fmt::format("{} is outside the allowed range for '{}': expected an integer >= {} and <= {}", x, name, lo, hi), name);
      return std::nullopt;
    }
    return x;
  }

 private:
  const json& obj_;
  std::optional<ApiError> err_;
};

void read_stop(FieldReader& r, CompletionParams& p) {
  const json* v = r.get("stop");
  if (!v) return;
  if (v->is_string()) {
    p.stop.push_back(v->get<std::string>());
    return;
  }
  if (!v->is_array()) return r.fail("'stop' must be a string or an array of strings", "stop");
  if (v->size() > kMaxStops) return r.fail(fmt::format("'stop' has {} entries: at most {} are allowed", v->size(), kMaxStops), "stop");
  for (const auto& s : *v) {
    if (!s.is_string()) return r.fail("'stop' must be a string or an array of strings", "stop");
    p.stop.push_back(s.get<std::string>());
  }
}

void read_sampling(FieldReader& r, CompletionParams& p) {
  auto& s = p.sampling;
  if (auto x = r.number("temperature", 0, 2)) s.temperature = static_cast<float>(*x);
  if (auto x = r.number("top_p", 0, 1, true)) s.top_p = static_cast<float>(*x);
  if (auto x = r.integer("top_k", -1, std::numeric_limits<int32_t>::max())) s.top_k = *x < 0 ? 0 : static_cast<int32_t>(*x);
  if (auto x = r.number("min_p", 0, 1)) s.min_p = static_cast<float>(*x);
  if (auto x = r.number("presence_penalty", -2, 2)) s.presence_penalty = static_cast<float>(*x);
  if (auto x = r.number("frequency_penalty", -2, 2)) s.frequency_penalty = static_cast<float>(*x);
  if (auto x = r.number("repetition_penalty", 0, 10, true)) s.repetition_penalty = static_cast<float>(*x);
  if (auto x = r.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    s.seed = static_cast<uint64_t>(*x);
  }
  if (auto x = r.boolean("ignore_eos")) s.ignore_eos = *x;
  if (auto x = r.integer("n", 1, kMaxN)) p.n = static_cast<int32_t>(*x);
  const int64_t max_tok = std::numeric_limits<int32_t>::max();
  if (auto x = r.integer("max_tokens", 1, max_tok)) p.max_tokens = static_cast<int32_t>(*x);
  if (auto x = r.integer("max_completion_tokens", 1, max_tok)) p.max_tokens = static_cast<int32_t>(*x);
  read_stop(r, p);
}

void read_stream(FieldReader& r, CompletionParams& p) {
  if (auto x = r.boolean("stream")) p.stream = *x;
  const json* so = r.get("stream_options");
  if (!so) return;
  if (!so->is_object()) return r.fail("'stream_options' must be an object", "stream_options");
  if (!p.stream) return r.fail("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options");
  FieldReader sr(*so);
  if (auto x = sr.boolean("include_usage")) p.include_usage = *x;
  if (sr.error()) r.fail(sr.error()->message, "stream_options.include_usage");
}

// Chat content may be a string or a list of text parts; templates want a string.
void normalize_message(FieldReader& r, const json& m, size_t i, json& out) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) return r.fail(where + " must be an object with 'role' and 'content'", where);
  auto role = m.find("role");
  static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  if (role == m.end() || !role->is_string()) return r.fail(where + ".role must be a string", where + ".role");
  bool known = false;
  for (const char* k : kRoles) known |= (*role == k);
  if (!known) return r.fail(fmt::format("{}.role '{}' is not one of system, developer, user, assistant, tool", where, role->get<std::string>()), where + ".role");
  json msg = m;
  auto content = m.find("content");
  if (content == m.end() || content->is_null()) {
    if (*role != "assistant") return r.fail(where + ".content is required for role " + role->get<std::string>(), where + ".content");
    msg["content"] = nullptr;
  } else if (content->is_array()) {
    std::string text;
    for (const auto& part : *content) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
        return r.fail(where + ".content parts must be {\"type\": \"text\", \"text\": string} (only text is supported)", where + ".content");
      }
      text += part["text"].get<std::string>();
    }
    msg["content"] = text;
  } else if (!content->is_string()) {
    return r.fail(where + ".content must be a string or an array of text parts", where + ".content");
  }
  out.push_back(std::move(msg));
}

void read_chat(FieldReader& r, const json& body, CompletionParams& p) {
  auto it = body.find("messages");
  if (it == body.end()) return r.fail("Missing required parameter: 'messages'.", "messages");
  if (!it->is_array() || it->empty()) return r.fail("'messages' must be a non-empty array", "messages");
  p.messages = json::array();
  for (size_t i = 0; i < it->size(); ++i) normalize_message(r, (*it)[i], i, p.messages);
  if (auto x = r.boolean("logprobs"); x && *x) p.logprobs = 0;
  if (auto x = r.integer("top_logprobs", 0, kMaxLogprobs)) {
    if (p.logprobs < 0 && *x > 0) return r.fail("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
    if (p.logprobs >= 0) p.logprobs = static_cast<int32_t>(*x);
  }
  if (const json* t = r.get("tools")) {
    if (!t->is_array()) return r.fail("'tools' must be an array", "tools");
    p.tools = *t;
  }
}

void read_token_list(FieldReader& r, const json& arr, PromptInput& in) {
  for (const auto& t : arr) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return r.fail("'prompt' token ids must be non-negative integers", "prompt");
    }
    in.tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (in.tokens.empty()) r.fail("'prompt' must not be an empty token list", "prompt");
}

void read_prompt(FieldReader& r, const json& body, CompletionParams& p) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return r.fail("Missing required parameter: 'prompt'.", "prompt");
  const json& v = *it;
  const char* kShape = "'prompt' must be a string, an array of strings, an array of token ids or an array of token-id arrays";
  if (v.is_string()) {
    p.prompts.push_back({.text = v.get<std::string>()});
  } else if (!v.is_array() || v.empty()) {
    return r.fail(kShape, "prompt");
  } else if (v[0].is_number()) {
    p.prompts.emplace_back();
    read_token_list(r, v, p.prompts.back());
  } else {
    for (const auto& e : v) {
      if (e.is_string()) {
        p.prompts.push_back({.text = e.get<std::string>()});
      } else if (e.is_array()) {
        p.prompts.emplace_back();
        read_token_list(r, e, p.prompts.back());
      } else {
        return r.fail(kShape, "prompt");
      }
    }
  }
  if (auto x = r.integer("logprobs", 0, kMaxLogprobs)) p.logprobs = static_cast<int32_t>(*x);
  if (auto x = r.boolean("echo")) p.echo = *x;
  if (p.echo && p.logprobs >= 0) r.fail("'echo' together with 'logprobs' is not supported (prompt logprobs are not computed)", "echo");
  if (r.get("suffix")) r.fail("'suffix' is not supported", "suffix");
}
}  // namespace

ParseResult parse_completion_request(Endpoint endpoint, const std::string& body_text) {
  json body = json::parse(body_text, nullptr, false);
  if (body.is_discarded()) {
    return bad_request("We could not parse the JSON body of your request: it is not valid JSON.");
  }
  if (!body.is_object()) return bad_request("The request body must be a JSON object.");
  CompletionParams p;
  p.endpoint = endpoint;
  FieldReader r(body);
  if (const json* m = r.get("model")) {
    if (!m->is_string()) return bad_request("'model' must be a string", "model");
    p.model = m->get<std::string>();
  }
  read_stream(r, p);
  read_sampling(r, p);
  if (endpoint == Endpoint::kChat) {
    read_chat(r, body, p);
  } else {
    read_prompt(r, body, p);
  }
  if (r.error()) return *r.error();
  return p;
}

}  // namespace frugal::server
