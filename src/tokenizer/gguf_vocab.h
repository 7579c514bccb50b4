// Reader for the key/value header of a GGUF file (v2/v3), enough to build a tokenizer from its
// tokenizer.ggml.* keys. Every length and count is checked against the bytes that remain, so a
// truncated or hostile file is an error, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"

namespace frugal::tok {

struct GgufValue {
  // Scalars widen to int64/uint64/double; arrays keep strings or numbers (as double/int64).
  std::variant<std::monostate, int64_t, uint64_t, double, bool, std::string, std::vector<std::string>,
               std::vector<int64_t>, std::vector<double>>
      v;
};

class GgufKv {
 public:
  // `name` is used in errors. Only tokenizer.* keys are stored; the rest are skipped.
  static Result<GgufKv> parse(const uint8_t* data, size_t size, const std::string& name);

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  Result<std::string> get_string(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;
  Result<bool> get_bool(const std::string& key) const;
  Result<std::vector<std::string>> get_strings(const std::string& key) const;
  Result<std::vector<int64_t>> get_ints(const std::string& key) const;
  Result<std::vector<double>> get_floats(const std::string& key) const;
  uint32_t version() const { return version_; }

 private:
  std::string name_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> kv_;
};

}  // namespace frugal::tok
