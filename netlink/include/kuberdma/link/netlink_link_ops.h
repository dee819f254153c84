// SPDX-License-Identifier: Apache-2.0
// NetlinkLinkOps: LinkOps over libnl3 rtnetlink, one socket per namespace, created inside it.
// Also the pure message encoder it uses, so that the exact bytes of a move can be tested.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kuberdma/link/link_ops.h"
#include "kuberdma/nl/common.h"

struct nl_sock;

namespace kuberdma::link {

// Encodes the RTM_NEWLINK request that applies `change` to link `ifindex` and, when `netns_fd` is
// set, moves it into that namespace (IFLA_NET_NS_FD). Sequence number and port id are zero: the
// socket fills them when sending.
std::vector<uint8_t> EncodeLinkChange(int ifindex, const LinkChange& change,
                                      std::optional<int> netns_fd);

// Encodes the RTM_NEWLINK request (NLM_F_CREATE | NLM_F_EXCL) that creates `child` on
// `parent_ifindex` inside the namespace `netns_fd` names (IFLA_LINK, IFLA_NET_NS_FD, IFLA_LINKINFO
// with IFLA_MACVLAN_MODE bridge or IFLA_IPVLAN_MODE l2). kInvalidArgument for a MAC that does not
// parse.
Result<std::vector<uint8_t>> EncodeChildLink(int parent_ifindex, const ChildLink& child,
                                             int netns_fd);
// Encodes the RTM_DELLINK request for `ifindex`.
std::vector<uint8_t> EncodeLinkDelete(int ifindex);

class NetlinkLinkOps final : public LinkOps {
 public:
  NetlinkLinkOps();
  ~NetlinkLinkOps() override;
  NetlinkLinkOps(const NetlinkLinkOps&) = delete;
  NetlinkLinkOps& operator=(const NetlinkLinkOps&) = delete;

  Result<LinkInfo> GetByName(const NetNs& ns, const std::string& name) override;
  Result<LinkInfo> GetByIndex(const NetNs& ns, int ifindex) override;
  Result<std::vector<LinkInfo>> List(const NetNs& ns) override;
  Result<void> Change(const NetNs& ns, int ifindex, const LinkChange& change) override;
  Result<void> MoveTo(const NetNs& from, int ifindex, const NetNs& to,
                      const LinkChange& change) override;
  Result<void> CreateChild(const NetNs& parent_ns, int parent_ifindex, const NetNs& into,
                           const ChildLink& child) override;
  Result<void> Delete(const NetNs& ns, int ifindex) override;

 private:
  Result<nl_sock*> Socket(const NetNs& ns);
  Result<LinkInfo> Get(const NetNs& ns, int ifindex, const std::string& name);
  Result<void> Send(const NetNs& ns, const std::vector<uint8_t>& msg, const std::string& what);

  nl::NlSocketCache socks_;
};

}  // namespace kuberdma::link
