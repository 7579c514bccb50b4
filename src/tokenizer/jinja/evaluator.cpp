#include "tokenizer/jinja/evaluator.h"

#include <cmath>
#include <utility>

namespace frugal::jinja {
namespace {

constexpr const char* kLocatedPrefix = "chat template line ";
constexpr const char* kExceptionMarker = "\x1b[raise_exception]";

Status at_location(int line, int col, const std::string& msg) {
  return invalid_argument(std::string(kLocatedPrefix) + std::to_string(line) + " col " + std::to_string(col) +
                          ": " + msg);
}

// Restores the evaluator's frames, output buffer and call depth when a call returns or fails.
template <typename F>
struct Finally {
  F f;
  ~Finally() { f(); }
};
template <typename F>
Finally(F) -> Finally<F>;

Status undefined_error(const Value& v) {
  const std::string& hint = v.undefined_hint();
  return invalid_argument(hint.empty() ? "value is undefined" : hint);
}

}  // namespace

Status template_exception(const std::string& msg) {
  return invalid_argument(std::string(kExceptionMarker) + msg);
}

bool is_template_exception(const Status& st) { return st.message().rfind(kExceptionMarker, 0) == 0; }

Status Evaluator::located(const Expr& e, const Status& st) const {
  if (st.message().rfind(kLocatedPrefix, 0) == 0 || is_template_exception(st)) return st;
  return Status(st.code(), std::string(kLocatedPrefix) + std::to_string(e.line) + " col " +
                               std::to_string(e.col) + ": " + st.message());
}

Status Evaluator::charge_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations) {
    return resource_exhausted("chat template exceeded " + std::to_string(limits_.max_loop_iterations) +
                              " loop iterations");
  }
  return Status::ok();
}

