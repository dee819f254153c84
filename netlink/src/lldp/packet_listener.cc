// SPDX-License-Identifier: Apache-2.0
// PacketLldpListener: AF_PACKET sockets, one per netdev, polled together until each has heard a
// neighbour that parses or the wait is over. Only what came in from the wire to an LLDP group
// counts: the kernel marks it PACKET_MULTICAST (never PACKET_OUTGOING, PACKET_HOST for a unicast
// to the netdev, or PACKET_BROADCAST).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/lldp/lldp.h"

namespace kuberdma::lldp {
namespace {

using Clock = std::chrono::steady_clock;

struct Bound {
  UniqueFd fd;
  int ifindex = 0;
};

Result<Bound> OpenOn(const std::string& netdev) {
  unsigned ifindex = ::if_nametoindex(netdev.c_str());
  if (ifindex == 0) {
    return Fail(ErrorCode::kNotFound,
                "listen for LLDP on " + netdev + ": no such netdev in this network namespace");
  }
  // Protocol 0: an AF_PACKET socket opened with a protocol receives it from every netdev until
  // it is bound, so a frame another rail heard in that window would be taken for this one's. It
  // receives nothing until bind names the netdev and the EtherType.
  UniqueFd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    return FailErrno(errno, "listen for LLDP on " + netdev +
                                ": an AF_PACKET socket (needs CAP_NET_RAW in the node's network "
                                "namespace)");
  }
  sockaddr_ll at{};
  at.sll_family = AF_PACKET;
  at.sll_protocol = htons(kEtherType);
  at.sll_ifindex = static_cast<int>(ifindex);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
    return FailErrno(errno, "listen for LLDP on " + netdev + ": bind");
  }
  for (const auto& address : kLldpGroups) {
    packet_mreq group{};
    group.mr_ifindex = static_cast<int>(ifindex);
    group.mr_type = PACKET_MR_MULTICAST;
    group.mr_alen = 6;
    std::memcpy(group.mr_address, address.data(), 6);
    if (::setsockopt(fd.get(), SOL_PACKET, PACKET_ADD_MEMBERSHIP, &group, sizeof group) != 0) {
      return FailErrno(errno, "listen for LLDP on " + netdev + ": join the LLDP group addresses");
    }
  }
  return Bound{std::move(fd), static_cast<int>(ifindex)};
}

// Reads what is queued on `fd`; a frame that parses and arrived on `ifindex` from the wire to a
// group is `netdev`'s neighbour (a frame from any other netdev is never taken for it): the first
// one, or with `last` the latest.
void Drain(int fd, int ifindex, const std::string& netdev, bool last,
           std::map<std::string, Neighbor>& heard) {
  uint8_t frame[9216];  // a jumbo frame; LLDP never needs more, a longer one is truncated
  for (;;) {
    sockaddr_ll from{};
    socklen_t len = sizeof from;
    ssize_t n = ::recvfrom(fd, frame, sizeof frame, 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) return;  // EAGAIN: nothing more queued
    if (from.sll_ifindex != ifindex || from.sll_pkttype != PACKET_MULTICAST) continue;
    auto parsed = ParseFrame({frame, static_cast<size_t>(n)});
    if (parsed && (last || !heard.contains(netdev))) heard[netdev] = std::move(*parsed);
  }
}

}  // namespace

Result<Heard> PacketLldpListener::Listen(const std::vector<std::string>& netdevs,
                                         std::chrono::milliseconds wait, ListenUntil until,
                                         int stop_fd) {
  std::vector<Bound> bound;
  std::vector<pollfd> polls;
  std::vector<std::string> names;
  Heard out;
  for (const auto& d : netdevs) {
    auto b = OpenOn(d);
    if (!b && b.error().code() == ErrorCode::kNotFound) {
      out.absent.insert(d);  // in a pod now
      continue;
    }
    if (!b) return Fail(b.error());
    polls.push_back({b->fd.get(), POLLIN, 0});
    names.push_back(d);
    bound.push_back(std::move(*b));
  }
  if (stop_fd >= 0) polls.push_back({stop_fd, POLLIN, 0});
  std::map<std::string, Neighbor>& heard = out.neighbors;
  auto deadline = Clock::now() + wait;
  const bool whole = until == ListenUntil::kWaitOver;
  while (whole || heard.size() < names.size()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    int ready = ::poll(polls.data(), polls.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return FailErrno(errno, "wait for LLDP frames");
    if (ready > 0 && stop_fd >= 0 && (polls.back().revents & POLLIN)) break;
    for (size_t i = 0; ready > 0 && i < names.size(); ++i) {
      if (polls[i].revents & POLLIN) Drain(polls[i].fd, bound[i].ifindex, names[i], whole, heard);
    }
  }
  return out;
}

}  // namespace kuberdma::lldp
