#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace frugal::tok {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

constexpr const char* kWhiteSpace = "\\t-\\r\\x{85}\\p{Z}";

struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

std::string adapt_onig_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  int class_depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's' || n == 'S') {
        if (class_depth > 0) {
          // A negated \S inside a class has no flat equivalent; keep PCRE2's (rare in practice).
          if (n == 's') out += kWhiteSpace; else out += "\\S";
        } else {
          out += n == 's' ? "[" : "[^";
          out += kWhiteSpace;
          out += "]";
        }
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (c == '[' && class_depth == 0) {
      ++class_depth;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') { out += '^'; ++i; }
      if (i + 1 < p.size() && p[i + 1] == ']') { out += ']'; ++i; }
      continue;
    }
    if (c == ']' && class_depth > 0) --class_depth;
    out += c;
  }
  return out;
}

std::string Regex::quote(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Result<Regex> Regex::compile(const std::string& pattern, const std::string& name) {
  const std::string adapted = adapt_onig_pattern(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(adapted.data()), adapted.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return unsupported(name + ": regex " + pattern + " does not compile: " +
                       reinterpret_cast<char*>(buf) + " at offset " + std::to_string(err_off));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is absent
  Regex r;
  auto c = std::make_shared<Code>();
  c->code = code;
  r.code_ = std::move(c);
  return r;
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  thread_local MatchData md;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.data, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: the rest stays unmatched
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {
      // Empty match: step over one whole code point.
      if (b >= text.size()) break;
      pos = b + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace frugal::tok
