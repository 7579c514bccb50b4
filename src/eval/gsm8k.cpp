#include "eval/gsm8k.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "eval/engine_jobs.h"
#include "tokenizer/jinja/chat_template.h"

namespace frugal::eval {

Result<std::vector<GsmProblem>> parse_gsm8k_jsonl(std::string_view text, const std::string& source) {
  std::vector<GsmProblem> out;
  int64_t line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string at = source + ":" + std::to_string(line);
    nlohmann::json j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_discarded()) return corrupt(at + ": not a JSON value");
    if (!j.is_object()) return corrupt(at + ": expected a JSON object");
    if (!j.contains("question") || !j["question"].is_string()) return corrupt(at + ": missing string field 'question'");
    if (!j.contains("answer") || !j["answer"].is_string()) return corrupt(at + ": missing string field 'answer'");
    const std::string answer = j["answer"].get<std::string>();
    const size_t h = answer.rfind("####");
    if (h == std::string::npos) return corrupt(at + ": 'answer' has no '#### N' final answer");
    GsmProblem p{.question = j["question"].get<std::string>(), .reference = normalize_number(answer.substr(h + 4)),
                 .line = line};
    if (p.reference.empty()) return corrupt(at + ": no number after '####' in 'answer'");
    out.push_back(std::move(p));
  }
  if (out.empty()) return corrupt(source + ": no problems");
  return out;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The last number in s ("-1,234.50" style), raw.
std::string last_number(std::string_view s) {
  size_t end = std::string_view::npos;
  for (size_t i = s.size(); i-- > 0;)
    if (is_digit(s[i])) {
      end = i + 1;
      break;
    }
  if (end == std::string_view::npos) return "";
  size_t b = end;
  while (b > 0 && (is_digit(s[b - 1]) || ((s[b - 1] == ',' || s[b - 1] == '.') && b >= 2 && is_digit(s[b - 2])))) --b;
  if (b > 0 && s[b - 1] == '-') --b;
  return std::string(s.substr(b, end - b));
}

}  // namespace

std::string normalize_number(std::string_view s) {
  // The first number of s, with separators removed.
  std::string t;
  for (char c : s)
    if (c != ',' && c != '$' && c != ' ' && c != '\n' && c != '\t') t += c;
  // \frac{a}{b} and similar are not numbers: leave them to exact text match after stripping.
  size_t i = 0;
  while (i < t.size() && !is_digit(t[i]) && !(t[i] == '-' && i + 1 < t.size() && is_digit(t[i + 1])) &&
         !(t[i] == '.' && i + 1 < t.size() && is_digit(t[i + 1])))
    ++i;
  if (i == t.size()) return "";
  std::string num;
  if (t[i] == '-') num += t[i++];
  bool dot = false;
  for (; i < t.size(); ++i) {
    if (is_digit(t[i])) num += t[i];
    else if (t[i] == '.' && !dot && i + 1 < t.size() && is_digit(t[i + 1])) {
      dot = true;
      num += '.';
    } else break;
  }
  if (num.empty() || num == "-") return "";
  if (dot) {
    while (!num.empty() && num.back() == '0') num.pop_back();
    if (!num.empty() && num.back() == '.') num.pop_back();
  }
  // Leading zeros ("007" -> "7", keep "0" and "0.5").
  const bool neg = num[0] == '-';
  std::string digits = neg ? num.substr(1) : num;
  while (digits.size() > 1 && digits[0] == '0' && digits[1] != '.') digits.erase(0, 1);
  if (digits.empty()) digits = "0";
  if (digits == "0") return "0";
  return (neg ? "-" : "") + digits;
}

std::optional<std::string> extract_answer(std::string_view text) {
  if (const size_t t = text.rfind("</think>"); t != std::string_view::npos) text = text.substr(t + 8);
  // Last \boxed{...} with balanced braces.
  if (const size_t b = text.rfind("\\boxed{"); b != std::string_view::npos) {
    size_t i = b + 7;
    int depth = 1;
    size_t start = i;
    for (; i < text.size(); ++i) {
      if (text[i] == '{') ++depth;
      else if (text[i] == '}' && --depth == 0) break;
    }
    if (depth == 0) {
      std::string n = normalize_number(text.substr(start, i - start));
      if (!n.empty()) return n;
    }
  }
  if (const size_t h = text.rfind("####"); h != std::string_view::npos) {
    std::string n = normalize_number(text.substr(h + 4));
    if (!n.empty()) return n;
  }
  std::string n = normalize_number(last_number(text));
  if (!n.empty()) return n;
  return std::nullopt;
}

Result<std::vector<int32_t>> gsm8k_prompt(const Tokenizer& tok, const std::string& question) {
  const std::string message = question + kGsm8kInstruction;
  if (tok.chat_template().empty()) return tok.encode(message, {.add_bos = tok.add_bos_token(), .parse_special = false});
  nlohmann::json messages = nlohmann::json::array();
  messages.push_back({{"role", "user"}, {"content", message}});
  jinja::ChatTemplateOptions o;
  if (tok.bos_id() >= 0) o.bos_token = tok.token_text(tok.bos_id());
  if (tok.eos_id() >= 0) o.eos_token = tok.token_text(tok.eos_id());
  FRUGAL_ASSIGN_OR_RETURN(std::string text, jinja::render_chat_template(tok.chat_template(), messages, o));
  return tok.encode(text, {.add_bos = false, .parse_special = true});
}

Result<GsmReport> run_gsm8k(runtime::Engine& engine, const Tokenizer& tok, const std::vector<GsmProblem>& problems,
                            const GsmOptions& opts, const std::function<void(int64_t, int64_t)>& progress) {
  std::vector<EngineJob> jobs;
  const int32_t max_len = engine.max_model_len();
  for (const auto& p : problems) {
    EngineJob j;
    FRUGAL_ASSIGN_OR_RETURN(j.req.prompt, gsm8k_prompt(tok, p.question));
    if (static_cast<int64_t>(j.req.prompt.size()) >= max_len)
      return invalid_argument("problem at line " + std::to_string(p.line) + ": the prompt is " +
                              std::to_string(j.req.prompt.size()) + " tokens, too long for the context of " +
                              std::to_string(max_len));
    j.req.sampling.temperature = opts.temperature;
    j.req.sampling.seed = opts.seed;
    j.req.sampling.max_tokens = opts.max_tokens;
    jobs.push_back(std::move(j));
  }
  const auto total = static_cast<int64_t>(jobs.size());
  FRUGAL_ASSIGN_OR_RETURN(auto results, run_engine_jobs(engine, std::move(jobs), opts.max_in_flight, [&](int64_t d) {
    if (progress) progress(d, total);
  }));
  GsmReport rep;
  int64_t correct = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    GsmResult r;
    r.completion = tok.decode(results[i].tokens, /*skip_special=*/true);
    r.extracted = extract_answer(r.completion);
    r.correct = r.extracted && *r.extracted == problems[i].reference;
    r.generated_tokens = static_cast<int32_t>(results[i].tokens.size());
    r.finish = results[i].finish;
    correct += r.correct ? 1 : 0;
    rep.generated_tokens += r.generated_tokens;
    rep.results.push_back(std::move(r));
  }
  rep.accuracy = proportion(correct, static_cast<int64_t>(problems.size()));
  return rep;
}

}  // namespace frugal::eval
