// Expression evaluation: names, attribute/item access, calls, Python operators.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tokenizer/jinja/evaluator.h"

namespace frugal::jinja {
namespace {

Status undefined_error(const Value& v) {
  const std::string& hint = v.undefined_hint();
  return invalid_argument(hint.empty() ? "value is undefined" : hint);
}

Status type_error(const std::string& op, const Value& a, const Value& b) {
  return invalid_argument("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
                          b.type_name() + "'");
}

Result<Value> checked_int(bool overflow, int64_t v) {
  if (overflow) return out_of_range("integer overflow in chat template arithmetic");
  return Value::integer(v);
}

Result<Value> repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  const uint64_t count = static_cast<uint64_t>(n);
  if (seq.is_string()) {
    // Division, not multiplication: a huge n must not wrap around past the check.
    if (count > 0 && seq.as_string().size() > value_size_limit() / count) {
      return resource_exhausted("string repetition result too large (over " + std::to_string(value_size_limit()) +
                                " bytes)");
    }
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value::string(std::move(out));
  }
  if (count > 0 && seq.items().size() > (uint64_t{1} << 24) / count) {
    return resource_exhausted("list repetition result too large");
  }
  Array out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::array(std::move(out));
}

Result<Value> arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (op == "~") return Value::string(a.to_str() + b.to_str());
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  int64_t r = 0;
  if (op == "+") {
    if (ints) {
      bool overflow = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
      return checked_int(overflow, r);
    }
    if (nums) return Value::floating(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
    if (a.is_array() && b.is_array()) {
      Array out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::array(std::move(out));
    }
    if (a.is_string()) return invalid_argument(std::string("can only concatenate str (not \"") + b.type_name() + "\") to str");
    return type_error(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      bool overflow = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
      return checked_int(overflow, r);
    }
    if (nums) return Value::floating(a.as_double() - b.as_double());
    return type_error(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      bool overflow = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
      return checked_int(overflow, r);
    }
    if (nums) return Value::floating(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_array()) && b.is_number() && !b.is_float()) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_array()) && a.is_number() && !a.is_float()) return repeat(b, a.as_int());
    return type_error(op, a, b);
  }
  if (op == "%" && a.is_string()) {  // printf-style formatting; a tuple supplies several values
    FRUGAL_ASSIGN_OR_RETURN(std::string s, py_percent_format(a.as_string(), b.is_tuple() ? b.items() : Array{b}));
    return Value::string(std::move(s));
  }
  if (!nums) return type_error(op, a, b);
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int();
      int64_t result = 1;
      for (int64_t e = b.as_int(); e > 0; --e) {
        if (__builtin_mul_overflow(result, base, &result)) return out_of_range("integer overflow in '**'");
        if (result == 0 || result == 1) break;
      }
      return Value::integer(result);
    }
    return Value::floating(std::pow(a.as_double(), b.as_double()));
  }
  if ((ints && b.as_int() == 0) || (!ints && b.as_double() == 0.0)) {
    return invalid_argument(op == "/" ? "division by zero" : "integer division or modulo by zero");
  }
  if (op == "/") return Value::floating(a.as_double() / b.as_double());
  if (op == "//") {
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return out_of_range("integer overflow in '//'");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;  // Python floors
      return Value::integer(q);
    }
    return Value::floating(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == -1) return Value::integer(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;  // result takes the divisor's sign
      return Value::integer(m);
    }
    double m = std::fmod(a.as_double(), b.as_double());
    if (m != 0 && ((m < 0) != (b.as_double() < 0))) m += b.as_double();
    return Value::floating(m);
  }
  return invalid_argument("unknown operator '" + op + "'");
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        return invalid_argument(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kArray:
      for (const Value& v : container.items()) {
        if (values_equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kObject:
      return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      return invalid_argument(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

}  // namespace

Value Evaluator::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (const Value* v = (*it)->find(name)) return *v;
  }
  Value g = lookup_global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined("'" + name + "' is undefined");
}

Result<Value> Evaluator::check_size(Value v) const {
  if (v.is_string() && v.as_string().size() > limits_.max_output_bytes) {
    return resource_exhausted("chat template built a string of " + std::to_string(v.as_string().size()) +
                              " bytes, over the " + std::to_string(limits_.max_output_bytes) + "-byte output limit");
  }
  if (v.is_array() && v.items().size() > static_cast<uint64_t>(std::max<int64_t>(limits_.max_loop_iterations, 0))) {
    return resource_exhausted("chat template built a list of " + std::to_string(v.items().size()) +
                              " items, over the " + std::to_string(limits_.max_loop_iterations) + "-iteration limit");
  }
  return v;
}

Result<Value> Evaluator::eval(const Expr& e) {
  Result<Value> r = eval_inner(e);
  if (r.is_ok()) r = check_size(std::move(r).value());
  if (!r.is_ok()) return located(e, r.status());
  return r;
}

Result<CallArgs> Evaluator::eval_args(const Expr& e, size_t first_child) {
  CallArgs args;
  for (size_t i = first_child; i < e.children.size(); ++i) {
    FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*e.children[i]));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.kwargs) {
    FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*expr));
    args.keyword.emplace_back(name, std::move(v));
  }
  return args;
}

