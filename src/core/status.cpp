#include "core/status.h"

namespace frugal {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfRange: return "out of range";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status invalid_argument(std::string msg) { return {ErrorCode::kInvalidArgument, std::move(msg)}; }
Status not_found(std::string msg) { return {ErrorCode::kNotFound, std::move(msg)}; }
Status corrupt(std::string msg) { return {ErrorCode::kCorrupt, std::move(msg)}; }
Status unsupported(std::string msg) { return {ErrorCode::kUnsupported, std::move(msg)}; }
Status out_of_range(std::string msg) { return {ErrorCode::kOutOfRange, std::move(msg)}; }
Status resource_exhausted(std::string msg) { return {ErrorCode::kResourceExhausted, std::move(msg)}; }
Status io_error(std::string msg) { return {ErrorCode::kIo, std::move(msg)}; }
Status internal_error(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "frugal: CHECK failed at %s:%d: %s%s%s\n", file, line, cond,
               msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace frugal
