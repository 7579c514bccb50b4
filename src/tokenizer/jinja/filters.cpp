// Builtin filters with Jinja2's signatures and defaults (tojson is the transformers override:
// ensure_ascii=False, key order kept).
#include <algorithm>
#include <cctype>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "tokenizer/jinja/evaluator.h"

namespace frugal::jinja {
namespace {

using FilterFn = Result<Value> (*)(Evaluator&, const Value&, const CallArgs&);

bool arg_bool(const CallArgs& a, const char* name, size_t pos, bool def) {
  const Value* v = a.get(name, pos);
  return v ? v->truthy() : def;
}

Status undefined_error(const Value& v) {
  return invalid_argument(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

// Jinja2's attribute getter: "a.b.0" walks dicts and lists, like environment.getitem.
Result<Value> get_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    Value key = digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(part);
    if (cur.is_undefined()) return cur;
    FRUGAL_ASSIGN_OR_RETURN(cur, get_item(cur, key));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Result<std::string> attribute_arg(const CallArgs& a, const char* name, size_t pos) {
  const Value* v = a.get(name, pos);
  if (!v || v->is_none()) return std::string();
  if (v->is_number() && !v->is_float()) return std::to_string(v->as_int());
  if (!v->is_string()) return invalid_argument(std::string("'") + name + "' must be a string");
  return v->as_string();
}

Result<Value> f_trim(Evaluator&, const Value& v, const CallArgs& a) {
  return Value::string(py_strip(v.to_str(), a.get("chars", 0), true, true));
}

Result<Value> f_tojson(Evaluator&, const Value& v, const CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = arg_bool(a, "ensure_ascii", 0, false);
  if (const Value* indent = a.get("indent", 1); indent && !indent->is_none()) {
    if (!indent->is_number() || indent->is_float()) return invalid_argument("tojson: indent must be an integer");
    o.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
  }
  if (const Value* sep = a.get("separators", 2); sep && !sep->is_none()) {
    if (!sep->is_array() || sep->items().size() != 2 || !sep->items()[0].is_string() || !sep->items()[1].is_string()) {
      return invalid_argument("tojson: separators must be a pair of strings");
    }
    o.item_separator = sep->items()[0].as_string();
    o.key_separator = sep->items()[1].as_string();
  }
  o.sort_keys = arg_bool(a, "sort_keys", 3, false);
  FRUGAL_ASSIGN_OR_RETURN(std::string s, to_json_string(v, o));
  return Value::string(std::move(s));
}

Result<Value> f_length(Evaluator&, const Value& v, const CallArgs&) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value::integer(0);
    case Value::Kind::kString: return Value::integer(static_cast<int64_t>(utf8_length(v.as_string())));
    case Value::Kind::kArray: return Value::integer(static_cast<int64_t>(v.items().size()));
    case Value::Kind::kObject: return Value::integer(static_cast<int64_t>(v.as_object().size()));
    default: return invalid_argument(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

Result<Value> f_default(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* def = a.get("default_value", 0);
  bool boolean = arg_bool(a, "boolean", 1, false);
  if (v.is_undefined() || (boolean && !v.truthy())) return def ? *def : Value::string("");
  return v;
}

Result<Value> f_upper(Evaluator&, const Value& v, const CallArgs&) { return Value::string(py_upper(v.to_str())); }
Result<Value> f_lower(Evaluator&, const Value& v, const CallArgs&) { return Value::string(py_lower(v.to_str())); }
Result<Value> f_capitalize(Evaluator&, const Value& v, const CallArgs&) {
  return Value::string(py_capitalize(v.to_str()));
}

// Jinja2's title filter: words start after whitespace, '-', '(', '{', '[' or '<'.
Result<Value> f_title(Evaluator&, const Value& v, const CallArgs&) {
  std::string s = v.to_str();
  bool at_start = true;
  for (char& c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    bool sep = std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      at_start = true;
      continue;
    }
    c = static_cast<char>(at_start ? std::toupper(u) : std::tolower(u));
    at_start = false;
  }
  return Value::string(std::move(s));
}

Result<Value> f_replace(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* old = a.get("old", 0);
  const Value* repl = a.get("new", 1);
  if (!old || !repl) return invalid_argument("replace filter needs (old, new)");
  const Value* count = a.get("count", 2);
  int64_t n = count && count->is_number() ? count->as_int() : -1;
  return Value::string(py_replace(v.to_str(), old->to_str(), repl->to_str(), n));
}

Result<Value> f_join(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* sep = a.get("d", 0);
  FRUGAL_ASSIGN_OR_RETURN(std::string attr, attribute_arg(a, "attribute", 1));
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (out.size() > value_size_limit()) {
      return resource_exhausted("join: result exceeds " + std::to_string(value_size_limit()) + " bytes");
    }
    if (i && sep) out += sep->to_str();
    if (attr.empty()) {
      out += items[i].to_str();
    } else {
      FRUGAL_ASSIGN_OR_RETURN(Value x, get_path(items[i], attr));
      out += x.to_str();
    }
  }
  return Value::string(std::move(out));
}

Result<Value> f_first(Evaluator&, const Value& v, const CallArgs&) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> f_last(Evaluator&, const Value& v, const CallArgs&) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> f_list(Evaluator&, const Value& v, const CallArgs&) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  return Value::array(std::move(items));
}

Result<Value> f_string(Evaluator&, const Value& v, const CallArgs&) { return Value::string(v.to_str()); }
Result<Value> f_safe(Evaluator&, const Value& v, const CallArgs&) { return v; }

Result<Value> f_int(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* def = a.get("default", 0);
  Value fallback = def ? *def : Value::integer(0);
  if (v.is_float()) return std::isfinite(v.as_double()) ? Value::integer(static_cast<int64_t>(v.as_double())) : fallback;
  if (v.is_number()) return Value::integer(v.as_int());
  if (!v.is_string()) return fallback;
  const Value* base = a.get("base", 1);
  std::string s = py_strip(v.as_string(), nullptr, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  char* end = nullptr;
  int b = base && base->is_number() ? static_cast<int>(base->as_int()) : 10;
  long long x = std::strtoll(s.c_str(), &end, b);
  if (!s.empty() && end && *end == '\0') return Value::integer(x);
  double d = std::strtod(s.c_str(), &end);  // Jinja2 falls back to int(float(value))
  if (!s.empty() && end && *end == '\0' && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
  return fallback;
}

Result<Value> f_float(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* def = a.get("default", 0);
  Value fallback = def ? *def : Value::floating(0.0);
  if (v.is_number()) return Value::floating(v.as_double());
  if (!v.is_string()) return fallback;
  std::string s = py_strip(v.as_string(), nullptr, true, true);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (!s.empty() && end && *end == '\0') return Value::floating(d);
  return fallback;
}

Result<Value> f_items(Evaluator&, const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::array();
  if (!v.is_object()) return invalid_argument(std::string("items filter needs a mapping, got ") + v.type_name());
  Array out;
  for (const auto& [k, val] : v.as_object().entries()) out.push_back(Value::tuple({Value::string(k), val}));
  return Value::array(std::move(out));
}

// select/reject/selectattr/rejectattr share one body: optional attribute, optional test + args.
Result<Value> select_impl(Evaluator& ev, const Value& v, const CallArgs& a, bool by_attr, bool keep_when) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty()) return invalid_argument("selectattr/rejectattr need an attribute name");
    FRUGAL_ASSIGN_OR_RETURN(attr, attribute_arg(a, "attribute", 0));
    next = 1;
  }
  std::string test;
  CallArgs test_args;
  if (a.positional.size() > next) {
    if (!a.positional[next].is_string()) return invalid_argument("select: test name must be a string");
    test = a.positional[next].as_string();
    if (!has_test(test)) return unsupported("unknown test '" + test + "'");
    test_args.positional.assign(a.positional.begin() + static_cast<ptrdiff_t>(next) + 1, a.positional.end());
  }
  FRUGAL_RETURN_IF_ERROR(ev.charge_iterations(static_cast<int64_t>(items.size())));
  Array out;
  for (const Value& item : items) {
    Value x = item;
    if (by_attr) {
      FRUGAL_ASSIGN_OR_RETURN(x, get_path(item, attr));
    }
    bool pass = x.truthy();
    if (!test.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(pass, apply_test(ev, test, x, test_args));
    }
    if (pass == keep_when) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Result<Value> f_select(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, false, true); }
Result<Value> f_reject(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, false, false); }
Result<Value> f_selectattr(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, true, true); }
Result<Value> f_rejectattr(Evaluator& ev, const Value& v, const CallArgs& a) { return select_impl(ev, v, a, true, false); }

