#include "server/openai_errors.h"

namespace frugal::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) e["param"] = *param;
  if (code) e["code"] = *code;
  return {{"error", e}};
}

std::string ApiError::body() const {
  return to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError bad_request(std::string message, std::optional<std::string> param, std::optional<std::string> code) {
  return ApiError{.status = 400, .message = std::move(message), .param = std::move(param),
                  .code = std::move(code)};
}

ApiError not_found_error(std::string message, std::optional<std::string> code) {
  return ApiError{.status = 404, .message = std::move(message), .code = std::move(code)};
}

ApiError server_error(std::string message) {
  return ApiError{.status = 500, .message = std::move(message), .type = "server_error"};
}

ApiError from_status(const Status& st) {
  switch (st.code()) {
    case ErrorCode::kResourceExhausted:
      return ApiError{.status = 429, .message = "The server is busy: " + st.message(),
                      .type = "rate_limit_error", .code = "rate_limit_exceeded"};
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kOutOfRange:
      return bad_request(st.message());
    case ErrorCode::kOk:
    case ErrorCode::kNotFound:
    case ErrorCode::kCorrupt:
    case ErrorCode::kUnsupported:
    case ErrorCode::kIo:
    case ErrorCode::kInternal:
    case ErrorCode::kCancelled:
      break;
  }
  return server_error(st.to_string());
}

}  // namespace frugal::server
