// Typed field access on tokenizer.json objects with errors that name the field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace frugal::tok {

using nlohmann::json;

// A member by reference (no copy), or a null value when absent or `j` is not an object.
inline const json& json_field(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

inline Result<std::string> json_string(const json& j, const char* key, const std::string& path) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
    return corrupt(path + "." + key + ": expected a string");
  }
  return j[key].get<std::string>();
}

// An optional boolean: absent or null gives `fallback`.
inline Result<bool> json_bool(const json& j, const char* key, bool fallback, const std::string& path) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) return corrupt(path + "." + key + ": expected true or false");
  return j[key].get<bool>();
}

inline Result<size_t> json_uint(const json& j, const char* key, size_t fallback, const std::string& path) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_unsigned()) return corrupt(path + "." + key + ": expected a non-negative integer");
  return j[key].get<size_t>();
}

inline Result<std::string> json_type(const json& j, const std::string& path) {
  if (!j.is_object()) return corrupt(path + ": expected an object");
  return json_string(j, "type", path);
}

}  // namespace frugal::tok
