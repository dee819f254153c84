// SPDX-License-Identifier: Apache-2.0
// kuberdma::sock: the operating system's stream sockets behind one seam, as links sit behind
// LinkOps and sysfs behind SysfsRoot. Every party that listens or connects (the device plugin's
// pods.sock and metrics port, the CNI's question to pods.sock, the acceptance coordinator, the
// verbs probe's control channel) goes through it, so address parsing, close-on-exec, socket
// modes and the errors that say what to do live in one place (a boundary check keeps it so).
//
//   KUBERDMA_ASSIGN_OR_RETURN(auto l, sock::ListenTcp("", 0));
//   KUBERDMA_ASSIGN_OR_RETURN(uint16_t port, sock::LocalPort(l.get()));
//   KUBERDMA_ASSIGN_OR_RETURN(auto c, sock::ConnectTcp("127.0.0.1", port));
//   UniqueFd conn = sock::Accept(l.get());
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"

namespace kuberdma::sock {

struct ListenOptions {
  int backlog = 64;
  // Accept() on it then never blocks (an epoll loop's listening socket).
  bool nonblocking = false;
};

// A Unix stream socket listening at `path`: its folder made, a stale socket there replaced, the
// socket created with `mode` whatever the process's umask. kInvalidArgument when the path does
// not fit a sockaddr_un; kAlreadyExists when something other than a socket is there (kept).
Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode, ListenOptions opts = {});

// Connects to the Unix stream socket at `path`: kNotFound when nothing listens there (no such
// file, or connection refused), so a caller can tell "not started" from a failure.
Result<UniqueFd> ConnectUnix(const std::string& path);

// A TCP socket listening on `address` (an IPv4 or IPv6 literal; empty: every address, IPv4 and
// IPv6) and `port` (0: the kernel picks one; LocalPort says which). SO_REUSEADDR is set, so a
// restarted server takes its port back while old connections linger.
Result<UniqueFd> ListenTcp(const std::string& address, uint16_t port, ListenOptions opts = {});

// One attempt at each address `host` (a name or a literal) resolves to, in the resolver's order.
// kNotFound when the name does not resolve; otherwise the last connect(2) error (ECONNREFUSED:
// nothing listens yet).
Result<UniqueFd> ConnectTcp(const std::string& host, uint16_t port);

// The port a listening or connected TCP socket is bound to.
Result<uint16_t> LocalPort(int fd);

// The peer's address as text, an IPv4-mapped IPv6 address shown as IPv4; "" when unknown.
std::string PeerAddress(int fd);

// One pending connection on `listen_fd`, close-on-exec (and non-blocking when asked); an invalid
// descriptor when there is none or accept(2) failed (errno says which).
UniqueFd Accept(int listen_fd, bool nonblocking = false);

}  // namespace kuberdma::sock
