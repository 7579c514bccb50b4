#include "tokenizer/gguf_vocab.h"

#include <cstring>

namespace frugal::tok {

namespace {

enum GgufType : uint32_t {
  kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64, kTypeCount
};

size_t scalar_size(uint32_t t) {
  switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, const std::string& name) : p_(p), n_(n), name_(name) {}
  size_t left() const { return n_ - off_; }
  size_t offset() const { return off_; }
  Status need(size_t k, const char* what) const {
    if (k > left()) {
      return corrupt(name_ + ": truncated at byte " + std::to_string(off_) + " reading " + what + " (" +
                     std::to_string(k) + " bytes needed, " + std::to_string(left()) + " left)");
    }
    return Status::ok();
  }
  template <typename T>
  Result<T> read(const char* what) {
    FRUGAL_RETURN_IF_ERROR(need(sizeof(T), what));
    T v;
    std::memcpy(&v, p_ + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  Result<std::string> read_string(const char* what) {
    FRUGAL_ASSIGN_OR_RETURN(uint64_t len, read<uint64_t>(what));
    FRUGAL_RETURN_IF_ERROR(need(len, what));
    std::string s(reinterpret_cast<const char*>(p_ + off_), len);
    off_ += len;
    return s;
  }
  Status skip(size_t k, const char* what) {
    FRUGAL_RETURN_IF_ERROR(need(k, what));
    off_ += k;
    return Status::ok();
  }

 private:
  const uint8_t* p_;
  size_t n_, off_ = 0;
  const std::string& name_;
};

// Reads one scalar of type t, widened.
Result<GgufValue> read_scalar(Cursor& c, uint32_t t) {
  GgufValue v;
  switch (t) {
    case kU8: { FRUGAL_ASSIGN_OR_RETURN(uint8_t x, c.read<uint8_t>("u8")); v.v = uint64_t{x}; break; }
    case kI8: { FRUGAL_ASSIGN_OR_RETURN(int8_t x, c.read<int8_t>("i8")); v.v = int64_t{x}; break; }
    case kU16: { FRUGAL_ASSIGN_OR_RETURN(uint16_t x, c.read<uint16_t>("u16")); v.v = uint64_t{x}; break; }
    case kI16: { FRUGAL_ASSIGN_OR_RETURN(int16_t x, c.read<int16_t>("i16")); v.v = int64_t{x}; break; }
    case kU32: { FRUGAL_ASSIGN_OR_RETURN(uint32_t x, c.read<uint32_t>("u32")); v.v = uint64_t{x}; break; }
    case kI32: { FRUGAL_ASSIGN_OR_RETURN(int32_t x, c.read<int32_t>("i32")); v.v = int64_t{x}; break; }
    case kF32: { FRUGAL_ASSIGN_OR_RETURN(float x, c.read<float>("f32")); v.v = double{x}; break; }
    case kBool: { FRUGAL_ASSIGN_OR_RETURN(uint8_t x, c.read<uint8_t>("bool")); v.v = x != 0; break; }
    case kU64: { FRUGAL_ASSIGN_OR_RETURN(uint64_t x, c.read<uint64_t>("u64")); v.v = x; break; }
    case kI64: { FRUGAL_ASSIGN_OR_RETURN(int64_t x, c.read<int64_t>("i64")); v.v = x; break; }
    case kF64: { FRUGAL_ASSIGN_OR_RETURN(double x, c.read<double>("f64")); v.v = x; break; }
    case kString: { FRUGAL_ASSIGN_OR_RETURN(std::string s, c.read_string("string")); v.v = std::move(s); break; }
    default: return corrupt("unknown value type " + std::to_string(t));
  }
  return v;
}

Result<GgufValue> read_array(Cursor& c, bool keep) {
  FRUGAL_ASSIGN_OR_RETURN(uint32_t t, c.read<uint32_t>("array type"));
  FRUGAL_ASSIGN_OR_RETURN(uint64_t n, c.read<uint64_t>("array length"));
  if (t == kArray || t >= kTypeCount) return corrupt("array of unsupported element type " + std::to_string(t));
  // Every element takes at least one byte (strings: 8), so n is bounded by what is left.
  const size_t min_elem = t == kString ? 8 : scalar_size(t);
  if (n > c.left() / min_elem) {
    return corrupt("array length " + std::to_string(n) + " exceeds the " + std::to_string(c.left()) + " bytes left");
  }
  GgufValue out;
  if (!keep && t != kString) {
    FRUGAL_RETURN_IF_ERROR(c.skip(n * scalar_size(t), "array"));
    return out;
  }
  if (t == kString) {
    std::vector<std::string> v;
    if (keep) v.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      FRUGAL_ASSIGN_OR_RETURN(std::string s, c.read_string("array string"));
      if (keep) v.push_back(std::move(s));
    }
    out.v = std::move(v);
  } else if (t == kF32 || t == kF64) {
    std::vector<double> v(n);
    for (uint64_t i = 0; i < n; ++i) {
      FRUGAL_ASSIGN_OR_RETURN(GgufValue e, read_scalar(c, t));
      v[i] = std::get<double>(e.v);
    }
    out.v = std::move(v);
  } else {
    std::vector<int64_t> v(n);
    for (uint64_t i = 0; i < n; ++i) {
      FRUGAL_ASSIGN_OR_RETURN(GgufValue e, read_scalar(c, t));
      v[i] = std::holds_alternative<int64_t>(e.v) ? std::get<int64_t>(e.v)
             : std::holds_alternative<bool>(e.v)  ? int64_t{std::get<bool>(e.v)}
                                                  : static_cast<int64_t>(std::get<uint64_t>(e.v));
    }
    out.v = std::move(v);
  }
  return out;
}

}  // namespace

Result<GgufKv> GgufKv::parse(const uint8_t* data, size_t size, const std::string& name) {
  GgufKv kv;
  kv.name_ = name;
  Cursor c(data, size, kv.name_);
  FRUGAL_RETURN_IF_ERROR(c.need(4, "magic"));
  if (std::memcmp(data, "GGUF", 4) != 0) return corrupt(name + ": not a GGUF file (magic is not \"GGUF\")");
  FRUGAL_RETURN_IF_ERROR(c.skip(4, "magic"));
  FRUGAL_ASSIGN_OR_RETURN(kv.version_, c.read<uint32_t>("version"));
  if (kv.version_ != 2 && kv.version_ != 3) {
    return unsupported(name + ": GGUF version " + std::to_string(kv.version_) + " (expected 2 or 3)");
  }
  FRUGAL_ASSIGN_OR_RETURN(uint64_t n_tensors, c.read<uint64_t>("tensor count"));
  (void)n_tensors;
  FRUGAL_ASSIGN_OR_RETURN(uint64_t n_kv, c.read<uint64_t>("kv count"));
  if (n_kv > c.left() / 12) return corrupt(name + ": kv count " + std::to_string(n_kv) + " is larger than the file");
  for (uint64_t i = 0; i < n_kv; ++i) {
    auto r = [&]() -> Status {
      FRUGAL_ASSIGN_OR_RETURN(std::string key, c.read_string("key"));
      FRUGAL_ASSIGN_OR_RETURN(uint32_t t, c.read<uint32_t>("value type"));
      const bool keep = key.rfind("tokenizer.", 0) == 0;
      GgufValue v;
      if (t == kArray) {
        FRUGAL_ASSIGN_OR_RETURN(v, read_array(c, keep));
      } else {
        FRUGAL_ASSIGN_OR_RETURN(v, read_scalar(c, t));
      }
      if (keep) kv.kv_[key] = std::move(v);
      return Status::ok();
    }();
    if (!r.is_ok()) return r.with_context(name + ": kv " + std::to_string(i));
  }
  return kv;
}

Result<std::string> GgufKv::get_string(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return not_found(name_ + ": key " + key + " is missing");
  if (auto* s = std::get_if<std::string>(&it->second.v)) return *s;
  return corrupt(name_ + ": " + key + ": expected a string");
}

Result<int64_t> GgufKv::get_int(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return not_found(name_ + ": key " + key + " is missing");
  if (auto* i = std::get_if<int64_t>(&it->second.v)) return *i;
  if (auto* u = std::get_if<uint64_t>(&it->second.v)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) return corrupt(name_ + ": " + key + ": value too large");
    return static_cast<int64_t>(*u);
  }
  return corrupt(name_ + ": " + key + ": expected an integer");
}

Result<bool> GgufKv::get_bool(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return not_found(name_ + ": key " + key + " is missing");
  if (auto* b = std::get_if<bool>(&it->second.v)) return *b;
  return corrupt(name_ + ": " + key + ": expected a bool");
}

Result<std::vector<std::string>> GgufKv::get_strings(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return not_found(name_ + ": key " + key + " is missing");
  if (auto* s = std::get_if<std::vector<std::string>>(&it->second.v)) return *s;
  return corrupt(name_ + ": " + key + ": expected an array of strings");
}

Result<std::vector<int64_t>> GgufKv::get_ints(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return not_found(name_ + ": key " + key + " is missing");
  if (auto* s = std::get_if<std::vector<int64_t>>(&it->second.v)) return *s;
  return corrupt(name_ + ": " + key + ": expected an array of integers");
}

Result<std::vector<double>> GgufKv::get_floats(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return not_found(name_ + ": key " + key + " is missing");
  if (auto* s = std::get_if<std::vector<double>>(&it->second.v)) return *s;
  return corrupt(name_ + ": " + key + ": expected an array of floats");
}

}  // namespace frugal::tok
