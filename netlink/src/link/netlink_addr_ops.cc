// SPDX-License-Identifier: Apache-2.0
// AddrOps over libnl3 rtnetlink: requests are encoded here (pure, tested byte for byte) and sent
// on the namespace's socket; dumps go through libnl's caches.
#include "kuberdma/link/netlink_addr_ops.h"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace kuberdma::link {

namespace {

using nl::MsgPtr;

struct Binary {
  int af = AF_INET;
  unsigned char bytes[16] = {};
  size_t len = 4;
};

Binary ToBinary(int family, const std::string& address) {
  Binary b;
  b.af = family == 6 ? AF_INET6 : AF_INET;
  b.len = family == 6 ? 16 : 4;
  ::inet_pton(b.af, address.c_str(), b.bytes);  // callers hold parsed, valid addresses
  return b;
}

std::string FromBinary(const nl_addr* a, int* family) {
  if (a == nullptr) return "";
  int af = nl_addr_get_family(a);
  *family = af == AF_INET6 ? 6 : 4;
  unsigned char zero[16] = {};
  const void* bytes = nl_addr_get_len(a) > 0 ? nl_addr_get_binary_addr(a) : zero;
  char buf[INET6_ADDRSTRLEN] = "";
  ::inet_ntop(af == AF_INET6 ? AF_INET6 : AF_INET, bytes, buf, sizeof buf);
  return buf;
}

struct CacheDeleter {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
using CachePtr = std::unique_ptr<nl_cache, CacheDeleter>;

}  // namespace

Result<IpPrefix> ParseAddress(std::string_view text) {
  std::string s(text);
  unsigned char buf[16];
  for (int family : {4, 6}) {
    if (::inet_pton(family == 4 ? AF_INET : AF_INET6, s.c_str(), buf) != 1) continue;
    char out[INET6_ADDRSTRLEN];
    ::inet_ntop(family == 4 ? AF_INET : AF_INET6, buf, out, sizeof out);
    return IpPrefix{family, out, family == 4 ? 32 : 128};
  }
  return Fail(ErrorCode::kInvalidArgument, "'" + s + "' is not an IPv4 or IPv6 address");
}

Result<IpPrefix> ParsePrefix(std::string_view text) {
  auto slash = text.find('/');
  KUBERDMA_ASSIGN_OR_RETURN(IpPrefix p, ParseAddress(text.substr(0, slash)));
  if (slash == std::string_view::npos) return p;
  std::string len(text.substr(slash + 1));
  char* end = nullptr;
  long n = std::strtol(len.c_str(), &end, 10);
  int max = p.family == 4 ? 32 : 128;
  if (len.empty() || *end != '\0' || n < 0 || n > max) {
    return Fail(ErrorCode::kInvalidArgument,
                "'" + std::string(text) + "' has an invalid prefix length");
  }
  p.prefix_len = static_cast<int>(n);
  return p;
}

std::vector<uint8_t> EncodeAddress(bool add, int ifindex, const IpPrefix& ip) {
  MsgPtr m(nlmsg_alloc_simple(add ? RTM_NEWADDR : RTM_DELADDR,
                              NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_EXCL : 0)));
  Binary b = ToBinary(ip.family, ip.address);
  ifaddrmsg ifa{};
  ifa.ifa_family = static_cast<uint8_t>(b.af);
  ifa.ifa_prefixlen = static_cast<uint8_t>(ip.prefix_len);
  ifa.ifa_scope = RT_SCOPE_UNIVERSE;
  ifa.ifa_index = static_cast<uint32_t>(ifindex);
  if (ip.family == 6) ifa.ifa_flags = IFA_F_NODAD;
  nlmsg_append(m.get(), &ifa, sizeof ifa, NLMSG_ALIGNTO);
  nla_put(m.get(), IFA_LOCAL, static_cast<int>(b.len), b.bytes);
  nla_put(m.get(), IFA_ADDRESS, static_cast<int>(b.len), b.bytes);
  if (ip.family == 6) nla_put_u32(m.get(), IFA_FLAGS, IFA_F_NODAD);
  return nl::MsgBytes(m.get());
}

std::vector<uint8_t> EncodeRoute(const Route& route) {
  MsgPtr m(nlmsg_alloc_simple(RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL));
  Binary dst = ToBinary(route.dst.family, route.dst.address);
  rtmsg rt{};
  rt.rtm_family = static_cast<uint8_t>(dst.af);
  rt.rtm_dst_len = static_cast<uint8_t>(route.dst.prefix_len);
  rt.rtm_table = RT_TABLE_MAIN;
  rt.rtm_protocol = RTPROT_BOOT;
  rt.rtm_scope = route.gateway.empty() ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
  rt.rtm_type = RTN_UNICAST;
  nlmsg_append(m.get(), &rt, sizeof rt, NLMSG_ALIGNTO);
  if (route.dst.prefix_len > 0) nla_put(m.get(), RTA_DST, static_cast<int>(dst.len), dst.bytes);
  if (!route.gateway.empty()) {
    Binary gw = ToBinary(route.dst.family, route.gateway);
    nla_put(m.get(), RTA_GATEWAY, static_cast<int>(gw.len), gw.bytes);
  }
  nla_put_u32(m.get(), RTA_OIF, static_cast<uint32_t>(route.ifindex));
  return nl::MsgBytes(m.get());
}

