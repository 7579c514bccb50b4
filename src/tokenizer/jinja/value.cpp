#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace frugal::jinja {

// ---- Object ----

const Value* Object::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

Value* Object::find(std::string_view key) {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Object::set(const std::string& key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(key, std::move(value));
}

Value& Object::value_at(size_t i) { return entries_[i].second; }

bool Object::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  return true;
}

const Value* CallArgs::get(std::string_view name, size_t pos) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return pos < positional.size() ? &positional[pos] : nullptr;
}

// ---- Value construction ----

const std::string& Value::empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::array(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  v.arr_ = std::make_shared<Array>(std::move(items));
  return v;
}
Value Value::tuple(Array items) {
  Value v = array(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::object(Object obj) {
  Value v;
  v.kind_ = Kind::kObject;
  v.obj_ = std::make_shared<Object>(std::move(obj));
  return v;
}
Value Value::namespace_object(Object obj) {
  Value v = object(std::move(obj));
  v.namespace_ = true;
  return v;
}
Value Value::callable(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

double Value::as_double() const {
  switch (kind_) {
    case Kind::kFloat: return f_;
    case Kind::kInt: return static_cast<double>(i_);
    case Kind::kBool: return b_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kArray: return !arr_->empty();
    case Kind::kObject: return namespace_ || obj_->size() > 0;
    case Kind::kCallable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kArray: return tuple_ ? "tuple" : "list";
    case Kind::kObject: return namespace_ ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "?";
}

std::string format_python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exp = std::stoi(sci.substr(e_pos + 1));
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      int_part.append(exp + 1 > static_cast<int>(digits.size()) ? exp + 1 - digits.size() : 0, '0');
      std::string frac = static_cast<int>(digits.size()) > exp + 1 ? digits.substr(exp + 1) : "0";
      out.append(int_part).append(".").append(frac);
    } else {
      out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += ebuf;
  }
  return out;
}

static std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

constexpr int64_t kMaxCompareSteps = 1'000'000;

const void* Value::container_id() const {
  if (kind_ == Kind::kArray) return arr_.get();
  if (kind_ == Kind::kObject) return obj_.get();
  return nullptr;
}

std::string Value::to_str() const {
  std::vector<const void*> active;
  return to_str_at(active);
}

std::string Value::repr() const {
  std::vector<const void*> active;
  return repr_at(active);
}

std::string Value::repr_at(std::vector<const void*>& active) const {
  switch (kind_) {
    case Kind::kString: return repr_string(as_string());
    case Kind::kUndefined: return "";
    default: break;
  }
  return to_str_at(active);
}

std::string Value::to_str_at(std::vector<const void*>& active) const {
  const void* id = container_id();
  if (id && std::find(active.begin(), active.end(), id) != active.end()) return kind_ == Kind::kArray ? "[...]" : "{...}";
  if (id) active.push_back(id);
  std::string out = to_str_inner(active);
  if (id) active.pop_back();
  return out;
}

namespace {
thread_local size_t t_value_size_limit = size_t{64} << 20;
}  // namespace

size_t value_size_limit() { return t_value_size_limit; }
ScopedValueSizeLimit::ScopedValueSizeLimit(size_t max_bytes) : previous_(t_value_size_limit) {
  t_value_size_limit = max_bytes;
}
ScopedValueSizeLimit::~ScopedValueSizeLimit() { t_value_size_limit = previous_; }

// Lists and dicts stop printing once past value_size_limit(): items may share one big string, so
// the printed form can be far larger than the value; whoever uses the result checks its size.
std::string Value::to_str_inner(std::vector<const void*>& active) const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return format_python_float(f_);
    case Kind::kString: return as_string();
    case Kind::kArray: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < arr_->size() && out.size() <= value_size_limit(); ++i) {
        if (i) out += ", ";
        out += (*arr_)[i].repr_at(active);
      }
      if (tuple_) return out + (arr_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kObject: {
      if (namespace_) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : obj_->entries()) {
        if (out.size() > value_size_limit()) break;
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + v.repr_at(active);
      }
      return out + "}";
    }
    case Kind::kCallable: return "<function " + fn_->name + ">";
  }
  return "";
}