Result<Value> f_map(Evaluator& ev, const Value& v, const CallArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  FRUGAL_RETURN_IF_ERROR(ev.charge_iterations(static_cast<int64_t>(items.size())));
  Array out;
  if (const Value* attr = a.get("attribute", 99)) {
    FRUGAL_ASSIGN_OR_RETURN(std::string path, attribute_arg(a, "attribute", 99));
    const Value* def = a.get("default", 99);
    for (const Value& item : items) {
      FRUGAL_ASSIGN_OR_RETURN(Value x, get_path(item, path));
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    (void)attr;
    return Value::array(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string()) return invalid_argument("map needs a filter name or attribute=");
  const std::string& filter = a.positional[0].as_string();
  if (!has_filter(filter)) return unsupported("unknown filter '" + filter + "'");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : items) {
    FRUGAL_ASSIGN_OR_RETURN(Value x, apply_filter(ev, filter, item, rest));
    out.push_back(std::move(x));
  }
  return Value::array(std::move(out));
}

// Sort key: optional attribute, strings lower-cased unless case_sensitive (Jinja2's default).
Result<Value> sort_key(const Value& item, const std::string& attr, bool case_sensitive) {
  Value x = item;
  if (!attr.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(x, get_path(item, attr));
  }
  if (!case_sensitive && x.is_string()) return Value::string(py_lower(x.as_string()));
  return x;
}

Result<Array> sorted(Array items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status err;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    Result<bool> lt = reverse ? values_less(keys[y], keys[x]) : values_less(keys[x], keys[y]);
    if (!lt.is_ok()) {
      if (err.is_ok()) err = lt.status();
      return false;
    }
    return *lt;
  });
  FRUGAL_RETURN_IF_ERROR(err);
  Array out;
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

