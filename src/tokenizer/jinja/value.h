// Value: the dynamic type the Jinja evaluator computes with. Mirrors the Python objects Jinja2
// sees when transformers renders a chat template: None, Undefined, bool, int, float, str, list,
// dict (insertion-ordered, string keys) and callables (filters bound as methods, macros, globals).
// Lists and dicts are shared by reference, like Python objects, so `ns.x = ...` and
// `list.append(...)` mutate what every alias sees.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace frugal::jinja {

class Value;
class Evaluator;

using Array = std::vector<Value>;

// Insertion-ordered string-keyed map (Python dicts keep insertion order; tojson must too).
class Object {
 public:
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(const std::string& key, Value value);
  bool erase(const std::string& key);
  size_t size() const;  // defined below Value: clang needs Value complete to instantiate it
  // Direct slot access for objects with a fixed key set (the loop object is updated in place).
  Value& value_at(size_t i);
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Keyword `name`, else positional `pos`, else nullptr.
  const Value* get(std::string_view name, size_t pos) const;
};

using NativeFn = std::function<Result<Value>(const CallArgs& args, Evaluator& ev)>;

struct Callable {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kCallable };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value array(Array items = {});
  // A Python tuple: behaves as a list but prints as (a, b) and is not equal to a list.
  static Value tuple(Array items);
  static Value object(Object obj = {});
  // A Jinja2 namespace(): an object with attribute assignment and no dict methods.
  static Value namespace_object(Object obj = {});
  static Value callable(std::string name, NativeFn fn);

  template <typename Json>
  static Value from_json(const Json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python: bool is an int subtype, so arithmetic and number tests accept it.
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_namespace() const { return kind_ == Kind::kObject && namespace_; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_tuple() const { return kind_ == Kind::kArray && tuple_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_double() const;
  const std::string& as_string() const { return s_ ? *s_ : empty_string(); }
  // For undefined values: what was looked up and missing, for error messages.
  const std::string& undefined_hint() const { return as_string(); }
  Array& items() const { return *arr_; }
  Object& as_object() const { return *obj_; }
  const Callable& fn() const { return *fn_; }

  bool truthy() const;
  // Python str(): what {{ v }} prints. Undefined prints as "".
  std::string to_str() const;
  // Python repr(): how values print inside lists and dicts.
  std::string repr() const;
  // Identity of the list or dict behind this value (nullptr for scalars), for cycle checks.
  const void* container_id() const;
  const char* type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool namespace_ = false;
  bool tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;  // null for the empty string: copies stay cheap
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
  std::shared_ptr<const Callable> fn_;

  static const std::string& empty_string();
  // `active`: containers being printed; one that contains itself prints "[...]", as in Python.
  std::string to_str_at(std::vector<const void*>& active) const;
  std::string repr_at(std::vector<const void*>& active) const;
  std::string to_str_inner(std::vector<const void*>& active) const;
};

inline size_t Object::size() const { return entries_.size(); }

// The most bytes one string a render builds may hold (its RenderLimits::max_output_bytes; 64 MiB
// outside a render). Evaluator::render sets it for its thread with ScopedValueSizeLimit; the
// builders of strings (str(), tojson, join, replace, indent, `*`) stop or fail once past it, and
// the evaluator rejects any value over it, so a hostile template cannot exhaust memory through
// values it never writes out.
size_t value_size_limit();
class ScopedValueSizeLimit {
 public:
  explicit ScopedValueSizeLimit(size_t max_bytes);
  ~ScopedValueSizeLimit();
  ScopedValueSizeLimit(const ScopedValueSizeLimit&) = delete;
  ScopedValueSizeLimit& operator=(const ScopedValueSizeLimit&) = delete;

 private:
  size_t previous_;
};

// Python ==: 1 == 1.0 == True, lists and dicts compare deeply.
bool values_equal(const Value& a, const Value& b);
// Python <: numbers with numbers, strings with strings, lists lexicographically.
Result<bool> values_less(const Value& a, const Value& b);

// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...), the tojson
// transformers installs. indent < 0 means none.
struct JsonDumpOptions {
  int indent = -1;
  std::string item_separator;  // empty: Python's default for the indent mode
  std::string key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
Result<std::string> to_json_string(const Value& v, const JsonDumpOptions& opts);

// Python float repr: shortest round-trip digits, "1.0" for integral values, "1e+16" style exponents.
std::string format_python_float(double d);

// UTF-8 helpers: Python strings index by code point.
std::vector<uint32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<uint32_t>& cps);
void utf8_append(std::string& out, uint32_t cp);
size_t utf8_length(std::string_view s);

// ---- template definitions ----

template <typename Json>
Value Value::from_json(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return none();
    case Json::value_t::boolean:
      return boolean(j.template get<bool>());
    case Json::value_t::number_integer:
      return integer(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return floating(static_cast<double>(u));
      return integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return floating(j.template get<double>());
    case Json::value_t::string:
      return string(j.template get<std::string>());
    case Json::value_t::array: {
      Array items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return array(std::move(items));
    }
    case Json::value_t::object: {
      Object obj;
      for (auto it = j.begin(); it != j.end(); ++it) obj.set(it.key(), from_json(it.value()));
      return object(std::move(obj));
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
      return undefined();
  }
  return undefined();
}

}  // namespace frugal::jinja
