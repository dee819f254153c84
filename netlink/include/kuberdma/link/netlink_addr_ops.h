// SPDX-License-Identifier: Apache-2.0
// NetlinkAddrOps: AddrOps over libnl3 rtnetlink, one socket per namespace. Also the pure message
// encoders it sends, so that the exact bytes can be tested against the uapi layout.
#pragma once

#include <cstdint>
#include <vector>

#include "kuberdma/link/addr_ops.h"
#include "kuberdma/nl/common.h"

namespace kuberdma::link {

// RTM_NEWADDR (`add`) or RTM_DELADDR for `ip` on link `ifindex`: struct ifaddrmsg, IFA_LOCAL and
// IFA_ADDRESS, and for IPv6 IFA_FLAGS with IFA_F_NODAD.
std::vector<uint8_t> EncodeAddress(bool add, int ifindex, const IpPrefix& ip);
// RTM_NEWROUTE for `route` in the main table: struct rtmsg (RTPROT_BOOT, universe scope with a
// gateway, link scope without), RTA_DST (unless a default route), RTA_GATEWAY, RTA_OIF.
std::vector<uint8_t> EncodeRoute(const Route& route);

class NetlinkAddrOps final : public AddrOps {
 public:
  Result<void> AddAddress(const NetNs& ns, int ifindex, const IpPrefix& ip) override;
  Result<void> DeleteAddress(const NetNs& ns, int ifindex, const IpPrefix& ip) override;
  Result<std::vector<IpPrefix>> ListAddresses(const NetNs& ns, int ifindex) override;
  Result<void> AddRoute(const NetNs& ns, const Route& route) override;
  Result<std::vector<Route>> ListRoutes(const NetNs& ns, int ifindex) override;
  Result<std::vector<std::pair<int, IpPrefix>>> ListAllAddresses(const NetNs& ns) override;
  Result<std::vector<Route>> ListAllRoutes(const NetNs& ns) override;

 private:
  Result<void> Send(const NetNs& ns, const std::vector<uint8_t>& msg, const std::string& what);
  nl::NlSocketCache socks_;
};

}  // namespace kuberdma::link
