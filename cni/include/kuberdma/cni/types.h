// SPDX-License-Identifier: Apache-2.0
// CNI protocol types: the request a runtime sends (environment + stdin) and the error codes of the
// CNI specification plus our own (100 and up).
#pragma once

#include <string>
#include <tl/expected.hpp>
#include <utility>

#include "kuberdma/base/error.h"

namespace kuberdma::cni {

// Error codes. 1-11 and 50-51 are the specification's; 100+ are ours (docs/cni.md lists them).
enum Code : int {
  kIncompatibleVersion = 1,
  kUnsupportedField = 2,
  kContainerUnknown = 3,
  kInvalidEnv = 4,
  kIoFailure = 5,
  kDecodeFailure = 6,
  kInvalidConfig = 7,
  kTryAgainLater = 11,
  kPluginNotAvailable = 50,
  kPluginLimited = 51,
  kDeviceUnavailable = 100,   // The selected device is absent or attached elsewhere.
  kKernelRefused = 101,       // A netlink operation failed; the message names it.
  kSharedModeRejected = 102,  // RDMA netns mode is shared and the config says "error".
  kStateFailure = 103,        // The state record could not be read or written.
  kRollbackIncomplete = 104,  // A failure could not be fully undone; the message says what is left.
  kCheckFailed = 105,         // CHECK found the attachment differs from what ADD set up.
  kIpamFailed = 106,     // The IPAM plugin could not be run, timed out, or gave no usable answer.
  kNodeOwnNic = 107,     // The HCA carries the node's own traffic (node config: docs/install.md).
  kNotAllocated = 108,   // The HCA was not allocated to this pod by rdma-device-plugin.
  kInternalError = 199,  // A bug: an unexpected exception reached the boundary.
};

struct CniError {
  int code;
  std::string msg;
  std::string details;
};

template <typename T>
using CniResult = tl::expected<T, CniError>;

inline tl::unexpected<CniError> CniFail(int code, std::string msg, std::string details = "") {
  return tl::unexpected<CniError>(CniError{code, std::move(msg), std::move(details)});
}

// Maps a library Error to a CNI error: kBusy/kTimeout -> 11, kInvalidArgument -> 7,
// otherwise `fallback`.
CniError FromError(const Error& e, int fallback);

// The one way a failure becomes a CNI error: a library Error through FromError(e, code), a
// CniError as it is (it already has its code).
inline CniError ToCniError(const Error& e, int code) { return FromError(e, code); }
inline CniError ToCniError(CniError e, int /*code*/) { return e; }

}  // namespace kuberdma::cni

// Propagates a failed Result<T> or CniResult<T> from a function returning CniResult<U>; a library
// Error becomes a CNI error with `code` (or 11/7, see FromError):
//   KUBERDMA_CNI_TRY(store.Save(rec), kStateFailure);
#define KUBERDMA_CNI_TRY(expr, code)                                                  \
  do {                                                                                \
    auto kuberdma_cni_try_ = (expr);                                                  \
    if (!kuberdma_cni_try_) {                                                         \
      return ::tl::unexpected(                                                        \
          ::kuberdma::cni::ToCniError(std::move(kuberdma_cni_try_).error(), (code))); \
    }                                                                                 \
  } while (false)

// `lhs` is a declaration and `tmp` a name: neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define KUBERDMA_CNI_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr, code)                                 \
  auto tmp = (expr);                                                                              \
  if (!tmp) return ::tl::unexpected(::kuberdma::cni::ToCniError(std::move(tmp).error(), (code))); \
  lhs = std::move(*tmp)
// NOLINTEND(bugprone-macro-parentheses)

// `KUBERDMA_CNI_ASSIGN_OR_RETURN(NetNs host, namespaces.Host(), kIoFailure);` declares `host` or
// returns the failure as a CNI error.
#define KUBERDMA_CNI_ASSIGN_OR_RETURN(lhs, expr, code)                                          \
  KUBERDMA_CNI_ASSIGN_OR_RETURN_IMPL_(KUBERDMA_CONCAT_(kuberdma_cni_aor_, __LINE__), lhs, expr, \
                                      code)

namespace kuberdma::cni {

enum class Command { kAdd, kDel, kCheck, kVersion, kStatus, kGc };

// The verb as CNI_COMMAND spells it ("ADD").
std::string CommandName(Command command);

// What the runtime passed in CNI_* variables.
struct Request {
  Command command = Command::kVersion;
  std::string container_id;
  std::string netns;
  std::string ifname;
  std::string args;
  std::string path;
  // DEL only: CNI_CONTAINERID or CNI_IFNAME is one that ADD refuses, so nothing was ever attached
  // or recorded under it and DEL has nothing to undo (a runtime retries a failing DEL forever).
  std::string unrecordable;  // why, empty when the attachment is addressable
};

// The longest container ID accepted: a record is named "<containerID>:<ifname>.json" plus a
// temporary suffix, and one path component holds 255 bytes (runtimes use 64 hex digits).
inline constexpr size_t kMaxContainerIdBytes = 200;

// The value of `key` in CNI_ARGS ("K1=V1;K2=V2"), the last one when repeated; "" when absent.
std::string CniArg(const std::string& args, const std::string& key);

// Reads and validates CNI_* variables through `getenv` for the command they name.
// Missing or invalid required variables are error 4, naming the variable (values are quoted
// with unprintable bytes escaped). CNI_IFNAME must be a name the kernel takes literally: 1-15
// bytes of printable UTF-8 without '/', ':', '%' or whitespace, not "." or "..".
CniResult<Request> ParseEnv(const char* (*getenv)(const char*));

}  // namespace kuberdma::cni
