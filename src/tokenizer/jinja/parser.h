// Parser: tokens -> AST, following Jinja2's grammar and operator precedence
// (or < and < not < comparisons < + - < ~ < * / // % < ** < unary < filters/tests < postfix).
#pragma once

#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace frugal::jinja {

// Parses a whole template. Unsupported tags (extends, include, import, block, ...) are errors
// naming the tag and its line and column.
Result<Body> parse(const std::vector<Token>& tokens);

}  // namespace frugal::jinja
