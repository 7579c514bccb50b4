// OpenAI error objects: {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace frugal::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;  // the request field at fault, when there is one
  std::optional<std::string> code;

  nlohmann::json to_json() const;
  std::string body() const;  // to_json().dump()
};

// 400 invalid_request_error naming the parameter.
ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt,
                     std::optional<std::string> code = std::nullopt);
ApiError not_found_error(std::string message, std::optional<std::string> code = std::nullopt);
ApiError server_error(std::string message);
// Maps an engine Status (submit errors) onto the status and type clients expect:
// kResourceExhausted -> 429, kInvalidArgument/kOutOfRange -> 400, others -> 500.
ApiError from_status(const Status& st);

}  // namespace frugal::server
