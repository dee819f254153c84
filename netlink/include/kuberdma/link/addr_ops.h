// SPDX-License-Identifier: Apache-2.0
// Address and route operations: the seam through which the CNI applies what an IPAM plugin
// returned to a pod interface, and CHECK verifies it. The real implementation (NetlinkAddrOps)
// speaks rtnetlink (RTM_NEWADDR/RTM_DELADDR, RTM_NEWROUTE, dumps); tests use fakes.
//
//   NetlinkAddrOps addrs;
//   KUBERDMA_ASSIGN_OR_RETURN(IpPrefix ip, ParsePrefix("10.10.1.2/24"));
//   KUBERDMA_TRY(addrs.AddAddress(pod, l.ifindex, ip));
//   KUBERDMA_TRY(addrs.AddRoute(pod, {.dst = *ParsePrefix("0.0.0.0/0"), .gateway = "10.10.1.1",
//                                     .ifindex = l.ifindex}));
//
// Like LinkOps, every operation names the namespace it acts in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/netns/netns.h"

namespace kuberdma::link {

using netns::NetNs;

// An address with its prefix length, IPv4 or IPv6, in canonical text ("10.10.1.2", "fd00::2").
struct IpPrefix {
  int family = 4;  // 4 or 6
  std::string address;
  int prefix_len = 32;

  std::string Cidr() const { return address + "/" + std::to_string(prefix_len); }
  bool operator==(const IpPrefix&) const = default;
};

// Parses "10.10.1.2/24", "fd00::2/64", or a bare address (a host prefix). The address is
// canonicalised ("fd00:0::2" -> "fd00::2"). kInvalidArgument otherwise.
Result<IpPrefix> ParsePrefix(std::string_view text);
// Parses a bare address ("10.10.1.1", "fe80::1") into a host prefix.
Result<IpPrefix> ParseAddress(std::string_view text);

struct Route {
  IpPrefix dst;         // 0.0.0.0/0 or ::/0 for a default route
  std::string gateway;  // empty: a direct (link-scope) route
  int ifindex = 0;      // the interface it leaves by
  bool operator==(const Route&) const = default;
};

class AddrOps {
 public:
  virtual ~AddrOps() = default;
  // Adds `ip` to link `ifindex` in `ns`. IPv6 addresses are added without duplicate address
  // detection (IFA_F_NODAD): IPAM already guarantees uniqueness, and DAD would delay the pod.
  // kAlreadyExists when the address is already there.
  virtual Result<void> AddAddress(const NetNs& ns, int ifindex, const IpPrefix& ip) = 0;
  // Removes `ip` from link `ifindex`; succeeds if it is not there.
  virtual Result<void> DeleteAddress(const NetNs& ns, int ifindex, const IpPrefix& ip) = 0;
  // The addresses of link `ifindex` (link-local IPv6 included).
  virtual Result<std::vector<IpPrefix>> ListAddresses(const NetNs& ns, int ifindex) = 0;
  // Adds `route` to the main table of `ns`. kAlreadyExists when it is there.
  virtual Result<void> AddRoute(const NetNs& ns, const Route& route) = 0;
  // The main table's routes that leave by link `ifindex` (kernel-made connected routes included).
  virtual Result<std::vector<Route>> ListRoutes(const NetNs& ns, int ifindex) = 0;
  // Every address of `ns` with the ifindex of the link it is on, in one dump.
  virtual Result<std::vector<std::pair<int, IpPrefix>>> ListAllAddresses(const NetNs& ns) = 0;
  // Every route of `ns`'s main table, in one dump.
  virtual Result<std::vector<Route>> ListAllRoutes(const NetNs& ns) = 0;
};

}  // namespace kuberdma::link