Result<void> NetlinkAddrOps::Send(const NetNs& ns, const std::vector<uint8_t>& msg,
                                  const std::string& what) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  if (int err = nl::SendAndAck(sock, msg); err < 0) {
    return Fail(nl::NlError(err, what + " in netns " + ns.path()));
  }
  return {};
}

Result<void> NetlinkAddrOps::AddAddress(const NetNs& ns, int ifindex, const IpPrefix& ip) {
  return Send(ns, EncodeAddress(true, ifindex, ip),
              "add address " + ip.Cidr() + " to ifindex " + std::to_string(ifindex));
}

Result<void> NetlinkAddrOps::DeleteAddress(const NetNs& ns, int ifindex, const IpPrefix& ip) {
  auto r = Send(ns, EncodeAddress(false, ifindex, ip),
                "delete address " + ip.Cidr() + " from ifindex " + std::to_string(ifindex));
  // EADDRNOTAVAIL and ENODEV (both kNotFound): already gone.
  if (!r && r.error().code() == ErrorCode::kNotFound) return {};
  return r;
}

Result<std::vector<std::pair<int, IpPrefix>>> NetlinkAddrOps::ListAllAddresses(const NetNs& ns) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  nl_cache* raw = nullptr;
  int err = rtnl_addr_alloc_cache(sock, &raw);
  if (err < 0) return Fail(nl::NlError(err, "list addresses in netns " + ns.path()));
  CachePtr cache(raw);
  std::vector<std::pair<int, IpPrefix>> out;
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    IpPrefix p;
    p.address = FromBinary(rtnl_addr_get_local(a), &p.family);
    p.prefix_len = rtnl_addr_get_prefixlen(a);
    if (!p.address.empty()) out.emplace_back(rtnl_addr_get_ifindex(a), std::move(p));
  }
  return out;
}

Result<std::vector<IpPrefix>> NetlinkAddrOps::ListAddresses(const NetNs& ns, int ifindex) {
  KUBERDMA_ASSIGN_OR_RETURN(auto all, ListAllAddresses(ns));
  std::vector<IpPrefix> out;
  for (auto& [index, p] : all) {
    if (index == ifindex) out.push_back(std::move(p));
  }
  return out;
}

Result<void> NetlinkAddrOps::AddRoute(const NetNs& ns, const Route& route) {
  return Send(ns, EncodeRoute(route),
              "add route " + route.dst.Cidr() +
                  (route.gateway.empty() ? "" : " via " + route.gateway) + " dev ifindex " +
                  std::to_string(route.ifindex));
}

Result<std::vector<Route>> NetlinkAddrOps::ListAllRoutes(const NetNs& ns) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  nl_cache* raw = nullptr;
  int err = rtnl_route_alloc_cache(sock, AF_UNSPEC, 0, &raw);
  if (err < 0) return Fail(nl::NlError(err, "list routes in netns " + ns.path()));
  CachePtr cache(raw);
  std::vector<Route> out;
  for (nl_object* o = nl_cache_get_first(raw); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    if (rtnl_route_get_table(r) != RT_TABLE_MAIN || rtnl_route_get_nnexthops(r) < 1) continue;
    rtnl_nexthop* nh = rtnl_route_nexthop_n(r, 0);
    Route route;
    route.ifindex = rtnl_route_nh_get_ifindex(nh);
    route.dst.address = FromBinary(rtnl_route_get_dst(r), &route.dst.family);
    route.dst.prefix_len =
        rtnl_route_get_dst(r) ? static_cast<int>(nl_addr_get_prefixlen(rtnl_route_get_dst(r))) : 0;
    int gw_family = 0;
    route.gateway = FromBinary(rtnl_route_nh_get_gateway(nh), &gw_family);
    out.push_back(std::move(route));
  }
  return out;
}

Result<std::vector<Route>> NetlinkAddrOps::ListRoutes(const NetNs& ns, int ifindex) {
  KUBERDMA_ASSIGN_OR_RETURN(auto all, ListAllRoutes(ns));
  std::vector<Route> out;
  for (auto& r : all) {
    if (r.ifindex == ifindex) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kuberdma::link
