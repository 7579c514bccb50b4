#include "bench/serve_request.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "bench/stats.h"

namespace frugal::bench {

using json = nlohmann::json;

Result<Endpoint> parse_endpoint(const std::string& s) {
  if (s == "/v1/completions" || s == "completions") return Endpoint::kCompletions;
  if (s == "/v1/chat/completions" || s == "chat" || s == "chat/completions") return Endpoint::kChat;
  return invalid_argument("--endpoint '" + s + "': expected /v1/completions or /v1/chat/completions");
}

const char* endpoint_path(Endpoint e) {
  switch (e) {
    case Endpoint::kCompletions: return "/v1/completions";
    case Endpoint::kChat: return "/v1/chat/completions";
  }
  return "";
}

namespace {
constexpr int32_t kFirstId = 3;  // without a tokenizer, skip the ids llama-style vocabularies reserve

// A piece that is whole UTF-8 on its own (byte-fallback tokens like <0xE2> are not: decoded
// alone they become U+FFFD, which re-encodes as three tokens).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

// Text of exactly `len` tokens when the tokenizer allows: decoding random ids and re-encoding
// the text merges or splits some, so re-encode, cut or top up, and repeat (as vLLM does).
std::string text_of_len(const Tokenizer& tok, const std::vector<int32_t>& pool, SplitMix64& rng, int32_t len) {
  std::vector<int32_t> ids(static_cast<size_t>(len));
  for (auto& t : ids) t = pool[rng.next() % pool.size()];
  std::string text = tok.decode(ids);
  for (int iter = 0; iter < 10; ++iter) {
    std::vector<int32_t> enc = tok.encode(text);
    if (static_cast<int32_t>(enc.size()) == len) break;
    if (static_cast<int32_t>(enc.size()) > len) {
      enc.resize(static_cast<size_t>(len));
    } else {
      while (static_cast<int32_t>(enc.size()) < len) enc.push_back(pool[rng.next() % pool.size()]);
    }
    text = tok.decode(enc);
  }
  return text;
}

int32_t jitter(SplitMix64& rng, int32_t len, double ratio) {
  if (ratio <= 0) return len;
  double lo = std::max(1.0, std::floor(len * (1 - ratio))), hi = std::ceil(len * (1 + ratio));
  return static_cast<int32_t>(lo + std::floor(rng.uniform() * (hi - lo + 1)));
}
}  // namespace

Result<std::vector<BenchPrompt>> random_dataset(const RandomDatasetOptions& o, const Tokenizer* tok, Endpoint ep) {
  if (o.input_len < 1) return invalid_argument("--input-len must be >= 1, got " + std::to_string(o.input_len));
  if (o.output_len < 1) return invalid_argument("--output-len must be >= 1, got " + std::to_string(o.output_len));
  if (o.range_ratio < 0 || o.range_ratio >= 1) {
    return invalid_argument("--range-ratio must be in [0, 1), got " + std::to_string(o.range_ratio));
  }
  if (!tok && ep == Endpoint::kChat) {
    return invalid_argument("the random dataset on /v1/chat/completions needs --tokenizer (chat prompts are text)");
  }
  std::vector<int32_t> pool;
  if (tok) {
    for (int32_t id = 0; id < tok->vocab_size(); ++id) {
      if (tok->is_special(id) || id == tok->bos_id() || id == tok->eos_id() || id == tok->pad_id()) continue;
      std::string piece = tok->token_to_piece(id);
      if (piece.empty() || !valid_utf8(piece)) continue;
      pool.push_back(id);
    }
  } else {
    if (o.fallback_vocab <= kFirstId) return invalid_argument("--random-vocab-size must be > 3");
    for (int32_t id = kFirstId; id < o.fallback_vocab; ++id) pool.push_back(id);
  }
  if (pool.empty()) return invalid_argument("the tokenizer has no ordinary tokens to sample random prompts from");
  SplitMix64 rng(o.seed ^ 0x7261646f6d);
  std::vector<BenchPrompt> out;
  for (int32_t i = 0; i < o.num_prompts; ++i) {
    BenchPrompt p;
    p.id = "random-" + std::to_string(i);
    int32_t in_len = jitter(rng, o.input_len, o.range_ratio);
    p.output_len = jitter(rng, o.output_len, o.range_ratio);
    if (tok) {
      p.text = text_of_len(*tok, pool, rng, in_len);
      p.prompt_tokens = static_cast<int64_t>(tok->encode(p.text).size());
      if (ep == Endpoint::kChat) p.messages = json::array({{{"role", "user"}, {"content", p.text}}});
    } else {
      p.token_ids.resize(static_cast<size_t>(in_len));
      for (auto& t : p.token_ids) t = pool[rng.next() % pool.size()];
      p.prompt_tokens = in_len;
    }
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<BenchPrompt>> jsonl_dataset(const std::string& path, const std::string& field, int32_t output_len,
                                               int32_t limit, const Tokenizer* tok, Endpoint ep) {
  std::ifstream in(path);
  if (!in) return not_found("--dataset '" + path + "': cannot open the file");
  if (output_len < 1) return invalid_argument("--output-len must be >= 1, got " + std::to_string(output_len));
  std::vector<BenchPrompt> out;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line) && (limit <= 0 || static_cast<int32_t>(out.size()) < limit)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return invalid_argument(where + ": not valid JSON");
    if (!j.is_object()) return invalid_argument(where + ": expected a JSON object");
    std::string key = field;
    if (key.empty()) {
      for (const char* k : {"prompt", "question", "text", "input", "messages"}) {
        if (j.contains(k)) {
          key = k;
          break;
        }
      }
    }
    if (key.empty() || !j.contains(key)) {
      return invalid_argument(where + ": no prompt field (" +
                              (field.empty() ? std::string("looked for prompt, question, text, input, messages")
                                             : "'" + field + "'") + "); name it with --prompt-field");
    }
    BenchPrompt p;
    p.output_len = output_len;
    if (j.contains("id")) p.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    const json& v = j[key];
    if (v.is_string()) {
      p.text = v.get<std::string>();
      if (ep == Endpoint::kChat) p.messages = json::array({{{"role", "user"}, {"content", p.text}}});
    } else if (v.is_array() && !v.empty() && v[0].is_object()) {
      for (const auto& m : v) {
        if (!m.contains("role") || !m.contains("content") || !m["content"].is_string()) {
          return invalid_argument(where + ": '" + key + "' messages need \"role\" and a string \"content\"");
        }
      }
      if (ep != Endpoint::kChat) {
        return invalid_argument(where + ": a chat ('" + key + "' is a list of messages) needs --endpoint /v1/chat/completions");
      }
      p.messages = v;
      for (const auto& m : v) p.text += m["content"].get<std::string>() + "\n";
    } else {
      return invalid_argument(where + ": '" + key + "' must be a string or a list of {role, content} messages");
    }
    if (tok) p.prompt_tokens = static_cast<int64_t>(tok->encode(p.text).size());
    out.push_back(std::move(p));
  }
  if (out.empty()) return invalid_argument("--dataset '" + path + "': no prompts in the file");
  return out;
}

json request_body(const BenchPrompt& p, const RequestOptions& o) {
  json b = {{"model", o.model}, {"max_tokens", p.output_len}, {"stream", true}, {"temperature", o.temperature}};
  if (o.include_usage) b["stream_options"] = {{"include_usage", true}};
  if (o.ignore_eos) b["ignore_eos"] = true;
  if (o.n != 1) b["n"] = o.n;
  if (o.endpoint == Endpoint::kChat) {
    b["messages"] = p.messages.is_array() ? p.messages : json::array({{{"role", "user"}, {"content", p.text}}});
  } else if (!p.token_ids.empty()) {
    b["prompt"] = p.token_ids;
  } else {
    b["prompt"] = p.text;
  }
  for (const auto& [k, v] : o.extra_body.items()) b[k] = v;
  return b;
}

void StreamReader::on_bytes(std::string_view bytes, Clock::time_point at) {
  sse_.feed(bytes, [&](const std::string& d) { on_event(d, at); });
}

void StreamReader::on_end() { sse_.finish(); }

void StreamReader::on_event(const std::string& data, Clock::time_point at) {
  if (!error_kind_.empty()) return;  // the first error decides
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    error_kind_ = "invalid_json";
    error_message_ = "an SSE event is not a JSON object: " + data.substr(0, 200);
    return;
  }
  if (j.contains("error") && !j["error"].is_null()) {
    error_kind_ = "stream_error";
    const json& e = j["error"];
    error_message_ = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : e.dump();
    return;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) usage_prompt_ = u["prompt_tokens"].get<int64_t>();
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      usage_completion_ = u["completion_tokens"].get<int64_t>();
    }
  }
  if (!j.contains("choices") || !j["choices"].is_array()) return;
  for (const auto& c : j["choices"]) {
    if (!c.is_object()) continue;
    int64_t idx = c.contains("index") && c["index"].is_number_integer() ? c["index"].get<int64_t>() : 0;
    std::string piece;
    if (endpoint_ == Endpoint::kChat) {
      if (c.contains("delta") && c["delta"].is_object()) {
        const json& d = c["delta"];
        // Reasoning models stream their thinking first: it is output the server generated.
        for (const char* k : {"reasoning_content", "reasoning", "content"}) {
          if (d.contains(k) && d[k].is_string()) piece += d[k].get<std::string>();
        }
      }
    } else if (c.contains("text") && c["text"].is_string()) {
      piece = c["text"].get<std::string>();
    }
    Choice& ch = choices_[idx];
    if (piece.empty()) continue;  // role-only or finish-only chunks carry no token
    ch.text += piece;
    ch.chunk_times.push_back(at);
    ++n_chunks_;
  }
}