Result<Value> f_sort(Evaluator& ev, const Value& v, const CallArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  FRUGAL_RETURN_IF_ERROR(ev.charge_iterations(static_cast<int64_t>(items.size())));
  FRUGAL_ASSIGN_OR_RETURN(std::string attr, attribute_arg(a, "attribute", 2));
  bool case_sensitive = arg_bool(a, "case_sensitive", 1, false);
  std::vector<Value> keys;
  for (const Value& item : items) {
    FRUGAL_ASSIGN_OR_RETURN(Value k, sort_key(item, attr, case_sensitive));
    keys.push_back(std::move(k));
  }
  FRUGAL_ASSIGN_OR_RETURN(Array out, sorted(std::move(items), std::move(keys), arg_bool(a, "reverse", 0, false)));
  return Value::array(std::move(out));
}

Result<Value> f_dictsort(Evaluator&, const Value& v, const CallArgs& a) {
  if (!v.is_object()) return invalid_argument(std::string("dictsort needs a mapping, got ") + v.type_name());
  bool case_sensitive = arg_bool(a, "case_sensitive", 0, false);
  const Value* by = a.get("by", 1);
  bool by_value = by && by->is_string() && by->as_string() == "value";
  Array items;
  std::vector<Value> keys;
  for (const auto& [k, val] : v.as_object().entries()) {
    items.push_back(Value::tuple({Value::string(k), val}));
    FRUGAL_ASSIGN_OR_RETURN(Value key, sort_key(by_value ? val : Value::string(k), "", case_sensitive));
    keys.push_back(std::move(key));
  }
  FRUGAL_ASSIGN_OR_RETURN(Array out, sorted(std::move(items), std::move(keys), arg_bool(a, "reverse", 2, false)));
  return Value::array(std::move(out));
}

Result<Value> f_unique(Evaluator& ev, const Value& v, const CallArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  FRUGAL_RETURN_IF_ERROR(ev.charge_iterations(static_cast<int64_t>(items.size())));
  bool case_sensitive = arg_bool(a, "case_sensitive", 0, false);
  FRUGAL_ASSIGN_OR_RETURN(std::string attr, attribute_arg(a, "attribute", 1));
  Array out;
  std::vector<Value> seen;
  for (const Value& item : items) {
    FRUGAL_ASSIGN_OR_RETURN(Value key, sort_key(item, attr, case_sensitive));
    bool dup = std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); });
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::array(std::move(out));
}

