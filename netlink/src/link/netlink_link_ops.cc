// SPDX-License-Identifier: Apache-2.0
// LinkOps over libnl3 rtnetlink. Each namespace gets its own NETLINK_ROUTE socket, created with
// the thread briefly inside that namespace; the socket then keeps addressing it.
#include "kuberdma/link/netlink_link_ops.h"

#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstdio>
#include <cstring>

#include "kuberdma/nl/common.h"

namespace kuberdma::link {

using nl::NlError;

namespace {

std::string FormatMac(const nl_addr* addr) {
  if (addr == nullptr) return "";
  const auto* bytes = static_cast<const unsigned char*>(nl_addr_get_binary_addr(addr));
  unsigned int len = nl_addr_get_len(addr);
  std::string out;
  char buf[4];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, i == 0 ? "%02x" : ":%02x", bytes[i]);
    out += buf;
  }
  return out;
}

LinkInfo FromRtnl(rtnl_link* l) {
  LinkInfo info;
  info.ifindex = rtnl_link_get_ifindex(l);
  if (const char* n = rtnl_link_get_name(l)) info.name = n;
  info.mac = FormatMac(rtnl_link_get_addr(l));
  info.mtu = rtnl_link_get_mtu(l);
  info.admin_up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
  uint8_t op = rtnl_link_get_operstate(l);
  info.oper_up = op == IF_OPER_UP || (op == IF_OPER_UNKNOWN && info.admin_up);
  char buf[32];
  info.oper_state = rtnl_link_operstate2str(op, buf, sizeof buf);
  if (const char* a = rtnl_link_get_ifalias(l)) info.alias = a;
  if (const char* t = rtnl_link_get_type(l)) info.kind = t;
  info.master_ifindex = rtnl_link_get_master(l);
  info.tx_bytes = rtnl_link_get_stat(l, RTNL_LINK_TX_BYTES);
  info.rx_bytes = rtnl_link_get_stat(l, RTNL_LINK_RX_BYTES);
  info.tx_errors = rtnl_link_get_stat(l, RTNL_LINK_TX_ERRORS);
  info.rx_errors = rtnl_link_get_stat(l, RTNL_LINK_RX_ERRORS);
  info.tx_dropped = rtnl_link_get_stat(l, RTNL_LINK_TX_DROPPED);
  info.rx_dropped = rtnl_link_get_stat(l, RTNL_LINK_RX_DROPPED);
  return info;
}

using nl::MsgPtr;

int OnMaxMtu(nl_msg* msg, void* arg) {
  nlattr* tb[IFLA_MAX + 1] = {};
  if (nlmsg_parse(nlmsg_hdr(msg), sizeof(ifinfomsg), tb, IFLA_MAX, nullptr) < 0) return NL_SKIP;
  if (tb[IFLA_MAX_MTU] != nullptr) *static_cast<uint32_t*>(arg) = nla_get_u32(tb[IFLA_MAX_MTU]);
  return NL_OK;
}

// IFLA_MAX_MTU (kernel 4.19+), which libnl 3.7's link object does not keep: one more
// RTM_GETLINK for the link, parsed here. 0 where the kernel does not say.
Result<uint32_t> ReadMaxMtu(nl_sock* sock, int ifindex, const std::string& what, const NetNs& ns) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  int err = nl_send_simple(sock, RTM_GETLINK, 0, &ifi, sizeof ifi);
  uint32_t max_mtu = 0;
  if (err >= 0) {
    nl_cb* cb = nl_cb_alloc(NL_CB_DEFAULT);
    if (cb == nullptr) return Fail(ErrorCode::kIo, "read the maximum MTU of " + what, ENOMEM);
    nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, OnMaxMtu, &max_mtu);
    err = nl_recvmsgs(sock, cb);
    nl_cb_put(cb);
    // The link sockets ask for ACKs (nl_send_simple adds NLM_F_ACK): read it now, as
    // rtnl_link_get_kernel does, or the next request would take it for its answer.
    if (err >= 0) err = nl_wait_for_ack(sock);
  }
  if (err < 0)
    return Fail(NlError(err, "read the maximum MTU of " + what + " in netns " + ns.path()));
  return max_mtu;
}

