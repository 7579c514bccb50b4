#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace frugal::jinja {
namespace {

// Deeper nesting than this is a hostile or broken template; recursion must not blow the stack.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  Result<Body> parse_template() {
    std::string ender;
    FRUGAL_ASSIGN_OR_RETURN(Body body, parse_until({}, &ender));
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return toks_[idx_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(idx_ + n, toks_.size() - 1)]; }
  void advance() {
    if (idx_ + 1 < toks_.size()) ++idx_;
  }
  bool is_op(const char* op) const { return cur().kind == TokenKind::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == TokenKind::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  Status error_at(const Token& t, const std::string& msg) const {
    return invalid_argument("chat template line " + std::to_string(t.line) + " col " + std::to_string(t.col) +
                            ": " + msg);
  }
  std::string describe(const Token& t) const {
    if (t.kind == TokenKind::kEof) return "end of template";
    if (t.kind == TokenKind::kText) return "template text";
    return std::string(token_kind_name(t.kind)) + " '" + t.text + "'";
  }
  Status expect_op(const char* op) {
    if (skip_op(op)) return Status::ok();
    return error_at(cur(), std::string("expected '") + op + "', got " + describe(cur()));
  }
  Status expect_kind(TokenKind kind) {
    if (cur().kind == kind) {
      advance();
      return Status::ok();
    }
    return error_at(cur(), std::string("expected ") + token_kind_name(kind) + ", got " + describe(cur()));
  }
  Result<std::string> expect_identifier() {
    if (cur().kind != TokenKind::kName) return error_at(cur(), "expected a name, got " + describe(cur()));
    std::string name = cur().text;
    advance();
    return name;
  }
  ExprPtr make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  StmtPtr make_stmt(Stmt::Kind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  struct DepthGuard {
    explicit DepthGuard(int& d) : d_(d) { ++d_; }
    ~DepthGuard() { --d_; }
    int& d_;
  };
  Status check_depth() const {
    if (depth_ > kMaxNesting) return error_at(cur(), "template nested deeper than " + std::to_string(kMaxNesting) + " levels");
    return Status::ok();
  }

  // ---- statements ----
  Result<Body> parse_until(std::initializer_list<const char*> enders, std::string* which);
  Status parse_block(Body& out);
  Result<StmtPtr> parse_if(const Token& at);
  Result<StmtPtr> parse_for(const Token& at);
  Result<StmtPtr> parse_set(const Token& at);
  Result<StmtPtr> parse_macro(const Token& at);
  Result<StmtPtr> parse_call_block(const Token& at);
  Result<StmtPtr> parse_filter_block(const Token& at);
  Result<ExprPtr> parse_assign_target(bool allow_attr);
  Status parse_params(Kwargs& params);
  Status expect_end_tag(const char* name) {
    if (!skip_name(name)) return error_at(cur(), std::string("expected '") + name + "'");
    return expect_kind(TokenKind::kBlockClose);
  }

  // ---- expressions ----
  Result<ExprPtr> parse_expression(bool with_condexpr = true);
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> parse_binary_level(int level);
  Result<ExprPtr> parse_unary(bool with_filter);
  Result<ExprPtr> parse_primary();
  Result<ExprPtr> parse_postfix(ExprPtr node);
  Result<ExprPtr> parse_filter_expr(ExprPtr node);
  Result<ExprPtr> parse_filter(ExprPtr operand);
  Result<ExprPtr> parse_test(ExprPtr operand);
  Result<ExprPtr> parse_subscript(ExprPtr node, const Token& at);
  Status parse_call_args(Expr& call);
  Result<ExprPtr> parse_paren_or_tuple(const Token& at);

  const std::vector<Token>& toks_;
  size_t idx_ = 0;
  int depth_ = 0;
};

Result<Body> Parser::parse_until(std::initializer_list<const char*> enders, std::string* which) {
  Body body;
  DepthGuard guard(depth_);
  FRUGAL_RETURN_IF_ERROR(check_depth());
  while (true) {
    const Token& t = cur();
    switch (t.kind) {
      case TokenKind::kEof: {
        if (enders.size() == 0) return body;
        std::string names;
        for (const char* e : enders) names += std::string(names.empty() ? "" : " or ") + "'" + e + "'";
        return error_at(t, "unexpected end of template, expected " + names);
      }
      case TokenKind::kText: {
        auto s = make_stmt(Stmt::Kind::kText, t);
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
        break;
      }
      case TokenKind::kExprOpen: {
        auto s = make_stmt(Stmt::Kind::kOutput, t);
        advance();
        FRUGAL_ASSIGN_OR_RETURN(s->expr, parse_expression());
        FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kExprClose));
        body.push_back(std::move(s));
        break;
      }
      case TokenKind::kBlockOpen: {
        const Token& kw = peek();
        for (const char* e : enders) {
          if (kw.kind == TokenKind::kName && kw.text == e) {
            advance();  // leave the ender name current for the caller
            *which = e;
            return body;
          }
        }
        advance();
        FRUGAL_RETURN_IF_ERROR(parse_block(body));
        break;
      }
      default:
        return error_at(t, "unexpected " + describe(t));
    }
  }
}