Result<Value> f_reverse(Evaluator&, const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::vector<uint32_t> cps = utf8_decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  std::reverse(items.begin(), items.end());
  return Value::array(std::move(items));
}

Result<Value> f_escape(Evaluator&, const Value& v, const CallArgs&) {
  std::string out;
  for (char c : v.to_str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::string(std::move(out));
}

Result<Value> f_indent(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* width = a.get("width", 0);
  const int64_t pad_width = width && width->is_number() ? std::max<int64_t>(0, width->as_int()) : 4;
  if (static_cast<uint64_t>(pad_width) > value_size_limit()) {
    return resource_exhausted("indent: width " + std::to_string(pad_width) + " exceeds " +
                              std::to_string(value_size_limit()) + " bytes");
  }
  std::string pad = width && width->is_string() ? width->as_string() : std::string(static_cast<size_t>(pad_width), ' ');
  bool first = arg_bool(a, "first", 1, false);
  bool blank = arg_bool(a, "blank", 2, false);
  std::vector<std::string> lines;
  {
    std::string s = v.to_str() + "\n";  // Jinja2 appends a newline before splitlines()
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.push_back(s.substr(start, i - start));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
  }
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    if (out.size() > value_size_limit()) {
      return resource_exhausted("indent: result exceeds " + std::to_string(value_size_limit()) + " bytes");
    }
    out += "\n";
    if (blank || !lines[i].empty()) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  return Value::string(std::move(out));
}

Result<Value> f_abs(Evaluator&, const Value& v, const CallArgs&) {
  if (v.is_float()) return Value::floating(std::fabs(v.as_double()));
  if (v.is_number()) return Value::integer(std::llabs(v.as_int()));
  return invalid_argument(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Result<Value> f_round(Evaluator&, const Value& v, const CallArgs& a) {
  if (!v.is_number()) return invalid_argument(std::string("round filter needs a number, got ") + v.type_name());
  const Value* prec = a.get("precision", 0);
  int64_t p = prec && prec->is_number() ? prec->as_int() : 0;
  const Value* method = a.get("method", 1);
  std::string m = method && method->is_string() ? method->as_string() : "common";
  double scale = std::pow(10.0, static_cast<double>(p));
  double x = v.as_double() * scale;
  if (m == "common") {
    if (!v.is_float()) return Value::integer(v.as_int());  // Python round(int, n) stays an int
    std::fesetround(FE_TONEAREST);  // Python rounds halves to even
    return Value::floating(std::nearbyint(x) / scale);
  }
  if (m == "ceil") return Value::floating(std::ceil(x) / scale);
  if (m == "floor") return Value::floating(std::floor(x) / scale);
  return invalid_argument("round: method must be 'common', 'ceil' or 'floor'");
}

Result<Value> f_batch(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* n = a.get("linecount", 0);
  if (!n || !n->is_number() || n->as_int() <= 0) return invalid_argument("batch needs a positive line count");
  const Value* fill = a.get("fill_with", 1);
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  size_t size = static_cast<size_t>(n->as_int());
  Array out;
  for (size_t i = 0; i < items.size(); i += size) {
    Array chunk(items.begin() + static_cast<ptrdiff_t>(i), items.begin() + static_cast<ptrdiff_t>(std::min(items.size(), i + size)));
    if (fill && !fill->is_none()) {
      while (chunk.size() < size) chunk.push_back(*fill);
    }
    out.push_back(Value::array(std::move(chunk)));
  }
  return Value::array(std::move(out));
}

Result<Value> f_sum(Evaluator&, const Value& v, const CallArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  FRUGAL_ASSIGN_OR_RETURN(std::string attr, attribute_arg(a, "attribute", 0));
  const Value* start = a.get("start", 1);
  Value total = start ? *start : Value::integer(0);
  for (const Value& item : items) {
    Value x = item;
    if (!attr.empty()) {
      FRUGAL_ASSIGN_OR_RETURN(x, get_path(item, attr));
    }
    if (!x.is_number() || !total.is_number()) return invalid_argument("sum: items must be numbers");
    total = (x.is_float() || total.is_float()) ? Value::floating(total.as_double() + x.as_double())
                                               : Value::integer(total.as_int() + x.as_int());
  }
  return total;
}

Result<Value> min_max(const Value& v, const CallArgs& a, bool want_max) {
  FRUGAL_ASSIGN_OR_RETURN(Array items, iterate(v));
  if (items.empty()) return Value::undefined(std::string("No ") + (want_max ? "largest" : "smallest") + " item, sequence was empty.");
  bool case_sensitive = arg_bool(a, "case_sensitive", 0, false);
  FRUGAL_ASSIGN_OR_RETURN(std::string attr, attribute_arg(a, "attribute", 1));
  size_t best = 0;
  FRUGAL_ASSIGN_OR_RETURN(Value best_key, sort_key(items[0], attr, case_sensitive));
  for (size_t i = 1; i < items.size(); ++i) {
    FRUGAL_ASSIGN_OR_RETURN(Value k, sort_key(items[i], attr, case_sensitive));
    FRUGAL_ASSIGN_OR_RETURN(bool better, want_max ? values_less(best_key, k) : values_less(k, best_key));
    if (better) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}
Result<Value> f_min(Evaluator&, const Value& v, const CallArgs& a) { return min_max(v, a, false); }
Result<Value> f_max(Evaluator&, const Value& v, const CallArgs& a) { return min_max(v, a, true); }

Result<Value> f_attr(Evaluator&, const Value& v, const CallArgs& a) {
  const Value* name = a.get("name", 0);
  if (!name || !name->is_string()) return invalid_argument("attr needs an attribute name");
  return get_attribute(v, name->as_string());
}

Result<Value> f_wordcount(Evaluator&, const Value& v, const CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : v.to_str()) {
    bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (static_cast<unsigned char>(c) & 0x80);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Result<Value> f_format(Evaluator&, const Value& v, const CallArgs& a) {
  if (!a.keyword.empty()) return unsupported("format filter with keyword arguments");
  FRUGAL_ASSIGN_OR_RETURN(std::string s, py_percent_format(v.to_str(), a.positional));
  return Value::string(std::move(s));
}

const std::unordered_map<std::string, FilterFn>& filter_table() {
  static const std::unordered_map<std::string, FilterFn> kFilters = {
      {"trim", f_trim},         {"tojson", f_tojson},       {"length", f_length},     {"count", f_length},
      {"default", f_default},   {"d", f_default},           {"upper", f_upper},       {"lower", f_lower},
      {"capitalize", f_capitalize}, {"title", f_title},     {"replace", f_replace},   {"join", f_join},
      {"first", f_first},       {"last", f_last},           {"list", f_list},         {"string", f_string},
      {"int", f_int},           {"float", f_float},         {"items", f_items},       {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}, {"map", f_map},         {"select", f_select},     {"reject", f_reject},
      {"unique", f_unique},     {"safe", f_safe},           {"escape", f_escape},     {"e", f_escape},
      {"forceescape", f_escape}, {"indent", f_indent},      {"abs", f_abs},           {"round", f_round},
      {"sort", f_sort},         {"dictsort", f_dictsort},   {"reverse", f_reverse},   {"batch", f_batch},
      {"sum", f_sum},           {"min", f_min},             {"max", f_max},           {"attr", f_attr},
      {"wordcount", f_wordcount}, {"format", f_format},
  };
  return kFilters;
}

}  // namespace

bool has_filter(const std::string& name) { return filter_table().count(name) != 0; }

Result<Value> apply_filter(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args) {
  auto it = filter_table().find(name);
  if (it == filter_table().end()) return unsupported("unknown filter '" + name + "'");
  // Jinja2's default Undefined fails in filters that need a value; these accept it.
  static const char* const kUndefinedOk[] = {"default", "d", "length", "count", "list", "first", "last", "join",
                                             "items", "string", "safe", "select", "reject", "selectattr",
                                             "rejectattr", "map", "unique", "sort", "trim", "upper", "lower",
                                             "escape", "e", "int", "float"};
  if (input.is_undefined() &&
      std::none_of(std::begin(kUndefinedOk), std::end(kUndefinedOk), [&](const char* n) { return name == n; })) {
    return undefined_error(input);
  }
  return it->second(ev, input, args);
}

}  // namespace frugal::jinja
