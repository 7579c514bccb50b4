#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "tokenizer/jinja/value.h"

namespace frugal::jinja {

const char* token_kind_name(TokenKind kind) {
  switch (kind) {
    case TokenKind::kText: return "text";
    case TokenKind::kExprOpen: return "'{{'";
    case TokenKind::kExprClose: return "'}}'";
    case TokenKind::kBlockOpen: return "'{%'";
    case TokenKind::kBlockClose: return "'%}'";
    case TokenKind::kName: return "name";
    case TokenKind::kString: return "string";
    case TokenKind::kInt: return "integer";
    case TokenKind::kFloat: return "float";
    case TokenKind::kOp: return "operator";
    case TokenKind::kEof: return "end of template";
  }
  return "?";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {
    // keep_trailing_newline=False: Jinja2 drops one trailing newline of the template.
    end_ = src_.size();
    if (end_ > 0 && src_[end_ - 1] == '\n') {
      --end_;
      if (end_ > 0 && src_[end_ - 1] == '\r') --end_;
    }
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run();

 private:
  Status error(size_t pos, const std::string& msg) const {
    auto [line, col] = line_col(pos);
    return invalid_argument("chat template line " + std::to_string(line) + " col " + std::to_string(col) +
                            ": " + msg);
  }
  std::pair<int, int> line_col(size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    size_t idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
    return {static_cast<int>(idx + 1), static_cast<int>(pos - line_starts_[idx] + 1)};
  }
  void emit(TokenKind kind, std::string text, size_t pos) {
    auto [line, col] = line_col(pos);
    out_.push_back(Token{kind, std::move(text), line, col});
  }
  size_t find_opener(size_t from) const {
    for (size_t i = from; i + 1 < end_; ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }
  void emit_text(size_t a, size_t b, char next_open, char next_marker);
  Status lex_tag(char open);
  Status lex_string(char quote);
  Status lex_raw();
  bool match_closer(char open);

  const std::string& src_;
  size_t end_ = 0;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  bool strip_leading_ws_ = false;    // previous tag ended with '-'
  bool trim_leading_newline_ = false;  // previous block/comment tag ended (trim_blocks)
};

// Text between tags, with the whitespace rules of the tags on either side applied.
void Lexer::emit_text(size_t a, size_t b, char next_open, char next_marker) {
  if (strip_leading_ws_) {
    while (a < b && is_space(src_[a])) ++a;
  } else if (trim_leading_newline_) {
    if (a < b && src_[a] == '\n') ++a;
    else if (a + 1 < b && src_[a] == '\r' && src_[a + 1] == '\n') a += 2;
  }
  if (next_marker == '-') {
    while (b > a && is_space(src_[b - 1])) --b;
  } else if ((next_open == '%' || next_open == '#') && next_marker != '+') {
    // lstrip_blocks: spaces and tabs from the start of the line up to a block or comment.
    size_t q = b;
    while (q > a && (src_[q - 1] == ' ' || src_[q - 1] == '\t')) --q;
    if (q == 0 || src_[q - 1] == '\n') b = q;
  }
  strip_leading_ws_ = false;
  trim_leading_newline_ = false;
  if (b > a) emit(TokenKind::kText, src_.substr(a, b - a), a);
}

Result<std::vector<Token>> Lexer::run() {
  while (pos_ < end_) {
    size_t p = find_opener(pos_);
    if (p == std::string::npos) {
      emit_text(pos_, end_, 0, 0);
      break;
    }
    char open = src_[p + 1];
    char marker = p + 2 < end_ ? src_[p + 2] : 0;
    if (marker != '-' && marker != '+') marker = 0;
    emit_text(pos_, p, open, marker);
    if (open == '#') {
      size_t close = src_.find("#}", p + 2);
      if (close == std::string::npos || close + 2 > end_ + 1) return error(p, "unterminated comment '{#'");
      strip_leading_ws_ = close > p + 2 && src_[close - 1] == '-';
      trim_leading_newline_ = !(close > p + 2 && src_[close - 1] == '+');
      pos_ = close + 2;
      continue;
    }
    emit(open == '{' ? TokenKind::kExprOpen : TokenKind::kBlockOpen, open == '{' ? "{{" : "{%", p);
    pos_ = p + 2 + (marker ? 1 : 0);
    FRUGAL_RETURN_IF_ERROR(lex_tag(open));
    size_t n = out_.size();
    if (open == '%' && n >= 3 && out_[n - 2].kind == TokenKind::kName && out_[n - 2].text == "raw" &&
        out_[n - 3].kind == TokenKind::kBlockOpen) {
      out_.resize(n - 3);
      FRUGAL_RETURN_IF_ERROR(lex_raw());
    }
  }
  emit(TokenKind::kEof, "", end_);
  return std::move(out_);
}

// Consumes a closer for a tag opened with `open` at pos_ and sets the next text's trimming.
bool Lexer::match_closer(char open) {
  char want = open == '{' ? '}' : '%';
  size_t p = pos_;
  char marker = 0;
  if (p < end_ && (src_[p] == '-' || (src_[p] == '+' && open == '%'))) marker = src_[p++];
  if (p + 1 < src_.size() && src_[p] == want && src_[p + 1] == '}') {
    emit(open == '{' ? TokenKind::kExprClose : TokenKind::kBlockClose, open == '{' ? "}}" : "%}", pos_);
    pos_ = p + 2;
    strip_leading_ws_ = marker == '-';
    trim_leading_newline_ = open == '%' && marker != '+';
    return true;
  }
  return false;
}

Status Lexer::lex_tag(char open) {
  int brace_depth = 0;
  static const char* kTwoCharOps[] = {"//", "**", "==", "!=", "<=", ">="};
  while (true) {
    while (pos_ < end_ && is_space(src_[pos_])) ++pos_;
    if (pos_ >= end_) return error(pos_, std::string("unterminated tag, expected '") + (open == '{' ? "}}" : "%}") + "'");
    if ((brace_depth == 0 || open == '%') && match_closer(open)) return Status::ok();
    char c = src_[pos_];
    size_t start = pos_;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < end_ && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
      emit(TokenKind::kName, src_.substr(start, pos_ - start), start);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      bool is_float = false;
      while (pos_ < end_ && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
      if (pos_ + 1 < end_ && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
        is_float = true;
        ++pos_;
        while (pos_ < end_ && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      }
      if (pos_ < end_ && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
        size_t q = pos_ + 1;
        if (q < end_ && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < end_ && std::isdigit(static_cast<unsigned char>(src_[q]))) {
          is_float = true;
          pos_ = q;
          while (pos_ < end_ && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
        }
      }
      std::string num = src_.substr(start, pos_ - start);
      num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
      emit(is_float ? TokenKind::kFloat : TokenKind::kInt, num, start);
    } else if (c == '\'' || c == '"') {
      FRUGAL_RETURN_IF_ERROR(lex_string(c));
    } else {
      std::string op(1, c);
      for (const char* two : kTwoCharOps) {
        if (src_.compare(pos_, 2, two) == 0) op = two;
      }
      if (op.size() == 1 && !std::strchr("+-*/%~<>=.,:|()[]{}!", c)) {
        return error(pos_, std::string("unexpected character '") + c + "' in tag");
      }
      if (op == "!") return error(pos_, "unexpected character '!' (Jinja uses 'not')");
      if (op == "{") ++brace_depth;
      if (op == "}") --brace_depth;
      pos_ += op.size();
      emit(TokenKind::kOp, op, start);
    }
  }
}

// Python string-literal escapes; unknown escapes keep their backslash, like Python.
Status Lexer::lex_string(char quote) {
  size_t start = pos_++;
  std::string value;
  while (true) {
    if (pos_ >= end_) return error(start, "unterminated string literal");
    char c = src_[pos_++];
    if (c == quote) break;
    if (c != '\\') {
      value += c;
      continue;
    }
    if (pos_ >= end_) return error(start, "unterminated string literal");
    char e = src_[pos_++];
    switch (e) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case 'b': value += '\b'; break;
      case 'f': value += '\f'; break;
      case 'v': value += '\v'; break;
      case 'a': value += '\a'; break;
      case '0': value += '\0'; break;
      case '\\': value += '\\'; break;
      case '\'': value += '\''; break;
      case '"': value += '"'; break;
      case '\n': break;  // line continuation
      case 'x':
      case 'u':
      case 'U': {
        size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (pos_ + len > end_) return error(pos_ - 2, std::string("truncated \\") + e + " escape");
        std::string hex = src_.substr(pos_, len);
        if (!std::all_of(hex.begin(), hex.end(), [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
          return error(pos_ - 2, std::string("invalid \\") + e + " escape '" + hex + "'");
        }
        utf8_append(value, static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
        pos_ += len;
        break;
      }
      default:
        value += '\\';
        value += e;
    }
  }
  emit(TokenKind::kString, std::move(value), start);
  return Status::ok();
}

// {% raw %}...{% endraw %}: everything up to the endraw tag is literal text.
Status Lexer::lex_raw() {
  size_t search = pos_;
  while (true) {
    size_t p = src_.find("{%", search);
    if (p == std::string::npos || p >= end_) return error(pos_, "'{% raw %}' without '{% endraw %}'");
    size_t q = p + 2;
    bool strip_before = q < end_ && src_[q] == '-';
    if (q < end_ && (src_[q] == '-' || src_[q] == '+')) ++q;
    while (q < end_ && is_space(src_[q])) ++q;
    if (src_.compare(q, 6, "endraw") != 0) {
      search = p + 2;
      continue;
    }
    q += 6;
    while (q < end_ && is_space(src_[q])) ++q;
    size_t text_end = p;
    if (strip_before) {
      while (text_end > pos_ && is_space(src_[text_end - 1])) --text_end;
    }
    emit_text(pos_, text_end, '%', strip_before ? '-' : 0);
    pos_ = q;
    if (!match_closer('%')) return error(q, "expected '%}' after 'endraw'");
    out_.pop_back();  // the endraw closer is not a real token
    return Status::ok();
  }
}

}  // namespace

Result<std::vector<Token>> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace frugal::jinja
