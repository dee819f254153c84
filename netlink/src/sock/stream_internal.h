// SPDX-License-Identifier: Apache-2.0
// What unix.cc and tcp.cc share.
#pragma once

#include <sys/socket.h>

namespace kuberdma::sock {

// socket(2)'s type for a stream socket: close-on-exec, and non-blocking when asked.
inline int Flags(bool nonblocking) {
  return SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0);
}

}  // namespace kuberdma::sock