Status Evaluator::write(const std::string& s) {
  bytes_written_ += s.size();
  if (bytes_written_ > limits_.max_output_bytes) {
    return resource_exhausted("chat template output exceeded " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  out_->append(s);
  return Status::ok();
}

Result<std::string> Evaluator::render(const Body& program, Object globals) {
  ScopedValueSizeLimit size_limit(limits_.max_output_bytes);
  frames_ = {std::make_shared<Object>(std::move(globals))};
  std::string out;
  out_ = &out;
  Result<Flow> flow = exec_body(program);
  out_ = nullptr;
  if (!flow.is_ok()) {
    const Status& st = flow.status();
    if (is_template_exception(st)) {
      return invalid_argument(st.message().substr(std::string(kExceptionMarker).size()));
    }
    return st;
  }
  if (*flow != Flow::kNormal) return invalid_argument("chat template: 'break' or 'continue' outside a loop");
  return out;
}

Result<std::string> Evaluator::render_to_string(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  Finally restore{[&] { out_ = saved; }};
  FRUGAL_ASSIGN_OR_RETURN(Flow flow, exec_body(body));
  if (flow != Flow::kNormal) return invalid_argument("chat template: 'break' or 'continue' outside a loop");
  return buf;
}

Result<Evaluator::Flow> Evaluator::exec_body(const Body& body) {
  for (const auto& s : body) {
    FRUGAL_ASSIGN_OR_RETURN(Flow flow, exec(*s));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<Evaluator::Flow> Evaluator::exec(const Stmt& s) {
  switch (s.kind) {
    case Stmt::Kind::kText:
      FRUGAL_RETURN_IF_ERROR(write(s.text));
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*s.expr));
      FRUGAL_RETURN_IF_ERROR(write(v.to_str()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : s.branches) {
        FRUGAL_ASSIGN_OR_RETURN(Value c, eval(*cond));
        if (c.truthy()) return exec_body(body);
      }
      return exec_body(s.else_body);
    case Stmt::Kind::kFor:
      return exec_for(s);
    case Stmt::Kind::kSet:
    case Stmt::Kind::kSetBlock:
      FRUGAL_RETURN_IF_ERROR(exec_set(s));
      return Flow::kNormal;
    case Stmt::Kind::kMacro:
      frames_.back()->set(s.name, make_macro(s, s.params, s.body, s.name));
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      const Expr& call = *s.expr;
      FRUGAL_ASSIGN_OR_RETURN(Value callee, eval(*call.children[0]));
      FRUGAL_ASSIGN_OR_RETURN(CallArgs args, eval_args(call, 1));
      args.keyword.emplace_back("caller", make_macro(s, s.params, s.body, "caller"));
      Result<Value> r = this->call(callee, args);
      if (!r.is_ok()) return located(call, r.status());
      FRUGAL_RETURN_IF_ERROR(write(r->to_str()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kFilterBlock: {
      FRUGAL_ASSIGN_OR_RETURN(std::string text, render_to_string(s.body));
      FRUGAL_ASSIGN_OR_RETURN(Value v, apply_filter_chain(s.filter.get(), Value::string(std::move(text))));
      FRUGAL_RETURN_IF_ERROR(write(v.to_str()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kDo: {
      FRUGAL_ASSIGN_OR_RETURN(Value ignored, eval(*s.expr));
      (void)ignored;
      return Flow::kNormal;
    }
  }
  return Flow::kNormal;
}

namespace {

// Jinja2 keeps one LoopContext per loop and advances it; we do the same with a fixed-layout object.
enum LoopSlot { kIndex, kIndex0, kRevindex, kRevindex0, kFirst, kLast, kLength, kPrevitem, kNextitem, kNumSlots };

Value make_loop_object(int64_t length, const std::shared_ptr<int64_t>& position) {
  Object loop;
  for (const char* name : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem", "nextitem"}) {
    loop.set(name, Value());
  }
  loop.value_at(kLength) = Value::integer(length);
  loop.set("depth", Value::integer(1));
  loop.set("depth0", Value::integer(0));
  loop.set("cycle", Value::callable("loop.cycle", [position](const CallArgs& args, Evaluator&) -> Result<Value> {
             if (args.positional.empty()) return invalid_argument("loop.cycle() needs at least one argument");
             return args.positional[static_cast<size_t>(*position) % args.positional.size()];
           }));
  return Value::object(std::move(loop));
}

void advance_loop_object(Object& loop, const Array& items, size_t i) {
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t idx = static_cast<int64_t>(i);
  loop.value_at(kIndex) = Value::integer(idx + 1);
  loop.value_at(kIndex0) = Value::integer(idx);
  loop.value_at(kRevindex) = Value::integer(n - idx);
  loop.value_at(kRevindex0) = Value::integer(n - idx - 1);
  loop.value_at(kFirst) = Value::boolean(i == 0);
  loop.value_at(kLast) = Value::boolean(idx == n - 1);
  loop.value_at(kPrevitem) = i > 0 ? items[i - 1] : Value::undefined("'loop.previtem' is undefined on the first item");
  loop.value_at(kNextitem) =
      idx + 1 < n ? items[i + 1] : Value::undefined("'loop.nextitem' is undefined on the last item");
}

}  // namespace

// One scope for the whole loop (as Jinja2 and @huggingface/jinja do): a plain `set` in the body
// is invisible after the loop but persists from one iteration to the next.
Result<Evaluator::Flow> Evaluator::exec_for(const Stmt& s) {
  FRUGAL_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr));
  Result<Array> all = iterate(iterable);
  if (!all.is_ok()) return located(*s.expr, all.status());
  Array items;
  frames_.push_back(std::make_shared<Object>());
  Finally pop{[&] { frames_.pop_back(); }};
  if (s.filter) {  // `for x in xs if cond`: loop.* counts only the items that pass
    for (Value& item : *all) {
      FRUGAL_RETURN_IF_ERROR(charge_iterations(1));
      FRUGAL_RETURN_IF_ERROR(assign(*s.target, item));
      FRUGAL_ASSIGN_OR_RETURN(Value keep, eval(*s.filter));
      if (keep.truthy()) items.push_back(std::move(item));
    }
  } else {
    items = std::move(*all);
  }
  if (items.empty()) return exec_body(s.else_body);
  auto position = std::make_shared<int64_t>(0);
  Value loop = make_loop_object(static_cast<int64_t>(items.size()), position);
  frames_.back()->set("loop", loop);
  for (size_t i = 0; i < items.size(); ++i) {
    FRUGAL_RETURN_IF_ERROR(charge_iterations(1));
    *position = static_cast<int64_t>(i);
    advance_loop_object(loop.as_object(), items, i);
    FRUGAL_RETURN_IF_ERROR(assign(*s.target, items[i]));
    FRUGAL_ASSIGN_OR_RETURN(Flow flow, exec_body(s.body));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Status Evaluator::assign(const Expr& target, Value value) {
  switch (target.kind) {
    case Expr::Kind::kName:
      frames_.back()->set(target.name, std::move(value));
      return Status::ok();
    case Expr::Kind::kTuple: {
      Result<Array> items = iterate(value);
      if (!items.is_ok()) return located(target, items.status());
      if (items->size() != target.children.size()) {
        return at_location(target.line, target.col,
                           "cannot unpack " + std::to_string(items->size()) + " values into " +
                               std::to_string(target.children.size()) + " names");
      }
      for (size_t i = 0; i < items->size(); ++i) {
        FRUGAL_RETURN_IF_ERROR(assign(*target.children[i], (*items)[i]));
      }
      return Status::ok();
    }
    case Expr::Kind::kGetAttr: {
      FRUGAL_ASSIGN_OR_RETURN(Value obj, eval(*target.children[0]));
      if (!obj.is_namespace()) {
        return at_location(target.line, target.col,
                           "cannot assign attribute '" + target.name + "' on a " + obj.type_name() +
                               " (only namespace() objects support attribute assignment)");
      }
      obj.as_object().set(target.name, std::move(value));
      return Status::ok();
    }
    default:
      return at_location(target.line, target.col, "invalid assignment target");
  }
}

Status Evaluator::exec_set(const Stmt& s) {
  if (s.kind == Stmt::Kind::kSet) {
    FRUGAL_ASSIGN_OR_RETURN(Value v, eval(*s.expr));
    return assign(*s.target, std::move(v));
  }
  FRUGAL_ASSIGN_OR_RETURN(std::string text, render_to_string(s.body));
  Value v = Value::string(std::move(text));
  if (s.filter) {
    FRUGAL_ASSIGN_OR_RETURN(v, apply_filter_chain(s.filter.get(), std::move(v)));
  }
  return assign(*s.target, std::move(v));
}

Result<Value> Evaluator::apply_filter_chain(const Expr* filter, Value input) {
  Value operand = std::move(input);
  if (filter->children[0]) {
    FRUGAL_ASSIGN_OR_RETURN(operand, apply_filter_chain(filter->children[0].get(), std::move(operand)));
  }
  FRUGAL_ASSIGN_OR_RETURN(CallArgs args, eval_args(*filter, 1));
  Result<Value> r = apply_filter(*this, filter->name, operand, args);
  if (r.is_ok()) r = check_size(std::move(r).value());
  if (!r.is_ok()) return located(*filter, r.status());
  return r;
}

Value Evaluator::make_macro(const Stmt& s, const Kwargs& params, const Body& body, const std::string& name) {
  WeakFrames closure(frames_.begin(), frames_.end());
  const Stmt* stmt = &s;
  const Kwargs* p = &params;
  const Body* b = &body;
  return Value::callable(name, [stmt, p, b, closure, name](const CallArgs& args, Evaluator& ev) {
    return ev.invoke_macro(*stmt, *p, *b, closure, name, args);
  });
}

Result<Value> Evaluator::invoke_macro(const Stmt& s, const Kwargs& params, const Body& body, const WeakFrames& closure,
                                      const std::string& name, const CallArgs& args) {
  if (args.positional.size() > params.size()) {
    return at_location(s.line, s.col,
                       "macro '" + name + "' takes " + std::to_string(params.size()) + " arguments, got " +
                           std::to_string(args.positional.size()));
  }
  Frames saved = std::move(frames_);
  frames_.clear();
  for (const auto& weak : closure) {
    if (auto frame = weak.lock()) frames_.push_back(std::move(frame));
  }
  frames_.push_back(std::make_shared<Object>());
  Finally restore{[&] { frames_ = std::move(saved); }};
  for (const auto& [kw, value] : args.keyword) {
    bool known = kw == "caller";
    for (const auto& param : params) known = known || param.first == kw;
    if (!known) return at_location(s.line, s.col, "macro '" + name + "' got an unexpected keyword argument '" + kw + "'");
    if (kw == "caller") frames_.back()->set("caller", value);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Value* given = args.get(params[i].first, i);
    Value v;
    if (given) {
      v = *given;
    } else if (params[i].second) {
      FRUGAL_ASSIGN_OR_RETURN(v, eval(*params[i].second));
    } else {
      v = Value::undefined("'" + params[i].first + "' is undefined (missing argument of macro '" + name + "')");
    }
    frames_.back()->set(params[i].first, std::move(v));
  }
  FRUGAL_ASSIGN_OR_RETURN(std::string text, render_to_string(body));
  return Value::string(std::move(text));
}

Result<Value> Evaluator::call(const Value& fn, const CallArgs& args) {
  if (fn.is_undefined()) return undefined_error(fn);
  if (!fn.is_callable()) return invalid_argument(std::string("'") + fn.type_name() + "' object is not callable");
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    return resource_exhausted("chat template exceeded call depth " + std::to_string(limits_.max_call_depth) +
                              " (runaway recursion?)");
  }
  Finally done{[&] { --call_depth_; }};
  return fn.fn().fn(args, *this);
}

}  // namespace frugal::jinja
