// SPDX-License-Identifier: Apache-2.0
// kuberdma::sock's Unix sockets and Accept. Apart from tcp.cc so that a static binary that only
// asks pods.sock (the CNI) links no resolver (getaddrinfo wants glibc's shared NSS at run time).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "kuberdma/base/files.h"
#include "kuberdma/sock/stream.h"
#include "stream_internal.h"

namespace kuberdma::sock {

namespace {

Result<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un sa{.sun_family = AF_UNIX};
  if (path.empty() || path.size() >= sizeof sa.sun_path) {
    return Fail(ErrorCode::kInvalidArgument, "socket path '" + path + "' is empty or longer than " +
                                                 std::to_string(sizeof sa.sun_path - 1) +
                                                 " bytes: choose a shorter one");
  }
  std::copy(path.begin(), path.end(), sa.sun_path);
  return sa;
}

}  // namespace

Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode, ListenOptions opts) {
  KUBERDMA_ASSIGN_OR_RETURN(sockaddr_un sa, UnixAddress(path));
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) KUBERDMA_TRY(MakeDirs(path.substr(0, slash)));
  // A socket left by an earlier run is replaced; anything else at the path is not ours to remove.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Fail(ErrorCode::kAlreadyExists,
                  path + " exists and is not a socket: remove it or choose another path");
    }
    (void)::unlink(path.c_str());
  }
  UniqueFd fd(::socket(AF_UNIX, Flags(opts.nonblocking), 0));
  if (!fd.valid()) return FailErrno(errno, "socket for " + path);
  // The mode is set at bind through the umask: a chmod after it would leave a window.
  mode_t old = ::umask(static_cast<mode_t>(~mode & 0777));
  int bound = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  int err = errno;
  ::umask(old);
  if (bound != 0) return FailErrno(err, "bind " + path);
  if (::listen(fd.get(), opts.backlog) != 0) return FailErrno(errno, "listen on " + path);
  return fd;
}

Result<UniqueFd> ConnectUnix(const std::string& path) {
  KUBERDMA_ASSIGN_OR_RETURN(sockaddr_un sa, UnixAddress(path));
  UniqueFd fd(::socket(AF_UNIX, Flags(false), 0));
  if (!fd.valid()) return FailErrno(errno, "socket for " + path);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    int err = errno;
    if (err == ENOENT || err == ECONNREFUSED) {
      return Fail(ErrorCode::kNotFound, "nothing listens on " + path, err);
    }
    return FailErrno(err, "connect to " + path);
  }
  return fd;
}

UniqueFd Accept(int listen_fd, bool nonblocking) {
  return UniqueFd(
      ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0)));
}

}  // namespace kuberdma::sock