Result<Value> Evaluator::eval_inner(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      Array items;
      for (const auto& c : e.children) {
        FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*c));
        items.push_back(std::move(v));
      }
      if (e.kind == Expr::Kind::kTuple) return Value::tuple(std::move(items));
      return Value::array(std::move(items));
    }
    case Expr::Kind::kDict: {
      Object obj;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        FRUGAL_ASSIGN_OR_RETURN(Value k, eval(*e.children[i]));
        FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*e.children[i + 1]));
        if (!k.is_string()) return unsupported(std::string("dict keys must be strings, got ") + k.type_name());
        obj.set(k.as_string(), std::move(v));
      }
      return Value::object(std::move(obj));
    }
    case Expr::Kind::kGetAttr: {
      FRUGAL_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0]));
      return get_attribute(obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      FRUGAL_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0]));
      FRUGAL_ASSIGN_OR_RETURN(Value idx, eval(*e.children[1]));
      return get_item(obj, idx);
    }
    case Expr::Kind::kSlice: {
      FRUGAL_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0]));
      Value parts[3] = {Value::none(), Value::none(), Value::none()};
      for (int i = 0; i < 3; ++i) {
        if (e.children[static_cast<size_t>(i) + 1]) {
          FRUGAL_ASSIGN_OR_RETURN(parts[i], eval(*e.children[static_cast<size_t>(i) + 1]));
        }
      }
      return slice_value(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall:
      return eval_call(e);
    case Expr::Kind::kFilter:
    case Expr::Kind::kTest:
      return eval_filter_or_test(e);
    case Expr::Kind::kUnary: {
      FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
      if (v.is_undefined()) return undefined_error(v);
      if (!v.is_number()) return invalid_argument(std::string("bad operand type for unary ") + e.name + ": '" + v.type_name() + "'");
      if (e.name == "+") return v.is_float() ? v : Value::integer(v.as_int());
      if (v.is_float()) return Value::floating(-v.as_double());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) return out_of_range("integer overflow in unary '-'");
      return Value::integer(-v.as_int());
    }
    case Expr::Kind::kNot: {
      FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*e.children[0]));
      return Value::boolean(!v.truthy());
    }
    case Expr::Kind::kAnd:
    case Expr::Kind::kOr: {
      FRUGAL_ASSIGN_OR_RETURN(Value a, eval(*e.children[0]));
      // Python returns an operand, not a bool: `a or b` is a when a is truthy.
      if ((e.kind == Expr::Kind::kAnd) != a.truthy()) return a;
      return eval(*e.children[1]);
    }
    case Expr::Kind::kBinary:
      return eval_binary(e);
    case Expr::Kind::kCompare:
      return eval_compare(e);
    case Expr::Kind::kTernary: {
      FRUGAL_ASSIGN_OR_RETURN(Value cond, eval(*e.children[1]));
      if (cond.truthy()) return eval(*e.children[0]);
      if (!e.children[2]) return Value::undefined("the inline if-expression evaluated to false and had no else");
      return eval(*e.children[2]);
    }
  }
  return internal_error("unknown expression kind");
}

Result<Value> Evaluator::eval_call(const Expr& e) {
  FRUGAL_ASSIGN_OR_RETURN(Value callee, eval(*e.children[0]));
  FRUGAL_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1));
  return call(callee, args);
}

Result<Value> Evaluator::eval_binary(const Expr& e) {
  FRUGAL_ASSIGN_OR_RETURN(Value a, eval(*e.children[0]));
  FRUGAL_ASSIGN_OR_RETURN(Value b, eval(*e.children[1]));
  return arithmetic(e.name, a, b);
}

Result<Value> Evaluator::eval_compare(const Expr& e) {
  FRUGAL_ASSIGN_OR_RETURN(Value left, eval(*e.children[0]));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    FRUGAL_ASSIGN_OR_RETURN(Value right, eval(*e.children[i + 1]));
    const std::string& op = e.ops[i];
    bool ok = false;
    if (op == "==") {
      ok = values_equal(left, right);
    } else if (op == "!=") {
      ok = !values_equal(left, right);
    } else if (op == "in" || op == "not in") {
      FRUGAL_ASSIGN_OR_RETURN(bool in, contains(right, left));
      ok = (op == "in") == in;
    } else {
      if (left.is_undefined()) return undefined_error(left);
      if (right.is_undefined()) return undefined_error(right);
      if (op == "<") {
        FRUGAL_ASSIGN_OR_RETURN(ok, values_less(left, right));
      } else if (op == ">") {
        FRUGAL_ASSIGN_OR_RETURN(ok, values_less(right, left));
      } else if (op == "<=") {
        FRUGAL_ASSIGN_OR_RETURN(bool gt, values_less(right, left));
        ok = !gt;
      } else {
        FRUGAL_ASSIGN_OR_RETURN(bool lt, values_less(left, right));
        ok = !lt;
      }
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Result<Value> Evaluator::eval_filter_or_test(const Expr& e) {
  FRUGAL_ASSIGN_OR_RETURN(Value operand, eval(*e.children[0]));
  FRUGAL_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1));
  if (e.kind == Expr::Kind::kFilter) {
    if (!has_filter(e.name)) return unsupported("unknown filter '" + e.name + "'");
    return apply_filter(*this, e.name, operand, args);
  }
  if (!has_test(e.name)) return unsupported("unknown test '" + e.name + "'");
  FRUGAL_ASSIGN_OR_RETURN(bool r, apply_test(*this, e.name, operand, args));
  return Value::boolean(r != e.negated);
}

}  // namespace frugal::jinja
