// Global functions: Jinja2's range/dict/namespace and the two transformers adds for chat
// templates, raise_exception(msg) and strftime_now(format).
#include <ctime>

#include "tokenizer/jinja/evaluator.h"

namespace frugal::jinja {
namespace {

constexpr int64_t kMaxRange = 1'000'000;

Result<Value> range_fn(const CallArgs& args, Evaluator& ev) {
  if (!args.keyword.empty()) return invalid_argument("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) return invalid_argument("range() takes 1 to 3 integer arguments");
  for (const Value& v : p) {
    if (!v.is_number() || v.is_float()) return invalid_argument(std::string("range() arguments must be integers, got ") + v.type_name());
  }
  int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) return invalid_argument("range() arg 3 must not be zero");
  // Python's len(range(...)) in unsigned arithmetic: no step can overflow near INT64_MIN/MAX.
  const bool up = step > 0;
  uint64_t n = 0;
  if (up ? start < stop : start > stop) {
    const uint64_t span = up ? uint64_t(stop) - uint64_t(start) : uint64_t(start) - uint64_t(stop);
    const uint64_t abs_step = up ? uint64_t(step) : uint64_t{0} - uint64_t(step);
    n = (span - 1) / abs_step + 1;
  }
  if (n > static_cast<uint64_t>(kMaxRange)) {
    return resource_exhausted("range() longer than " + std::to_string(kMaxRange) + " items");
  }
  FRUGAL_RETURN_IF_ERROR(ev.charge_iterations(static_cast<int64_t>(n)));
  Array out;
  out.reserve(n);
  for (uint64_t k = 0; k < n; ++k) out.push_back(Value::integer(static_cast<int64_t>(uint64_t(start) + k * uint64_t(step))));
  return Value::array(std::move(out));
}

// dict(**kw) and namespace(**kw) (also accept one dict positional argument to copy from).
Result<Value> make_mapping(const CallArgs& args, bool is_namespace) {
  Object obj;
  const char* fn = is_namespace ? "namespace" : "dict";
  if (args.positional.size() > 1) return invalid_argument(std::string(fn) + "() takes at most one positional argument");
  if (args.positional.size() == 1) {
    const Value& src = args.positional[0];
    if (src.is_object()) {
      for (const auto& [k, v] : src.as_object().entries()) obj.set(k, v);
    } else if (src.is_array()) {
      for (const Value& pair : src.items()) {
        if (!pair.is_array() || pair.items().size() != 2 || !pair.items()[0].is_string()) {
          return invalid_argument(std::string(fn) + "() expects (string key, value) pairs");
        }
        obj.set(pair.items()[0].as_string(), pair.items()[1]);
      }
    } else {
      return invalid_argument(std::string(fn) + "() positional argument must be a dict or list of pairs");
    }
  }
  for (const auto& [k, v] : args.keyword) obj.set(k, v);
  return is_namespace ? Value::namespace_object(std::move(obj)) : Value::object(std::move(obj));
}

Result<Value> raise_exception_fn(const CallArgs& args, Evaluator&) {
  const Value* msg = args.get("message", 0);
  return template_exception(msg ? msg->to_str() : "raise_exception() called");
}

Result<Value> strftime_now_fn(const CallArgs& args, Evaluator&) {
  const Value* fmt = args.get("format", 0);
  if (!fmt || !fmt->is_string()) return invalid_argument("strftime_now() needs a format string");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof(buf), fmt->as_string().c_str(), &tm);
  if (n == 0 && !fmt->as_string().empty()) return invalid_argument("strftime_now(): format too long or invalid");
  return Value::string(std::string(buf, n));
}

}  // namespace

Value lookup_global(const std::string& name) {
  static const Value kRange = Value::callable("range", range_fn);
  static const Value kDict = Value::callable("dict", [](const CallArgs& a, Evaluator&) { return make_mapping(a, false); });
  static const Value kNamespace =
      Value::callable("namespace", [](const CallArgs& a, Evaluator&) { return make_mapping(a, true); });
  static const Value kRaise = Value::callable("raise_exception", raise_exception_fn);
  static const Value kStrftime = Value::callable("strftime_now", strftime_now_fn);
  if (name == "range") return kRange;
  if (name == "dict") return kDict;
  if (name == "namespace") return kNamespace;
  if (name == "raise_exception") return kRaise;
  if (name == "strftime_now") return kStrftime;
  return Value::undefined();
}

}  // namespace frugal::jinja