Status Parser::parse_block(Body& out) {
  const Token at = cur();
  if (at.kind != TokenKind::kName) return error_at(at, "expected a tag name after '{%', got " + describe(at));
  const std::string& kw = at.text;
  Result<StmtPtr> stmt = unsupported("unreachable");
  if (kw == "if") {
    advance();
    stmt = parse_if(at);
  } else if (kw == "for") {
    advance();
    stmt = parse_for(at);
  } else if (kw == "set") {
    advance();
    stmt = parse_set(at);
  } else if (kw == "macro") {
    advance();
    stmt = parse_macro(at);
  } else if (kw == "call") {
    advance();
    stmt = parse_call_block(at);
  } else if (kw == "filter") {
    advance();
    stmt = parse_filter_block(at);
  } else if (kw == "break" || kw == "continue") {
    advance();
    FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
    stmt = make_stmt(kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, at);
  } else if (kw == "do") {
    advance();
    auto s = make_stmt(Stmt::Kind::kDo, at);
    FRUGAL_ASSIGN_OR_RETURN(s->expr, parse_expression());
    FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
    stmt = std::move(s);
  } else if (kw == "generation") {
    // transformers' assistant-mask marker: renders its body unchanged.
    advance();
    FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
    std::string which;
    FRUGAL_ASSIGN_OR_RETURN(Body inner, parse_until({"endgeneration"}, &which));
    FRUGAL_RETURN_IF_ERROR(expect_end_tag("endgeneration"));
    for (auto& s : inner) out.push_back(std::move(s));
    return Status::ok();
  } else {
    return error_at(at, "unsupported tag '{% " + kw + " %}'");
  }
  if (!stmt.is_ok()) return stmt.status();
  out.push_back(std::move(stmt).value());
  return Status::ok();
}

Result<StmtPtr> Parser::parse_if(const Token& at) {
  auto s = make_stmt(Stmt::Kind::kIf, at);
  FRUGAL_ASSIGN_OR_RETURN(ExprPtr cond, parse_expression());
  FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
  while (true) {
    std::string which;
    FRUGAL_ASSIGN_OR_RETURN(Body body, parse_until({"elif", "else", "endif"}, &which));
    s->branches.emplace_back(std::move(cond), std::move(body));
    advance();  // the ender name
    if (which == "elif") {
      FRUGAL_ASSIGN_OR_RETURN(cond, parse_expression());
      FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
      continue;
    }
    FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
    if (which == "else") {
      FRUGAL_ASSIGN_OR_RETURN(s->else_body, parse_until({"endif"}, &which));
      FRUGAL_RETURN_IF_ERROR(expect_end_tag("endif"));
    }
    return s;
  }
}

Result<StmtPtr> Parser::parse_for(const Token& at) {
  auto s = make_stmt(Stmt::Kind::kFor, at);
  FRUGAL_ASSIGN_OR_RETURN(s->target, parse_assign_target(false));
  if (!skip_name("in")) return error_at(cur(), "expected 'in' in for loop, got " + describe(cur()));
  FRUGAL_ASSIGN_OR_RETURN(s->expr, parse_expression(false));
  if (skip_name("if")) {
    FRUGAL_ASSIGN_OR_RETURN(s->filter, parse_expression());
  }
  if (is_name("recursive")) return error_at(cur(), "unsupported: recursive for loops");
  FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
  std::string which;
  FRUGAL_ASSIGN_OR_RETURN(s->body, parse_until({"else", "endfor"}, &which));
  if (which == "else") {
    advance();
    FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
    FRUGAL_ASSIGN_OR_RETURN(s->else_body, parse_until({"endfor"}, &which));
  }
  FRUGAL_RETURN_IF_ERROR(expect_end_tag("endfor"));
  return s;
}

