// AST of a parsed template. Two flat node types keep the evaluator's switches short; the field
// comments say which kinds use which fields.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace frugal::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
using Kwargs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children = items
    kTuple,    // children = items
    kDict,     // children = key0, value0, key1, value1, ...
    kGetAttr,  // children[0] = object, name = attribute
    kGetItem,  // children[0] = object, children[1] = index
    kSlice,    // children[0] = object, children[1..3] = start, stop, step (null when omitted)
    kCall,     // children[0] = callee, children[1..] = positional args, kwargs
    kFilter,   // children[0] = operand (null in {% filter %} blocks), children[1..] = args, name, kwargs
    kTest,     // children[0] = operand, children[1..] = args, name, negated
    kUnary,    // name = "-" or "+", children[0]
    kNot,      // children[0]
    kBinary,   // name = operator (+ - * / // % ** ~), children[0..1]
    kAnd,      // children[0..1], short-circuit
    kOr,       // children[0..1], short-circuit
    kCompare,  // children[0..n], ops[i] between children[i] and children[i+1]
    kTernary,  // children = then, condition, else (null: undefined)
  };
  Kind kind;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  Kwargs kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // expr
    kIf,           // branches (condition, body); else_body
    kFor,          // target (name or tuple), expr = iterable, filter = inline `if`, body, else_body
    kSet,          // target (name, tuple of names, or obj.attr), expr
    kSetBlock,     // target (name), body, filter (kFilter chain with null operand, or null)
    kMacro,        // name, params, body
    kCallBlock,    // expr = the macro call, params = caller's parameters, body = caller body
    kFilterBlock,  // filter, body
    kBreak,
    kContinue,
    kDo,           // expr, evaluated for its side effects
  };
  Kind kind;
  int line = 0;
  int col = 0;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  Kwargs params;  // (name, default or null)
};

}  // namespace frugal::jinja