// IFLA_INFO_DATA of a child. libnl 3.7 (and libnl upstream) has no IPoIB link type, so all three
// kinds are encoded here, attribute by attribute, as <linux/if_link.h> lays them out.
void PutChildData(nl_msg* m, const ChildLink& child) {
  if (child.kind == ChildKind::kIpoib && !child.pkey && !child.ipoib_mode) return;
  nlattr* data = nla_nest_start(m, IFLA_INFO_DATA);
  switch (child.kind) {
    case ChildKind::kMacvlan:
      nla_put_u32(m, IFLA_MACVLAN_MODE, MACVLAN_MODE_BRIDGE);
      break;
    case ChildKind::kIpvlan:
      nla_put_u16(m, IFLA_IPVLAN_MODE, IPVLAN_MODE_L2);
      break;
    case ChildKind::kIpoib:
      if (child.pkey) nla_put_u16(m, IFLA_IPOIB_PKEY, *child.pkey);
      if (child.ipoib_mode) {
        nla_put_u16(m, IFLA_IPOIB_MODE,
                    *child.ipoib_mode == IpoibMode::kConnected ? IPOIB_MODE_CONNECTED
                                                               : IPOIB_MODE_DATAGRAM);
      }
      break;
  }
  nla_nest_end(m, data);
}

}  // namespace

std::vector<uint8_t> EncodeLinkChange(int ifindex, const LinkChange& change,
                                      std::optional<int> netns_fd) {
  MsgPtr m(nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK));
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  if (change.up) {
    ifi.ifi_change = IFF_UP;
    ifi.ifi_flags = *change.up ? IFF_UP : 0;
  }
  nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO);
  if (netns_fd) nla_put_u32(m.get(), IFLA_NET_NS_FD, static_cast<uint32_t>(*netns_fd));
  if (change.name) nla_put_string(m.get(), IFLA_IFNAME, change.name->c_str());
  if (change.mtu) nla_put_u32(m.get(), IFLA_MTU, *change.mtu);
  if (change.alias) nla_put_string(m.get(), IFLA_IFALIAS, change.alias->c_str());
  // A MAC that does not parse is left out: NetlinkLinkOps::Change refuses it before encoding.
  if (change.mac) {
    if (auto mac = MacBytes(*change.mac)) {
      nla_put(m.get(), IFLA_ADDRESS, static_cast<int>(mac->size()), mac->data());
    }
  }
  return nl::MsgBytes(m.get());
}

Result<std::vector<uint8_t>> EncodeChildLink(int parent_ifindex, const ChildLink& child,
                                             int netns_fd) {
  MsgPtr m(nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL));
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO);
  nla_put_string(m.get(), IFLA_IFNAME, child.name.c_str());
  nla_put_u32(m.get(), IFLA_LINK, static_cast<uint32_t>(parent_ifindex));
  nla_put_u32(m.get(), IFLA_NET_NS_FD, static_cast<uint32_t>(netns_fd));
  if (child.mtu) nla_put_u32(m.get(), IFLA_MTU, *child.mtu);
  if (child.kind == ChildKind::kMacvlan && !child.mac.empty()) {
    KUBERDMA_ASSIGN_OR_RETURN(auto mac, MacBytes(child.mac));
    nla_put(m.get(), IFLA_ADDRESS, static_cast<int>(mac.size()), mac.data());
  }
  nlattr* info = nla_nest_start(m.get(), IFLA_LINKINFO);
  nla_put_string(m.get(), IFLA_INFO_KIND, std::string(ChildKindName(child.kind)).c_str());
  PutChildData(m.get(), child);
  nla_nest_end(m.get(), info);
  return nl::MsgBytes(m.get());
}

std::vector<uint8_t> EncodeLinkDelete(int ifindex) {
  MsgPtr m(nlmsg_alloc_simple(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK));
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO);
  return nl::MsgBytes(m.get());
}

