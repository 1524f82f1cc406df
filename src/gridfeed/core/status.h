// Status and Result<T>: recoverable errors as values.
//
// Codes follow abseil's vocabulary so a message's code tells the kind of failure:
// kInvalidArgument (bad config or flag), kNotFound (missing file), kDataLoss (corrupt file),
// kFailedPrecondition (state that does not fit), kIoError (the OS refused), kAborted (a peer
// failed), kInternal (a bug that was caught). Thread safety: values, no shared state.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gridfeed {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kDataLoss = 3,
  kFailedPrecondition = 4,
  kIoError = 5,
  kAborted = 6,
  kOutOfRange = 7,
  kInternal = 8,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "DataLoss: <message>"; "OK" when ok.
  std::string ToString() const;
  // Prepends context ("while opening X: ") to the message of a non-ok status.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

namespace internal {
// Prints the status and aborts (a Result's value read although it holds an error).
[[noreturn]] void DieOnAccess(const Status& status);
}  // namespace internal

// Result<T>: a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Internal("Result constructed from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  // Access to the value is a bug when !ok(): it aborts with the status, never reads garbage.
  T& value() & { return Checked(); }
  const T& value() const& { return Checked(); }
  T&& value() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &Checked(); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return Checked(); }

 private:
  T& Checked() const {
    if (!value_.has_value()) internal::DieOnAccess(status_);
    return const_cast<T&>(*value_);
  }
  std::optional<T> value_;
  Status status_;
};

}  // namespace gridfeed

#define GRIDFEED_CONCAT_INNER(a, b) a##b
#define GRIDFEED_CONCAT(a, b) GRIDFEED_CONCAT_INNER(a, b)

// Returns the status from the enclosing function if it is not ok.
#define GRIDFEED_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::gridfeed::Status gridfeed_status_ = (expr);        \
    if (!gridfeed_status_.ok()) return gridfeed_status_; \
  } while (0)

// `GRIDFEED_ASSIGN_OR_RETURN(auto x, MakeX());`
#define GRIDFEED_ASSIGN_OR_RETURN(lhs, expr) \
  GRIDFEED_ASSIGN_OR_RETURN_IMPL(GRIDFEED_CONCAT(gridfeed_result_, __LINE__), lhs, expr)
#define GRIDFEED_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