// `name`, `a, b`, `(a, b)` and, for set, `ns.attr`.
Result<ExprPtr> Parser::parse_assign_target(bool allow_attr) {
  const Token at = cur();
  bool paren = skip_op("(");
  std::vector<ExprPtr> names;
  while (true) {
    const Token t = cur();
    FRUGAL_ASSIGN_OR_RETURN(std::string name, expect_identifier());
    ExprPtr e = make(Expr::Kind::kName, t);
    e->name = name;
    if (allow_attr && is_op(".")) {
      advance();
      ExprPtr attr = make(Expr::Kind::kGetAttr, t);
      FRUGAL_ASSIGN_OR_RETURN(attr->name, expect_identifier());
      attr->children.push_back(std::move(e));
      e = std::move(attr);
    }
    names.push_back(std::move(e));
    if (!skip_op(",")) break;
    if (cur().kind != TokenKind::kName) break;  // trailing comma
  }
  if (paren) FRUGAL_RETURN_IF_ERROR(expect_op(")"));
  if (names.size() == 1 && !paren) return std::move(names[0]);
  ExprPtr tuple = make(Expr::Kind::kTuple, at);
  tuple->children = std::move(names);
  return tuple;
}

Result<StmtPtr> Parser::parse_set(const Token& at) {
  FRUGAL_ASSIGN_OR_RETURN(ExprPtr target, parse_assign_target(true));
  if (skip_op("=")) {
    auto s = make_stmt(Stmt::Kind::kSet, at);
    s->target = std::move(target);
    const Token vt = cur();
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    if (is_op(",")) {  // implicit tuple: {% set a, b = 1, 2 %}
      ExprPtr tuple = make(Expr::Kind::kTuple, vt);
      tuple->children.push_back(std::move(value));
      while (skip_op(",")) {
        if (cur().kind == TokenKind::kBlockClose) break;
        FRUGAL_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
        tuple->children.push_back(std::move(item));
      }
      value = std::move(tuple);
    }
    s->expr = std::move(value);
    FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
    return s;
  }
  if (target->kind != Expr::Kind::kName) return error_at(at, "block set needs a single variable name");
  auto s = make_stmt(Stmt::Kind::kSetBlock, at);
  s->target = std::move(target);
  while (skip_op("|")) {
    FRUGAL_ASSIGN_OR_RETURN(s->filter, parse_filter(std::move(s->filter)));
  }
  FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
  std::string which;
  FRUGAL_ASSIGN_OR_RETURN(s->body, parse_until({"endset"}, &which));
  FRUGAL_RETURN_IF_ERROR(expect_end_tag("endset"));
  return s;
}

Status Parser::parse_params(Kwargs& params) {
  FRUGAL_RETURN_IF_ERROR(expect_op("("));
  while (!is_op(")")) {
    if (!params.empty()) FRUGAL_RETURN_IF_ERROR(expect_op(","));
    if (is_op(")")) break;
    FRUGAL_ASSIGN_OR_RETURN(std::string name, expect_identifier());
    ExprPtr def;
    if (skip_op("=")) {
      FRUGAL_ASSIGN_OR_RETURN(def, parse_expression());
    }
    params.emplace_back(name, std::move(def));
  }
  return expect_op(")");
}

Result<StmtPtr> Parser::parse_macro(const Token& at) {
  auto s = make_stmt(Stmt::Kind::kMacro, at);
  FRUGAL_ASSIGN_OR_RETURN(s->name, expect_identifier());
  FRUGAL_RETURN_IF_ERROR(parse_params(s->params));
  FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
  std::string which;
  FRUGAL_ASSIGN_OR_RETURN(s->body, parse_until({"endmacro"}, &which));
  FRUGAL_RETURN_IF_ERROR(expect_end_tag("endmacro"));
  return s;
}

