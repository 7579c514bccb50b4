// Status and Result<T>: errors for I/O and user input. Messages name the file, field or
// parameter and what was expected. FRUGAL_CHECK is for broken invariants only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace frugal {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: flags, requests, configs
  kNotFound,         // missing file, tensor, token
  kCorrupt,          // malformed file contents
  kUnsupported,      // valid input we do not implement (dtype, arch, feature)
  kOutOfRange,
  kResourceExhausted,
  kIo,
  kInternal,
  kCancelled,
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>" for logs and CLI output.
  std::string to_string() const;
  // Prefixes context ("loading model.safetensors: ") to an error; no-op on ok.
  Status with_context(const std::string& context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

Status invalid_argument(std::string msg);
Status not_found(std::string msg);
Status corrupt(std::string msg);
Status unsupported(std::string msg);
Status out_of_range(std::string msg);
Status resource_exhausted(std::string msg);
Status io_error(std::string msg);
Status internal_error(std::string msg);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {      // NOLINT(implicit)
    if (std::get<Status>(v_).is_ok()) v_ = Status(ErrorCode::kInternal, "Result built from ok Status");
  }

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<1>(v_);
  }
  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check() const {
    if (!is_ok()) {
      std::fprintf(stderr, "frugal: Result::value() on error: %s\n", std::get<1>(v_).to_string().c_str());
      std::abort();
    }
  }
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace frugal

#define FRUGAL_CONCAT_INNER(a, b) a##b
#define FRUGAL_CONCAT(a, b) FRUGAL_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is an error.
#define FRUGAL_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::frugal::Status _frugal_st = (expr);             \
    if (!_frugal_st.is_ok()) return _frugal_st;       \
  } while (0)

#define FRUGAL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

// FRUGAL_ASSIGN_OR_RETURN(auto x, make_x()); returns the error Status on failure.
#define FRUGAL_ASSIGN_OR_RETURN(lhs, expr) \
  FRUGAL_ASSIGN_OR_RETURN_IMPL(FRUGAL_CONCAT(_frugal_r_, __LINE__), lhs, expr)

// Aborts with context when an invariant is broken (never for user input).
#define FRUGAL_CHECK(cond)                                                      \
  do {                                                                          \
    if (!(cond)) ::frugal::check_failed(__FILE__, __LINE__, #cond, "");         \
  } while (0)
#define FRUGAL_CHECK_MSG(cond, msg)                                             \
  do {                                                                          \
    if (!(cond)) ::frugal::check_failed(__FILE__, __LINE__, #cond, (msg));      \
  } while (0)
