// Lexer: template source -> tokens. Whitespace control follows Jinja2 as transformers configures
// it (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False) plus `-` / `+` markers.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace frugal::jinja {

enum class TokenKind {
  kText,        // literal template text (already whitespace-trimmed)
  kExprOpen,    // {{
  kExprClose,   // }}
  kBlockOpen,   // {%
  kBlockClose,  // %}
  kName,        // identifiers and keywords
  kString,      // string literal, value unescaped
  kInt,
  kFloat,
  kOp,          // operators and punctuation: + - * / // % ** ~ == != < > <= >= = . , : | ( ) [ ] { }
  kEof,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line = 1;
  int col = 1;
};

const char* token_kind_name(TokenKind kind);

// Tokenizes a whole template; errors name the line and column.
Result<std::vector<Token>> tokenize(const std::string& source);

}  // namespace frugal::jinja