void StreamReader::finish(Clock::time_point sent, Clock::time_point end, const HttpStreamResult& http,
                          RequestRecord& r) {
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  r.server_header = http.server_header;
  r.n_chunks = n_chunks_;
  r.n_comments = sse_.comments();
  r.e2e_ms = ms(sent, end);
  r.ok = false;
  if (http.error != TransportError::kNone && http.status == 0) {
    r.error_kind = transport_error_name(http.error);
    r.error_message = http.error_message;
    return;
  }
  if (http.status < 200 || http.status >= 300) {
    r.error_kind = "http_" + std::to_string(http.status);
    json e = json::parse(http.error_body, nullptr, false);
    if (!e.is_discarded() && e.is_object() && e.contains("error")) {
      const json& x = e["error"];
      r.error_message = x.is_object() && x.contains("message") && x["message"].is_string() ? x["message"].get<std::string>() : x.dump();
    } else {
      r.error_message = http.error_body.substr(0, 500);
    }
    return;
  }
  if (!error_kind_.empty()) {
    r.error_kind = error_kind_;
    r.error_message = error_message_;
    return;
  }
  if (http.error != TransportError::kNone) {
    r.error_kind = http.error == TransportError::kTimeout ? "timeout" : "incomplete_stream";
    r.error_message = http.error_message;
    return;
  }
  if (!done_) {
    r.error_kind = "incomplete_stream";
    r.error_message = "the stream ended without data: [DONE]";
    return;
  }
  Clock::time_point first = Clock::time_point::max();
  for (const auto& [i, c] : choices_) {
    r.texts.push_back(c.text);
    if (!c.chunk_times.empty()) first = std::min(first, c.chunk_times.front());
    for (size_t k = 1; k < c.chunk_times.size(); ++k) r.itl_ms.push_back(ms(c.chunk_times[k - 1], c.chunk_times[k]));
  }
  r.n_choices = static_cast<int32_t>(choices_.size());
  if (first == Clock::time_point::max()) {
    r.error_kind = "no_output";
    r.error_message = "the stream finished without any generated text";
    return;
  }
  r.ttft_ms = ms(sent, first);
  if (usage_completion_) {
    r.output_tokens = *usage_completion_;
    r.token_count_source = "usage";
  } else {
    r.output_tokens = n_chunks_;
    r.token_count_source = "chunks";
  }
  if (usage_prompt_) r.prompt_tokens = *usage_prompt_;
  compute_tpot(r);
  r.ok = true;
}

void compute_tpot(RequestRecord& r) {
  // Choices decode side by side, so TPOT is per choice: the average choice's tokens.
  double per_choice = static_cast<double>(r.output_tokens) / std::max<int32_t>(1, r.n_choices);
  r.tpot_ms = per_choice > 1 ? (r.e2e_ms - r.ttft_ms) / (per_choice - 1) : 0;
}

void count_tokens_with_tokenizer(RequestRecord& r, const Tokenizer& tok) {
  if (!r.ok || r.token_count_source == "usage") return;
  r.output_tokens = 0;
  for (const auto& t : r.texts) r.output_tokens += static_cast<int64_t>(tok.encode(t).size());
  r.token_count_source = "tokenizer";
  compute_tpot(r);
}

}  // namespace frugal::bench
