// Jinja2 tests (`x is defined`, `x is equalto 3`, ...), with Python's type model: bool counts as
// a number, strings are iterable sequences.
#include <unordered_map>

#include "tokenizer/jinja/evaluator.h"

namespace frugal::jinja {
namespace {

using TestFn = Result<bool> (*)(const Value&, const CallArgs&);

Result<const Value*> other(const CallArgs& a, const char* test) {
  const Value* v = a.get("other", 0);
  if (!v) return invalid_argument(std::string("test '") + test + "' needs an argument");
  return v;
}

Result<bool> compare(const Value& x, const CallArgs& a, const char* op) {
  FRUGAL_ASSIGN_OR_RETURN(const Value* y, other(a, op));
  std::string o = op;
  if (o == "==") return values_equal(x, *y);
  if (o == "!=") return !values_equal(x, *y);
  if (o == "<") return values_less(x, *y);
  if (o == ">") return values_less(*y, x);
  FRUGAL_ASSIGN_OR_RETURN(bool strictly, o == "<=" ? values_less(*y, x) : values_less(x, *y));
  return !strictly;
}

Result<bool> t_eq(const Value& x, const CallArgs& a) { return compare(x, a, "=="); }
Result<bool> t_ne(const Value& x, const CallArgs& a) { return compare(x, a, "!="); }
Result<bool> t_lt(const Value& x, const CallArgs& a) { return compare(x, a, "<"); }
Result<bool> t_gt(const Value& x, const CallArgs& a) { return compare(x, a, ">"); }
Result<bool> t_le(const Value& x, const CallArgs& a) { return compare(x, a, "<="); }
Result<bool> t_ge(const Value& x, const CallArgs& a) { return compare(x, a, ">="); }

Result<bool> int_test(const Value& x, bool want_odd) {
  if (!x.is_number() || x.is_float()) return invalid_argument(std::string("odd/even test needs an integer, got ") + x.type_name());
  bool odd = (x.as_int() % 2) != 0;
  return odd == want_odd;
}

Result<bool> t_in(const Value& x, const CallArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(const Value* seq, other(a, "in"));
  if (seq->is_string()) return x.is_string() && seq->as_string().find(x.as_string()) != std::string::npos;
  if (seq->is_object()) return x.is_string() && seq->as_object().find(x.as_string()) != nullptr;
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(*seq));
  for (const Value& v : items) {
    if (values_equal(v, x)) return true;
  }
  return false;
}

Result<bool> t_divisibleby(const Value& x, const CallArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(const Value* n, other(a, "divisibleby"));
  if (!x.is_number() || !n->is_number() || x.is_float() || n->is_float() || n->as_int() == 0) {
    return invalid_argument("divisibleby needs non-zero integers");
  }
  return x.as_int() % n->as_int() == 0;
}

Result<bool> t_sameas(const Value& x, const CallArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(const Value* y, other(a, "sameas"));
  if (x.kind() != y->kind()) return false;
  switch (x.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined: return true;
    case Value::Kind::kBool: return x.as_bool() == y->as_bool();
    case Value::Kind::kArray: return &x.items() == &y->items();
    case Value::Kind::kObject: return &x.as_object() == &y->as_object();
    default: return values_equal(x, *y);
  }
}

Result<bool> t_case(const Value& x, bool upper) {
  if (!x.is_string()) return false;
  const std::string& s = x.as_string();
  return upper ? py_upper(s) == s : py_lower(s) == s;
}

const std::unordered_map<std::string, TestFn>& test_table() {
  static const std::unordered_map<std::string, TestFn> kTests = {
      {"defined", [](const Value& x, const CallArgs&) -> Result<bool> { return !x.is_undefined(); }},
      {"undefined", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_undefined(); }},
      {"none", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_none(); }},
      {"string", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_string(); }},
      {"number", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_number(); }},
      {"integer", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_int(); }},
      {"float", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_float(); }},
      {"boolean", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_bool(); }},
      {"true", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_bool() && x.as_bool(); }},
      {"false", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_bool() && !x.as_bool(); }},
      {"mapping", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_object() && !x.is_namespace(); }},
      {"iterable",
       [](const Value& x, const CallArgs&) -> Result<bool> {
         return x.is_string() || x.is_array() || (x.is_object() && !x.is_namespace()) || x.is_undefined();
       }},
      {"sequence",
       [](const Value& x, const CallArgs&) -> Result<bool> {
         return x.is_string() || x.is_array() || (x.is_object() && !x.is_namespace()) || x.is_undefined();
       }},
      {"callable", [](const Value& x, const CallArgs&) -> Result<bool> { return x.is_callable(); }},
      {"odd", [](const Value& x, const CallArgs&) { return int_test(x, true); }},
      {"even", [](const Value& x, const CallArgs&) { return int_test(x, false); }},
      {"lower", [](const Value& x, const CallArgs&) { return t_case(x, false); }},
      {"upper", [](const Value& x, const CallArgs&) { return t_case(x, true); }},
      {"escaped", [](const Value&, const CallArgs&) -> Result<bool> { return false; }},
      {"equalto", t_eq}, {"eq", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne},
      {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt},
      {"le", t_le}, {"<=", t_le}, {"ge", t_ge}, {">=", t_ge},
      {"in", t_in}, {"divisibleby", t_divisibleby}, {"sameas", t_sameas},
  };
  return kTests;
}

}  // namespace

bool has_test(const std::string& name) { return test_table().count(name) != 0; }

Result<bool> apply_test(Evaluator&, const std::string& name, const Value& input, const CallArgs& args) {
  auto it = test_table().find(name);
  if (it == test_table().end()) return unsupported("unknown test '" + name + "'");
  return it->second(input, args);
}

}  // namespace frugal::jinja
