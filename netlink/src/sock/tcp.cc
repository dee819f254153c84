// SPDX-License-Identifier: Apache-2.0
// kuberdma::sock's TCP sockets: listen, connect (through the resolver), their addresses.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include "kuberdma/sock/stream.h"
#include "stream_internal.h"

namespace kuberdma::sock {

namespace {

// `address` as a socket address: IPv4 or IPv6 literal, or empty for every address (dual stack).
Result<sockaddr_storage> TcpAddress(const std::string& address, uint16_t port, socklen_t* len) {
  sockaddr_storage ss{};
  if (address.find(':') != std::string::npos || address.empty()) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    a->sin6_addr = in6addr_any;
    *len = sizeof *a;
    if (address.empty() || ::inet_pton(AF_INET6, address.c_str(), &a->sin6_addr) == 1) return ss;
    return Fail(ErrorCode::kInvalidArgument, "not an IPv6 address: " + address);
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&ss);
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  *len = sizeof *a;
  if (::inet_pton(AF_INET, address.c_str(), &a->sin_addr) == 1) return ss;
  return Fail(ErrorCode::kInvalidArgument, "not an IPv4 address: " + address);
}

}  // namespace

Result<UniqueFd> ListenTcp(const std::string& address, uint16_t port, ListenOptions opts) {
  socklen_t len = 0;
  KUBERDMA_ASSIGN_OR_RETURN(sockaddr_storage ss, TcpAddress(address, port, &len));
  UniqueFd fd(::socket(ss.ss_family, Flags(opts.nonblocking), 0));
  if (!fd.valid()) return FailErrno(errno, "socket");
  int one = 1;
  int zero = 0;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (address.empty()) (void)::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  std::string where =
      (address.empty() ? "every address" : address) + " port " + std::to_string(port);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    return FailErrno(errno, "bind " + where);
  }
  if (::listen(fd.get(), opts.backlog) != 0) return FailErrno(errno, "listen on " + where);
  return fd;
}

Result<UniqueFd> ConnectTcp(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    return Fail(ErrorCode::kNotFound, "cannot resolve " + host + ": " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(res, &::freeaddrinfo);
  int err = EADDRNOTAVAIL;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (fd.valid() && ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) return fd;
    err = errno;
  }
  return FailErrno(err, "connect to " + host + ":" + std::to_string(port));
}

Result<uint16_t> LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return FailErrno(errno, "getsockname");
  }
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return Fail(ErrorCode::kInvalidArgument, "not a TCP socket");
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = "";
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (ss.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
    ::inet_ntop(AF_INET, &a6->sin6_addr.s6_addr[12], host, sizeof host);
  } else if (ss.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof host);
  } else if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, host, sizeof host);
  }
  return host;
}

}  // namespace kuberdma::sock
