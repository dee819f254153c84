// SPDX-License-Identifier: Apache-2.0
// libnl's own encodings for tests (libnl_reference.h).
#include "kuberdma/testing/libnl_reference.h"

#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>

#include "kuberdma/nl/common.h"

namespace kuberdma::testing {

std::vector<uint8_t> LibnlVfGuidChange(int ifindex, uint32_t vf, uint64_t node_guid,
                                       uint64_t port_guid) {
  rtnl_link* link = rtnl_link_alloc();
  rtnl_link_set_ifindex(link, ifindex);
  rtnl_link_vf* v = rtnl_link_vf_alloc();
  rtnl_link_vf_set_index(v, vf);
  rtnl_link_vf_set_ib_node_guid(v, node_guid);
  rtnl_link_vf_set_ib_port_guid(v, port_guid);
  std::vector<uint8_t> out;
  nl_msg* msg = nullptr;
  if (rtnl_link_vf_add(link, v) == 0 && rtnl_link_build_add_request(link, 0, &msg) == 0) {
    out = nl::MsgBytes(msg);
    nlmsg_free(msg);
  }
  rtnl_link_vf_put(v);
  rtnl_link_put(link);
  return out;
}

std::map<int, std::vector<uint8_t>> VfInfoAttributes(const std::vector<uint8_t>& msg) {
  std::map<int, std::vector<uint8_t>> out;
  std::vector<uint8_t> copy = msg;
  auto* hdr = reinterpret_cast<nlmsghdr*>(copy.data());
  if (copy.size() < NLMSG_HDRLEN || hdr->nlmsg_len > copy.size()) return out;
  nlattr* tb[IFLA_MAX + 1] = {};
  if (nlmsg_parse(hdr, sizeof(ifinfomsg), tb, IFLA_MAX, nullptr) < 0) return out;
  if (tb[IFLA_VFINFO_LIST] == nullptr || nla_len(tb[IFLA_VFINFO_LIST]) < 4)
    return out;  // NLA_HDRLEN
  auto* info = static_cast<nlattr*>(nla_data(tb[IFLA_VFINFO_LIST]));
  nlattr* a = nullptr;
  int rem = 0;
  nla_for_each_nested(a, info, rem) {
    const auto* p = static_cast<const uint8_t*>(nla_data(a));
    out[nla_type(a)] = std::vector<uint8_t>(p, p + nla_len(a));
  }
  return out;
}

}  // namespace kuberdma::testing