Result<StmtPtr> Parser::parse_call_block(const Token& at) {
  auto s = make_stmt(Stmt::Kind::kCallBlock, at);
  if (is_op("(")) FRUGAL_RETURN_IF_ERROR(parse_params(s->params));
  FRUGAL_ASSIGN_OR_RETURN(s->expr, parse_expression());
  if (s->expr->kind != Expr::Kind::kCall) return error_at(at, "'{% call %}' needs a macro call");
  FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
  std::string which;
  FRUGAL_ASSIGN_OR_RETURN(s->body, parse_until({"endcall"}, &which));
  FRUGAL_RETURN_IF_ERROR(expect_end_tag("endcall"));
  return s;
}

Result<StmtPtr> Parser::parse_filter_block(const Token& at) {
  auto s = make_stmt(Stmt::Kind::kFilterBlock, at);
  do {
    FRUGAL_ASSIGN_OR_RETURN(s->filter, parse_filter(std::move(s->filter)));
  } while (skip_op("|"));
  FRUGAL_RETURN_IF_ERROR(expect_kind(TokenKind::kBlockClose));
  std::string which;
  FRUGAL_ASSIGN_OR_RETURN(s->body, parse_until({"endfilter"}, &which));
  FRUGAL_RETURN_IF_ERROR(expect_end_tag("endfilter"));
  return s;
}

// ---- expressions ----

Result<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(depth_);
  FRUGAL_RETURN_IF_ERROR(check_depth());
  FRUGAL_ASSIGN_OR_RETURN(ExprPtr node, parse_or());
  if (!with_condexpr) return node;
  while (is_name("if")) {
    const Token at = cur();
    advance();
    ExprPtr tern = make(Expr::Kind::kTernary, at);
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr cond, parse_or());
    ExprPtr else_expr;
    if (skip_name("else")) {
      FRUGAL_ASSIGN_OR_RETURN(else_expr, parse_expression());
    }
    tern->children.push_back(std::move(node));
    tern->children.push_back(std::move(cond));
    tern->children.push_back(std::move(else_expr));
    node = std::move(tern);
  }
  return node;
}

Result<ExprPtr> Parser::parse_or() {
  FRUGAL_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (is_name("or")) {
    ExprPtr node = make(Expr::Kind::kOr, cur());
    advance();
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Result<ExprPtr> Parser::parse_and() {
  FRUGAL_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (is_name("and")) {
    ExprPtr node = make(Expr::Kind::kAnd, cur());
    advance();
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Result<ExprPtr> Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(depth_);
    FRUGAL_RETURN_IF_ERROR(check_depth());
    ExprPtr node = make(Expr::Kind::kNot, cur());
    advance();
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
    node->children.push_back(std::move(operand));
    return node;
  }
  return parse_compare();
}

Result<ExprPtr> Parser::parse_compare() {
  const Token at = cur();
  FRUGAL_ASSIGN_OR_RETURN(ExprPtr first, parse_binary_level(0));
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().kind == TokenKind::kOp &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
         cur().text == "<=" || cur().text == ">=")) {
      op = cur().text;
      advance();
    } else if (is_name("in")) {
      op = "in";
      advance();
    } else if (is_name("not") && peek().kind == TokenKind::kName && peek().text == "in") {
      op = "not in";
      advance();
      advance();
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(Expr::Kind::kCompare, at);
      cmp->children.push_back(std::move(first));
    }
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr rhs, parse_binary_level(0));
    cmp->children.push_back(std::move(rhs));
    cmp->ops.push_back(op);
  }
  return cmp ? std::move(cmp) : std::move(first);
}

