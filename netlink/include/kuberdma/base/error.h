// SPDX-License-Identifier: Apache-2.0
// Error and Result<T>: how every kube-rdma library reports an expected failure.
//
// An Error carries a small closed code, the raw errno where there was one, and a message that reads
// as a chain of causes, outermost first:
//
//   Result<int> r = OpenThing();
//   if (!r) return r.error().Wrap("attach mlx5_0");   // "attach mlx5_0: open /x: no such file"
//
// Project code does not throw; Result is the only way failures travel.
#pragma once

#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>

namespace kuberdma {

// The closed set of failure kinds. Callers branch on these, never on message text.
enum class ErrorCode {
  kInvalidArgument,   // The caller (config, user, flag) asked for something malformed.
  kNotFound,          // A device, namespace, file or record does not exist.
  kAlreadyExists,     // A name or record is taken.
  kUnsupported,       // The kernel or hardware lacks the feature (e.g. no RDMA subsystem).
  kPermissionDenied,  // EPERM/EACCES.
  kBusy,              // Locked or busy; retrying later may succeed.
  kTimeout,           // A bounded wait ran out.
  kIo,                // Any other OS failure; see errno.
  kInternal,          // A broken invariant that was caught rather than crashed on.
};

// Returns a stable lower-case name for `code` ("not found").
std::string_view ErrorCodeName(ErrorCode code);

class Error {
 public:
  Error(ErrorCode code, std::string message, int sys_errno = 0)
      : code_(code), errno_(sys_errno), message_(std::move(message)) {}

  // Builds an Error from errno `err`, choosing the code from it; the message becomes
  // "<what>: <strerror(err)>".
  static Error FromErrno(int err, std::string_view what);

  ErrorCode code() const { return code_; }
  int sys_errno() const { return errno_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>"; code and errno are kept.
  Error Wrap(std::string_view context) const;

 private:
  ErrorCode code_;
  int errno_;
  std::string message_;
};

template <typename T>
using Result = tl::expected<T, Error>;

// Shorthand for returning a failure: `return Fail(ErrorCode::kNotFound, "no HCA mlx5_9");`.
inline tl::unexpected<Error> Fail(ErrorCode code, std::string message, int sys_errno = 0) {
  return tl::unexpected<Error>(Error(code, std::move(message), sys_errno));
}
inline tl::unexpected<Error> Fail(Error error) { return tl::unexpected<Error>(std::move(error)); }
inline tl::unexpected<Error> FailErrno(int err, std::string_view what) {
  return tl::unexpected<Error>(Error::FromErrno(err, what));
}

}  // namespace kuberdma

// Propagates a failed Result<void> (or any Result whose value is unused) to the caller.
#define KUBERDMA_TRY(expr)                                              \
  do {                                                                  \
    auto kuberdma_try_result_ = (expr);                                 \
    if (!kuberdma_try_result_) {                                        \
      return ::tl::unexpected(std::move(kuberdma_try_result_).error()); \
    }                                                                   \
  } while (false)

#define KUBERDMA_CONCAT_INNER_(a, b) a##b
#define KUBERDMA_CONCAT_(a, b) KUBERDMA_CONCAT_INNER_(a, b)
// `lhs` is a declaration (`auto fd`) and `tmp` a name: neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define KUBERDMA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)      \
  auto tmp = (expr);                                         \
  if (!tmp) return ::tl::unexpected(std::move(tmp).error()); \
  lhs = std::move(*tmp)
// NOLINTEND(bugprone-macro-parentheses)

// `KUBERDMA_ASSIGN_OR_RETURN(auto fd, OpenFd(path));` declares `fd` or returns the error.
#define KUBERDMA_ASSIGN_OR_RETURN(lhs, expr) \
  KUBERDMA_ASSIGN_OR_RETURN_IMPL_(KUBERDMA_CONCAT_(kuberdma_aor_, __LINE__), lhs, expr)