NetlinkLinkOps::NetlinkLinkOps() = default;
NetlinkLinkOps::~NetlinkLinkOps() = default;

Result<nl_sock*> NetlinkLinkOps::Socket(const NetNs& ns) {
  return socks_.Get(ns, NETLINK_ROUTE, true);
}

Result<LinkInfo> NetlinkLinkOps::Get(const NetNs& ns, int ifindex, const std::string& name) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, Socket(ns));
  rtnl_link* l = nullptr;
  int err = rtnl_link_get_kernel(sock, ifindex, name.empty() ? nullptr : name.c_str(), &l);
  std::string what = name.empty() ? "ifindex " + std::to_string(ifindex) : "link " + name;
  if (err < 0) return Fail(NlError(err, "look up " + what + " in netns " + ns.path()));
  LinkInfo info = FromRtnl(l);
  rtnl_link_put(l);
  KUBERDMA_ASSIGN_OR_RETURN(info.max_mtu, ReadMaxMtu(sock, info.ifindex, what, ns));
  return info;
}

Result<LinkInfo> NetlinkLinkOps::GetByName(const NetNs& ns, const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) {
    return Fail(ErrorCode::kInvalidArgument, "invalid link name '" + name + "'");
  }
  return Get(ns, 0, name);
}

Result<LinkInfo> NetlinkLinkOps::GetByIndex(const NetNs& ns, int ifindex) {
  return Get(ns, ifindex, "");
}

Result<std::vector<LinkInfo>> NetlinkLinkOps::List(const NetNs& ns) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, Socket(ns));
  nl_cache* cache = nullptr;
  int err = rtnl_link_alloc_cache(sock, AF_UNSPEC, &cache);
  if (err < 0) return Fail(NlError(err, "list links in netns " + ns.path()));
  std::vector<LinkInfo> out;
  for (nl_object* o = nl_cache_get_first(cache); o != nullptr; o = nl_cache_get_next(o)) {
    out.push_back(FromRtnl(reinterpret_cast<rtnl_link*>(o)));
  }
  nl_cache_free(cache);
  return out;
}

Result<void> NetlinkLinkOps::Send(const NetNs& ns, const std::vector<uint8_t>& msg,
                                  const std::string& what) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, Socket(ns));
  if (int err = nl::SendAndAck(sock, msg); err < 0) return Fail(NlError(err, what));
  return {};
}

Result<void> NetlinkLinkOps::Change(const NetNs& ns, int ifindex, const LinkChange& change) {
  if (change.mac) KUBERDMA_TRY(MacBytes(*change.mac));
  return Send(ns, EncodeLinkChange(ifindex, change, std::nullopt),
              "change ifindex " + std::to_string(ifindex) + " in netns " + ns.path());
}

Result<void> NetlinkLinkOps::MoveTo(const NetNs& from, int ifindex, const NetNs& to,
                                    const LinkChange& change) {
  return Send(from, EncodeLinkChange(ifindex, change, to.fd()),
              "move ifindex " + std::to_string(ifindex) + " from netns " + from.path() +
                  " to netns " + to.path());
}

Result<void> NetlinkLinkOps::CreateChild(const NetNs& parent_ns, int parent_ifindex,
                                         const NetNs& into, const ChildLink& child) {
  KUBERDMA_ASSIGN_OR_RETURN(auto msg, EncodeChildLink(parent_ifindex, child, into.fd()));
  return Send(parent_ns, msg,
              "create " + std::string(ChildKindName(child.kind)) + " " + child.name +
                  " on ifindex " + std::to_string(parent_ifindex) + " of netns " +
                  parent_ns.path() + " in netns " + into.path());
}

Result<void> NetlinkLinkOps::Delete(const NetNs& ns, int ifindex) {
  return Send(ns, EncodeLinkDelete(ifindex),
              "delete ifindex " + std::to_string(ifindex) + " in netns " + ns.path());
}

}  // namespace kuberdma::link