// Levels: 0 = + -, 1 = ~, 2 = * / // %, 3 = ** (left-associative, as in Jinja2).
Result<ExprPtr> Parser::parse_binary_level(int level) {
  static const std::vector<std::vector<std::string>> kLevels = {
      {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  auto next = [&]() -> Result<ExprPtr> {
    if (level + 1 < static_cast<int>(kLevels.size())) return parse_binary_level(level + 1);
    return parse_unary(true);
  };
  FRUGAL_ASSIGN_OR_RETURN(ExprPtr left, next());
  while (cur().kind == TokenKind::kOp) {
    const auto& ops = kLevels[static_cast<size_t>(level)];
    if (std::find(ops.begin(), ops.end(), cur().text) == ops.end()) break;
    ExprPtr node = make(Expr::Kind::kBinary, cur());
    node->name = cur().text;
    advance();
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr right, next());
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  DepthGuard guard(depth_);
  FRUGAL_RETURN_IF_ERROR(check_depth());
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    node = make(Expr::Kind::kUnary, cur());
    node->name = cur().text;
    advance();
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    node->children.push_back(std::move(operand));
  } else {
    FRUGAL_ASSIGN_OR_RETURN(node, parse_primary());
  }
  FRUGAL_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) return parse_filter_expr(std::move(node));
  return node;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token t = cur();
  switch (t.kind) {
    case TokenKind::kName: {
      advance();
      ExprPtr e = make(Expr::Kind::kLiteral, t);
      if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->literal = Value::none();
      else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      return e;
    }
    case TokenKind::kString: {
      std::string s;
      while (cur().kind == TokenKind::kString) {  // adjacent literals concatenate
        s += cur().text;
        advance();
      }
      ExprPtr e = make(Expr::Kind::kLiteral, t);
      e->literal = Value::string(std::move(s));
      return e;
    }
    case TokenKind::kInt: {
      advance();
      ExprPtr e = make(Expr::Kind::kLiteral, t);
      int64_t v = 0;
      auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (res.ec != std::errc()) return error_at(t, "integer literal out of range: " + t.text);
      e->literal = Value::integer(v);
      return e;
    }
    case TokenKind::kFloat: {
      advance();
      ExprPtr e = make(Expr::Kind::kLiteral, t);
      e->literal = Value::floating(std::strtod(t.text.c_str(), nullptr));
      return e;
    }
    case TokenKind::kOp:
      if (t.text == "(") {
        advance();
        return parse_paren_or_tuple(t);
      }
      if (t.text == "[" || t.text == "{") {
        advance();
        bool is_list = t.text == "[";
        ExprPtr e = make(is_list ? Expr::Kind::kList : Expr::Kind::kDict, t);
        const char* close = is_list ? "]" : "}";
        while (!is_op(close)) {
          if (!e->children.empty()) FRUGAL_RETURN_IF_ERROR(expect_op(","));
          if (is_op(close)) break;  // trailing comma
          FRUGAL_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
          e->children.push_back(std::move(item));
          if (!is_list) {
            FRUGAL_RETURN_IF_ERROR(expect_op(":"));
            FRUGAL_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
            e->children.push_back(std::move(value));
          }
        }
        FRUGAL_RETURN_IF_ERROR(expect_op(close));
        return e;
      }
      break;
    default:
      break;
  }
  return error_at(t, "unexpected " + describe(t) + " in expression");
}

Result<ExprPtr> Parser::parse_paren_or_tuple(const Token& at) {
  ExprPtr tuple = make(Expr::Kind::kTuple, at);
  bool saw_comma = false;
  while (!is_op(")")) {
    if (!tuple->children.empty()) {
      FRUGAL_RETURN_IF_ERROR(expect_op(","));
      saw_comma = true;
      if (is_op(")")) break;
    }
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
    tuple->children.push_back(std::move(item));
  }
  FRUGAL_RETURN_IF_ERROR(expect_op(")"));
  if (tuple->children.size() == 1 && !saw_comma) return std::move(tuple->children[0]);
  return tuple;
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (cur().kind == TokenKind::kOp) {
    const Token t = cur();
    if (t.text == ".") {
      advance();
      if (cur().kind == TokenKind::kInt) {  // foo.0 is foo[0]
        ExprPtr e = make(Expr::Kind::kGetItem, t);
        ExprPtr idx = make(Expr::Kind::kLiteral, cur());
        idx->literal = Value::integer(std::strtoll(cur().text.c_str(), nullptr, 10));
        advance();
        e->children.push_back(std::move(node));
        e->children.push_back(std::move(idx));
        node = std::move(e);
        continue;
      }
      ExprPtr e = make(Expr::Kind::kGetAttr, t);
      FRUGAL_ASSIGN_OR_RETURN(e->name, expect_identifier());
      e->children.push_back(std::move(node));
      node = std::move(e);
    } else if (t.text == "[") {
      advance();
      FRUGAL_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node), t));
    } else if (t.text == "(") {
      advance();
      ExprPtr call = make(Expr::Kind::kCall, t);
      call->children.push_back(std::move(node));
      FRUGAL_RETURN_IF_ERROR(parse_call_args(*call));
      node = std::move(call);
    } else {
      break;
    }
  }
  return node;
}

