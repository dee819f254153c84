// SPDX-License-Identifier: Apache-2.0
// Error construction from errno, wrapping, and the CHECK failure path.
#include "kuberdma/base/error.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kuberdma/base/check.h"

namespace kuberdma {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kAlreadyExists:
      return "already exists";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kPermissionDenied:
      return "permission denied";
    case ErrorCode::kBusy:
      return "busy";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kIo:
      return "i/o error";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

namespace {
ErrorCode CodeFromErrno(int err) {
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ENXIO:
    case ESRCH:
      return ErrorCode::kNotFound;
    case EEXIST:
    case ENOTEMPTY:
      return ErrorCode::kAlreadyExists;
    case EINVAL:
    case ERANGE:
    case E2BIG:
      return ErrorCode::kInvalidArgument;
    case EPERM:
    case EACCES:
      return ErrorCode::kPermissionDenied;
    case EBUSY:
    case EAGAIN:
      return ErrorCode::kBusy;
    case ETIMEDOUT:
      return ErrorCode::kTimeout;
    case EOPNOTSUPP:
    case EPROTONOSUPPORT:
    case EAFNOSUPPORT:
      return ErrorCode::kUnsupported;
    default:
      return ErrorCode::kIo;
  }
}
}  // namespace

Error Error::FromErrno(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return {CodeFromErrno(err), std::move(msg), err};
}

Error Error::Wrap(std::string_view context) const {
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return {code_, std::move(msg), errno_};
}

namespace internal {
void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "kube-rdma: CHECK failed: %s at %s:%d (this is a bug; please report it)\n",
               expr, file, line);
  std::abort();
}
}  // namespace internal

}  // namespace kuberdma