// ---- comparison ----

static bool values_equal_at(const Value& a, const Value& b, int64_t& steps);

bool values_equal(const Value& a, const Value& b) {
  int64_t steps = 0;
  return values_equal_at(a, b, steps);
}

// `steps` bounds the work: distinct self-referencing containers would otherwise recurse forever.
static bool values_equal_at(const Value& a, const Value& b, int64_t& steps) {
  if (++steps > kMaxCompareSteps) return false;
  if (a.container_id() && a.container_id() == b.container_id()) return true;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kArray: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!values_equal_at(a.items()[i], b.items()[i], steps)) return false;
      }
      return true;
    }
    case Value::Kind::kObject: {
      if (a.is_namespace() || b.is_namespace()) return &a.as_object() == &b.as_object();
      if (a.as_object().size() != b.as_object().size()) return false;
      for (const auto& [k, v] : a.as_object().entries()) {
        const Value* other = b.as_object().find(k);
        if (!other || !values_equal_at(v, *other, steps)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable: return &a.fn() == &b.fn();
    default: return false;
  }
}

Result<bool> values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_array() && b.is_array()) {
    const Array& x = a.items();
    const Array& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return values_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return invalid_argument(std::string("'<' not supported between instances of '") + a.type_name() +
                          "' and '" + b.type_name() + "'");
}

// ---- JSON ----

static void json_escape(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char buf[16];
    if (c < 0x20) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else if (c >= 0x80 && ensure_ascii) {
      std::vector<uint32_t> cps = utf8_decode(s.substr(i, 4));
      uint32_t cp = cps.empty() ? 0xfffd : cps[0];
      size_t len = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
      if (cp >= 0x10000) {
        uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out += buf;
      i += len - 1;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

static Status dump_json(std::string& out, const Value& v, const JsonDumpOptions& o, int depth) {
  if (depth > 512) return invalid_argument("tojson: value nested deeper than 512 levels (circular reference?)");
  if (out.size() > value_size_limit()) {
    return resource_exhausted("tojson: output exceeds " + std::to_string(value_size_limit()) + " bytes");
  }
  std::string item_sep = o.item_separator.empty() ? (o.indent >= 0 ? "," : ", ") : o.item_separator;
  std::string key_sep = o.key_separator.empty() ? ": " : o.key_separator;
  auto newline = [&](int d) {
    if (o.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(o.indent) * d, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return invalid_argument("tojson: Object of type Undefined is not JSON serializable");
    case Value::Kind::kNone: out += "null"; return Status::ok();
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::ok();
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return Status::ok();
    case Value::Kind::kFloat: {
      double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : format_python_float(d);
      return Status::ok();
    }
    case Value::Kind::kString: json_escape(out, v.as_string(), o.ensure_ascii); return Status::ok();
    case Value::Kind::kArray: {
      const Array& items = v.items();
      if (items.empty()) { out += "[]"; return Status::ok(); }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        FRUGAL_RETURN_IF_ERROR(dump_json(out, items[i], o, depth + 1));
      }
      newline(depth);
      out += ']';
      return Status::ok();
    }
    case Value::Kind::kObject: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.as_object().entries()) entries.push_back(&e);
      if (entries.empty()) { out += "{}"; return Status::ok(); }
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_escape(out, entries[i]->first, o.ensure_ascii);
        out += key_sep;
        FRUGAL_RETURN_IF_ERROR(dump_json(out, entries[i]->second, o, depth + 1));
      }
      newline(depth);
      out += '}';
      return Status::ok();
    }
    case Value::Kind::kCallable:
      return invalid_argument("tojson: Object of type function is not JSON serializable");
  }
  return Status::ok();
}

Result<std::string> to_json_string(const Value& v, const JsonDumpOptions& opts) {
  std::string out;
  FRUGAL_RETURN_IF_ERROR(dump_json(out, v, opts, 0));
  return out;
}

// ---- UTF-8 ----

std::vector<uint32_t> utf8_decode(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) {  // invalid byte: keep it as U+FFFD rather than fail
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string utf8_encode(const std::vector<uint32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) utf8_append(out, cp);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

}  // namespace frugal::jinja