Result<ExprPtr> Parser::parse_subscript(ExprPtr node, const Token& at) {
  ExprPtr parts[3];
  int n_colons = 0;
  while (!is_op("]")) {
    if (skip_op(":")) {
      if (++n_colons > 2) return error_at(cur(), "too many ':' in slice");
      continue;
    }
    if (parts[n_colons]) return error_at(cur(), "expected ':' or ']' in subscript, got " + describe(cur()));
    FRUGAL_ASSIGN_OR_RETURN(parts[n_colons], parse_expression());
  }
  FRUGAL_RETURN_IF_ERROR(expect_op("]"));
  if (n_colons == 0) {
    if (!parts[0]) return error_at(at, "empty subscript '[]'");
    ExprPtr e = make(Expr::Kind::kGetItem, at);
    e->children.push_back(std::move(node));
    e->children.push_back(std::move(parts[0]));
    return e;
  }
  ExprPtr e = make(Expr::Kind::kSlice, at);
  e->children.push_back(std::move(node));
  for (auto& p : parts) e->children.push_back(std::move(p));
  return e;
}

Status Parser::parse_call_args(Expr& call) {
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      FRUGAL_RETURN_IF_ERROR(expect_op(","));
      if (is_op(")")) break;
    }
    first = false;
    if (is_op("*") || is_op("**")) return error_at(cur(), "unsupported: '*args' / '**kwargs' in calls");
    if (cur().kind == TokenKind::kName && peek().kind == TokenKind::kOp && peek().text == "=") {
      std::string name = cur().text;
      advance();
      advance();
      FRUGAL_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      call.kwargs.emplace_back(std::move(name), std::move(value));
      continue;
    }
    if (!call.kwargs.empty()) return error_at(cur(), "positional argument follows keyword argument");
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr arg, parse_expression());
    call.children.push_back(std::move(arg));
  }
  return expect_op(")");
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (skip_op("|")) {
      FRUGAL_ASSIGN_OR_RETURN(node, parse_filter(std::move(node)));
    } else if (is_name("is")) {
      advance();
      FRUGAL_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (is_op("(")) {
      const Token t = cur();
      advance();
      ExprPtr call = make(Expr::Kind::kCall, t);
      call->children.push_back(std::move(node));
      FRUGAL_RETURN_IF_ERROR(parse_call_args(*call));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

// `| name` or `| name(args)`; `operand` may be null for {% filter %} and block set.
Result<ExprPtr> Parser::parse_filter(ExprPtr operand) {
  const Token t = cur();
  ExprPtr f = make(Expr::Kind::kFilter, t);
  FRUGAL_ASSIGN_OR_RETURN(f->name, expect_identifier());
  f->children.push_back(std::move(operand));
  if (is_op("(")) {
    advance();
    FRUGAL_RETURN_IF_ERROR(parse_call_args(*f));
  }
  return f;
}

Result<ExprPtr> Parser::parse_test(ExprPtr operand) {
  const Token t = cur();
  ExprPtr test = make(Expr::Kind::kTest, t);
  test->negated = skip_name("not");
  FRUGAL_ASSIGN_OR_RETURN(test->name, expect_identifier());
  test->children.push_back(std::move(operand));
  if (is_op("(")) {
    advance();
    FRUGAL_RETURN_IF_ERROR(parse_call_args(*test));
    return test;
  }
  // Jinja2 allows one argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
  const Token& c = cur();
  bool starts_arg = c.kind == TokenKind::kName || c.kind == TokenKind::kString || c.kind == TokenKind::kInt ||
                    c.kind == TokenKind::kFloat || (c.kind == TokenKind::kOp && (c.text == "[" || c.text == "{"));
  if (starts_arg && c.kind == TokenKind::kName &&
      (c.text == "else" || c.text == "or" || c.text == "and" || c.text == "if" || c.text == "is" ||
       c.text == "in" || c.text == "not")) {
    starts_arg = false;
  }
  if (starts_arg) {
    FRUGAL_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
    FRUGAL_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
    test->children.push_back(std::move(arg));
  }
  return test;
}

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace frugal::jinja
