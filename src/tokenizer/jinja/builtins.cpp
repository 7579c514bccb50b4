// Attribute and item access, Python str/list/dict methods, and the global functions templates
// call (range, dict, namespace, raise_exception, strftime_now).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "tokenizer/jinja/evaluator.h"

namespace frugal::jinja {
namespace {

bool is_ws(uint32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

Result<std::string> str_arg(const CallArgs& args, const char* name, size_t pos, const char* method) {
  const Value* v = args.get(name, pos);
  if (!v || !v->is_string()) {
    return invalid_argument(std::string(method) + "() argument '" + name + "' must be a string, got " +
                            (v ? v->type_name() : "nothing"));
  }
  return v->as_string();
}

int64_t int_arg(const CallArgs& args, const char* name, size_t pos, int64_t def) {
  const Value* v = args.get(name, pos);
  return v && v->is_number() && !v->is_float() ? v->as_int() : def;
}

// Python str.split / rsplit (no rsplit-specific maxsplit direction needed by templates: left to right).
Array py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  Array out;
  if (!sep || sep->is_none()) {  // runs of whitespace, no empty strings
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_ws(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t end = s.size();
        while (end > i && is_ws(static_cast<unsigned char>(s[end - 1]))) --end;
        out.push_back(Value::string(s.substr(i, end - i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_ws(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back(Value::string(s.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  const std::string& d = sep->as_string();
  size_t start = 0;
  while (true) {
    size_t p = (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) ? std::string::npos : s.find(d, start);
    if (p == std::string::npos) {
      out.push_back(Value::string(s.substr(start)));
      return out;
    }
    out.push_back(Value::string(s.substr(start, p - start)));
    start = p + d.size();
  }
}

Result<Value> string_method(const std::string& s, const std::string& name, const CallArgs& args) {
  if (name == "split" || name == "rsplit") {
    const Value* sep = args.get("sep", 0);
    if (sep && !sep->is_none() && (!sep->is_string() || sep->as_string().empty())) {
      return invalid_argument("split() separator must be a non-empty string");
    }
    return Value::array(py_split(s, sep, int_arg(args, "maxsplit", 1, -1)));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return Value::string(py_strip(s, args.get("chars", 0), name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* p = args.get("prefix", 0);
    if (!p) return invalid_argument(name + "() needs an argument");
    Array candidates = p->is_array() ? p->items() : Array{*p};
    for (const Value& c : candidates) {
      if (!c.is_string()) return invalid_argument(name + "() argument must be str or a tuple of str");
      const std::string& x = c.as_string();
      bool hit = name == "startswith" ? s.rfind(x, 0) == 0
                                      : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "replace") {
    FRUGAL_ASSIGN_OR_RETURN(std::string old, str_arg(args, "old", 0, "replace"));
    FRUGAL_ASSIGN_OR_RETURN(std::string repl, str_arg(args, "new", 1, "replace"));
    return Value::string(py_replace(s, old, repl, int_arg(args, "count", 2, -1)));
  }
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower") return Value::string(py_lower(s));
  if (name == "title") return Value::string(py_title(s));
  if (name == "capitalize") return Value::string(py_capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    FRUGAL_ASSIGN_OR_RETURN(std::string sub, str_arg(args, "sub", 0, name.c_str()));
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (name == "index") return invalid_argument("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, p))));
  }
  if (name == "join") {
    const Value* it = args.get("iterable", 0);
    if (!it) return invalid_argument("join() needs an iterable");
    FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(*it));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return invalid_argument("sequence item " + std::to_string(i) + ": expected str instance, " +
                                items[i].type_name() + " found");
      }
      if (i) out += s;
      out += items[i].as_string();
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    Array out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        out.push_back(Value::string(s.substr(start, i - start)));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < s.size()) out.push_back(Value::string(s.substr(start)));
    return Value::array(std::move(out));
  }
  auto all_of = [&](auto pred) {
    return Value::boolean(!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); }));
  };
  if (name == "isdigit") return all_of([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all_of([](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all_of([](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "isspace") return all_of([](unsigned char c) { return std::isspace(c) != 0; });
  return unsupported("unsupported str method '" + name + "'");
}

const char* const kStringMethods[] = {"split", "rsplit", "strip", "lstrip", "rstrip", "startswith", "endswith",
                                      "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                                      "index", "count", "join", "splitlines", "isdigit", "isalpha", "isalnum",
                                      "isspace"};
const char* const kListMethods[] = {"append", "pop", "extend", "insert", "index", "count", "reverse", "copy"};
const char* const kDictMethods[] = {"items", "keys", "values", "get", "pop", "update", "copy", "setdefault"};

template <size_t N>
bool in_list(const char* const (&names)[N], const std::string& name) {
  return std::find_if(std::begin(names), std::end(names), [&](const char* n) { return name == n; }) != std::end(names);
}

Result<Value> list_method(const Value& self, const std::string& name, const CallArgs& args) {
  Array& items = self.items();
  if (name == "append") {
    if (args.positional.size() != 1) return invalid_argument("append() takes exactly one argument");
    items.push_back(args.positional[0]);
    return Value::none();
  }
  if (name == "extend") {
    if (args.positional.size() != 1) return invalid_argument("extend() takes exactly one argument");
    FRUGAL_ASSIGN_OR_RETURN(Array more, iterate(args.positional[0]));
    items.insert(items.end(), more.begin(), more.end());
    return Value::none();
  }
  if (name == "pop") {
    if (items.empty()) return invalid_argument("pop from empty list");
    int64_t i = int_arg(args, "index", 0, -1);
    if (i < 0) i += static_cast<int64_t>(items.size());
    if (i < 0 || i >= static_cast<int64_t>(items.size())) return out_of_range("pop index out of range");
    Value v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "insert") {
    if (args.positional.size() != 2) return invalid_argument("insert() takes exactly two arguments");
    int64_t n = static_cast<int64_t>(items.size());
    int64_t i = int_arg(args, "index", 0, 0);
    if (i < 0) i = std::max<int64_t>(0, i + n);
    items.insert(items.begin() + std::min(i, n), args.positional[1]);
    return Value::none();
  }
  if (name == "index" || name == "count") {
    if (args.positional.empty()) return invalid_argument(name + "() needs an argument");
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!values_equal(items[i], args.positional[0])) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") return invalid_argument(args.positional[0].repr() + " is not in list");
    return Value::integer(n);
  }
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return Value::none();
  }
  return Value::array(items);  // copy
}

Result<Value> dict_method(const Value& self, const std::string& name, const CallArgs& args) {
  Object& obj = self.as_object();
  if (name == "items" || name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : obj.entries()) {
      if (name == "items") out.push_back(Value::tuple({Value::string(k), v}));
      else out.push_back(name == "keys" ? Value::string(k) : v);
    }
    return Value::array(std::move(out));
  }
  if (name == "get" || name == "pop" || name == "setdefault") {
    const Value* key = args.get("key", 0);
    if (!key) return invalid_argument(name + "() needs a key");
    const Value* def = args.get("default", 1);
    const Value* found = key->is_string() ? obj.find(key->as_string()) : nullptr;
    Value result = found ? *found : (def ? *def : Value::none());
    if (name == "pop" && found) obj.erase(key->as_string());
    if (name == "pop" && !found && !def) return invalid_argument("pop(): key " + key->repr() + " not found");
    if (name == "setdefault" && !found && key->is_string()) obj.set(key->as_string(), result);
    return result;
  }
  if (name == "update") {
    for (const Value& other : args.positional) {
      if (!other.is_object()) return invalid_argument("update() argument must be a dict");
      for (const auto& [k, v] : other.as_object().entries()) obj.set(k, v);
    }
    for (const auto& [k, v] : args.keyword) obj.set(k, v);
    return Value::none();
  }
  return Value::object(obj);  // copy
}

Value bound_method(const Value& self, const std::string& name) {
  return Value::callable(name, [self, name](const CallArgs& args, Evaluator&) -> Result<Value> {
    if (self.is_string()) return string_method(self.as_string(), name, args);
    if (self.is_array()) return list_method(self, name, args);
    return dict_method(self, name, args);
  });
}

}  // namespace

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<uint32_t> cps = utf8_decode(s);
  std::vector<uint32_t> set;
  bool use_set = chars && chars->is_string();
  if (use_set) set = utf8_decode(chars->as_string());
  auto strip_it = [&](uint32_t c) { return use_set ? std::find(set.begin(), set.end(), c) != set.end() : is_ws(c); };
  size_t a = 0, b = cps.size();
  if (left) {
    while (a < b && strip_it(cps[a])) ++a;
  }
  if (right) {
    while (b > a && strip_it(cps[b - 1])) --b;
  }
  return utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<ptrdiff_t>(a), cps.begin() + static_cast<ptrdiff_t>(b)));
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `repl` before every character and at the end
    std::vector<uint32_t> cps = utf8_decode(s);
    int64_t n = 0;
    for (uint32_t c : cps) {
      if (out.size() > value_size_limit()) return out;  // over the limit: the evaluator reports it
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      utf8_append(out, c);
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while ((count < 0 || n < count) && out.size() <= value_size_limit()) {
    size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += repl;
    start = p + old.size();
    ++n;
  }
  out.append(s, start, std::string::npos);
  return out;
}

Result<std::string> py_percent_format(const std::string& fmt, const Array& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) return invalid_argument("incomplete format: '%' at the end");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    int precision = -1;
    if (fmt[i] == '.') {
      precision = 0;
      while (++i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') precision = precision * 10 + (fmt[i] - '0');
      if (i >= fmt.size()) return invalid_argument("incomplete format specifier");
    }
    if (next >= args.size()) return invalid_argument("not enough arguments for format string");
    const Value& v = args[next++];
    char conv = fmt[i];
    if (conv == 's') {
      out += v.to_str();
    } else if (conv == 'r') {
      out += v.repr();
    } else if (conv == 'd' || conv == 'i') {
      if (!v.is_number()) return invalid_argument(std::string("%d format: a real number is required, not ") + v.type_name());
      out += std::to_string(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int());
    } else if (conv == 'f') {
      if (!v.is_number()) return invalid_argument(std::string("%f format: a real number is required, not ") + v.type_name());
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.*f", precision < 0 ? 6 : std::min(precision, 30), v.as_double());
      out += buf;
    } else {
      return unsupported(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < args.size()) return invalid_argument("not all arguments converted during string formatting");
  return out;
}

std::string py_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string py_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::string out = py_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

Result<Array> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Array{};
    case Value::Kind::kArray: return v.items();
    case Value::Kind::kObject: {
      if (v.is_namespace()) return invalid_argument("'Namespace' object is not iterable");
      Array keys;
      for (const auto& [k, val] : v.as_object().entries()) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::kString: {
      Array chars;
      std::string cur;
      for (uint32_t cp : utf8_decode(v.as_string())) {
        cur.clear();
        utf8_append(cur, cp);
        chars.push_back(Value::string(cur));
      }
      return chars;
    }
    default:
      return invalid_argument(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

// Jinja2's wording: "'dict object' has no attribute 'x'".
static std::string no_attribute(const char* type, const std::string& name) {
  std::string msg = "'";
  msg.append(type).append(" object' has no attribute '").append(name).append("'");
  return msg;
}

Result<Value> get_attribute(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: {
      const std::string& hint = obj.undefined_hint();
      return invalid_argument(hint.empty() ? "'" + name + "' accessed on an undefined value" : hint);
    }
    case Value::Kind::kString:
      if (in_list(kStringMethods, name)) return bound_method(obj, name);
      break;
    case Value::Kind::kArray:
      if (in_list(kListMethods, name)) return bound_method(obj, name);
      break;
    case Value::Kind::kObject: {
      // Jinja2 tries getattr first, so dict methods win over keys of the same name.
      if (!obj.is_namespace() && in_list(kDictMethods, name)) return bound_method(obj, name);
      if (const Value* v = obj.as_object().find(name)) return *v;
      return Value::undefined(no_attribute(obj.is_namespace() ? "Namespace" : "dict", name));
    }
    default:
      break;
  }
  return Value::undefined(no_attribute(obj.type_name(), name));
}

Result<Value> get_item(const Value& obj, const Value& index) {
  if (obj.is_undefined()) return get_attribute(obj, index.to_str());
  if (obj.is_object()) {
    if (index.is_string()) {
      if (const Value* v = obj.as_object().find(index.as_string())) return *v;
      return get_attribute(obj, index.as_string());
    }
    return Value::undefined("'dict object' has no item " + index.repr());
  }
  if ((obj.is_array() || obj.is_string()) && index.is_number() && !index.is_float()) {
    int64_t i = index.as_int();
    if (obj.is_array()) {
      int64_t n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("list index " + std::to_string(index.as_int()) + " out of range");
      return obj.items()[static_cast<size_t>(i)];
    }
    std::vector<uint32_t> cps = utf8_decode(obj.as_string());
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("string index " + std::to_string(index.as_int()) + " out of range");
    std::string out;
    utf8_append(out, cps[static_cast<size_t>(i)]);
    return Value::string(std::move(out));
  }
  if (index.is_string()) return get_attribute(obj, index.as_string());
  return Value::undefined(std::string("'") + obj.type_name() + " object' has no item " + index.repr());
}

Result<Value> slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto as_index = [](const Value& v, const char* what) -> Result<std::optional<int64_t>> {
    if (v.is_none() || v.is_undefined()) return std::optional<int64_t>();
    if (!v.is_number() || v.is_float()) return invalid_argument(std::string("slice ") + what + " must be an integer");
    return std::optional<int64_t>(v.as_int());
  };
  FRUGAL_ASSIGN_OR_RETURN(std::optional<int64_t> a, as_index(start, "start"));
  FRUGAL_ASSIGN_OR_RETURN(std::optional<int64_t> b, as_index(stop, "stop"));
  FRUGAL_ASSIGN_OR_RETURN(std::optional<int64_t> c, as_index(step, "step"));
  int64_t st = c.value_or(1);
  if (st == 0) return invalid_argument("slice step cannot be zero");
  if (!obj.is_array() && !obj.is_string()) {
    if (obj.is_undefined()) return get_attribute(obj, "[:]");
    return invalid_argument(std::string("'") + obj.type_name() + "' object is not subscriptable");
  }
  std::vector<uint32_t> cps;
  if (obj.is_string()) cps = utf8_decode(obj.as_string());
  const int64_t n = obj.is_array() ? static_cast<int64_t>(obj.items().size()) : static_cast<int64_t>(cps.size());
  // Python's slice.indices() clamping.
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t lo = clamp(a, st > 0 ? 0 : n - 1);
  int64_t hi = clamp(b, st > 0 ? n : -1);
  Array items;
  std::vector<uint32_t> out_cps;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
    if (obj.is_array()) items.push_back(obj.items()[static_cast<size_t>(i)]);
    else out_cps.push_back(cps[static_cast<size_t>(i)]);
  }
  if (obj.is_array()) return Value::array(std::move(items));
  return Value::string(utf8_encode(out_cps));
}

}  // namespace frugal::jinja
