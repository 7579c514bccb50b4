// Evaluator: walks the AST with Jinja2 semantics (scoping, Undefined, Python operators) and
// renders to a string. Limits keep hostile templates from exhausting memory or time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace frugal::jinja {

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;     // total bytes written to any output buffer
  int64_t max_loop_iterations = 1'000'000;  // summed over all loops
  int max_call_depth = 100;                // nested macro / caller / function calls
};

class Evaluator {
 public:
  explicit Evaluator(RenderLimits limits) : limits_(limits) {}

  // Renders `program` with `globals` as the outermost scope.
  Result<std::string> render(const Body& program, Object globals);

  // Calls a callable value (filters use it for map/select on macros, for example).
  Result<Value> call(const Value& fn, const CallArgs& args);
  // Counts work done by filters and methods that loop, against the same budget as for-loops.
  Status charge_iterations(int64_t n);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frames = std::vector<std::shared_ptr<Object>>;
  // Macros hold their defining scopes weakly: a macro is stored in one of those scopes, and a
  // strong reference would make a cycle that leaks every render.
  using WeakFrames = std::vector<std::weak_ptr<Object>>;

  Result<Flow> exec_body(const Body& body);
  Result<Flow> exec(const Stmt& s);
  Result<Flow> exec_for(const Stmt& s);
  Status exec_set(const Stmt& s);
  Status assign(const Expr& target, Value value);
  Result<std::string> render_to_string(const Body& body);
  Value make_macro(const Stmt& s, const Kwargs& params, const Body& body, const std::string& name);
  Result<Value> invoke_macro(const Stmt& s, const Kwargs& params, const Body& body, const WeakFrames& closure,
                             const std::string& name, const CallArgs& args);
  Result<Value> apply_filter_chain(const Expr* filter, Value input);

  Result<Value> eval(const Expr& e);
  Result<Value> eval_inner(const Expr& e);
  Result<Value> eval_call(const Expr& e);
  Result<Value> eval_binary(const Expr& e);
  Result<Value> eval_compare(const Expr& e);
  Result<Value> eval_filter_or_test(const Expr& e);
  Result<CallArgs> eval_args(const Expr& e, size_t first_child);
  Value lookup(const std::string& name) const;
  Status write(const std::string& s);
  // A string over max_output_bytes or a list over max_loop_iterations items is an error.
  Result<Value> check_size(Value v) const;
  Status located(const Expr& e, const Status& st) const;

  RenderLimits limits_;
  Frames frames_;
  std::string* out_ = nullptr;
  size_t bytes_written_ = 0;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
};

// Builtin filters and tests (filters.cpp) and attribute methods / globals (builtins.cpp).
Result<Value> apply_filter(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args);
Result<bool> apply_test(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// obj.name: a bound method (str, list, dict), a dict entry, or Undefined naming what was missing.
Result<Value> get_attribute(const Value& obj, const std::string& name);
// obj[index] with Python semantics (negative indices; missing -> Undefined).
Result<Value> get_item(const Value& obj, const Value& index);
Result<Value> slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Global functions: range, dict, namespace, raise_exception, strftime_now.
Value lookup_global(const std::string& name);
// Python iteration: list items, dict keys, string characters; Undefined iterates as empty.
Result<Array> iterate(const Value& v);
// Python str methods shared with filters.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_upper(std::string s);
// Python printf-style `fmt % args` for %s %r %d %i %f (with precision) and %%.
Result<std::string> py_percent_format(const std::string& fmt, const Array& args);
std::string py_lower(std::string s);

// Error raised by raise_exception(); evaluation passes its message through unchanged.
Status template_exception(const std::string& msg);
bool is_template_exception(const Status& st);

}  // namespace frugal::jinja
