// SPDX-License-Identifier: Apache-2.0
// Kernel event sockets: raw NETLINK_ROUTE bound to RTNLGRP_LINK, and NETLINK_KOBJECT_UEVENT.
#include "kuberdma/events/kernel_events.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace kuberdma::events {

namespace {

Result<UniqueFd> Bound(int protocol, uint32_t groups, const char* what) {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol));
  if (!fd.valid()) return FailErrno(errno, std::string("open ") + what + " socket");
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = groups;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return FailErrno(errno, std::string("bind ") + what + " socket");
  }
  int size = 1 << 20;  // bursts (a driver reload renames every port) must not overflow
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  return fd;
}

}  // namespace

bool UeventIsRelevant(const char* msg, size_t len) {
  std::string_view all(msg, len);
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find('\0', pos);
    std::string_view kv =
        all.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (kv == "SUBSYSTEM=infiniband" || kv == "SUBSYSTEM=infiniband_verbs" ||
        kv == "SUBSYSTEM=net" || kv == "SUBSYSTEM=infiniband_mad") {
      return true;
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return false;
}

Result<KernelEvents> KernelEvents::Open() {
  KUBERDMA_ASSIGN_OR_RETURN(UniqueFd link, Bound(NETLINK_ROUTE, RTMGRP_LINK, "rtnetlink"));
  auto uevent = Bound(NETLINK_KOBJECT_UEVENT, 1, "uevent");
  return KernelEvents(std::move(link), uevent ? std::move(*uevent) : UniqueFd());
}

bool KernelEvents::Drain() {
  bool relevant = false;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(link_.get(), buf, sizeof buf, 0);
    if (n <= 0) break;  // EAGAIN, or ENOBUFS after an overflow: either way, rescan
    relevant = true;
  }
  if (errno == ENOBUFS) relevant = true;
  while (uevent_.valid()) {
    ssize_t n = ::recv(uevent_.get(), buf, sizeof buf - 1, 0);
    if (n <= 0) break;
    relevant = relevant || UeventIsRelevant(buf, static_cast<size_t>(n));
  }
  return relevant;
}

}  // namespace kuberdma::events
