#pragma once
// Status and Result: how every module reports an expected failure. No exception crosses a module
// boundary; adapters around third-party code catch and convert. A Code maps to one HTTP status in
// api/http_errors.cc and nowhere else.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace allot {

enum class Code {
  kOk,
  kInvalidArgument,     // bad input: 400
  kNotFound,            // unknown id, or not visible to the caller: 404
  kAlreadyExists,       // 409
  kFailedPrecondition,  // the object is in the wrong state for this: 409
  kUnauthenticated,     // 401
  kPermissionDenied,    // 403
  kTooLarge,            // 413
  kUnavailable,         // a peer or the disk is not there right now: 503
  kInternal,            // a broken invariant: 500
};

const char* codeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg, std::string field = {}) {
    Status s(Code::kInvalidArgument, std::move(msg));
    s.field_ = std::move(field);
    return s;
  }
  static Status NotFound(std::string msg, std::string field = {}) {
    Status s(Code::kNotFound, std::move(msg));
    s.field_ = std::move(field);
    return s;
  }
  static Status AlreadyExists(std::string msg) {
    return Status(Code::kAlreadyExists, std::move(msg));
  }
  static Status FailedPrecondition(std::string msg) {
    return Status(Code::kFailedPrecondition, std::move(msg));
  }
  static Status Unauthenticated(std::string msg) {
    return Status(Code::kUnauthenticated, std::move(msg));
  }
  static Status PermissionDenied(std::string msg) {
    return Status(Code::kPermissionDenied, std::move(msg));
  }
  static Status TooLarge(std::string msg, std::string field = {}) {
    Status s(Code::kTooLarge, std::move(msg));
    s.field_ = std::move(field);
    return s;
  }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The request field that was wrong, when the error is about one ("gpus", "command[0]").
  const std::string& field() const { return field_; }

  // Adds context as the error travels up: "failed to open store: " + inner message.
  Status withContext(const std::string& context) const {
    Status s = *this;
    s.message_ = context + ": " + message_;
    return s;
  }
  std::string toString() const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
  std::string field_;
};

// Result<T>: a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace allot

#define ALLOT_RETURN_IF_ERROR(expr) \
  do {                              \
    ::allot::Status _st = (expr);   \
    if (!_st.ok()) return _st;      \
  } while (0)
