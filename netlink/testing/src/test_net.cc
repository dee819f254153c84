// SPDX-License-Identifier: Apache-2.0
// Test-only links and qdiscs over libnl3 rtnetlink.
#include "kuberdma/testing/test_net.h"

#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

namespace kuberdma::testing {

using link::LinkInfo;
using nl::NlError;

namespace {

std::string FormatPercent(double percent) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", percent);
  return buf;
}

using nl::MsgPtr;

MsgPtr NewRootQdisc(int ifindex, const char* kind) {
  MsgPtr m(
      nlmsg_alloc_simple(RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE));
  tcmsg tc{};
  tc.tcm_family = AF_UNSPEC;
  tc.tcm_ifindex = ifindex;
  tc.tcm_handle = 0x10000;  // 1:0
  tc.tcm_parent = TC_H_ROOT;
  nlmsg_append(m.get(), &tc, sizeof tc, NLMSG_ALIGNTO);
  nla_put_string(m.get(), TCA_KIND, kind);
  return m;
}

}  // namespace

std::vector<uint8_t> EncodeTbf(int ifindex, uint64_t bits_per_second) {
  const uint64_t bytes = std::max<uint64_t>(bits_per_second / 8, 1);
  // A burst of 4 ms at the rate, and never below two 64 KiB GSO super-packets: tbf segments what
  // exceeds it, but a burst below the MTU would stall the queue.
  const auto burst = static_cast<uint32_t>(std::max<uint64_t>(bytes / 250, uint64_t{2} * 65536));
  tc_tbf_qopt q{};
  q.rate.rate =
      static_cast<uint32_t>(std::min<uint64_t>(bytes, std::numeric_limits<uint32_t>::max()));
  // A queue of 50 ms at the rate on top of the burst (tc's `latency 50ms`).
  q.limit = static_cast<uint32_t>(
      std::min<uint64_t>(bytes / 20 + burst, std::numeric_limits<uint32_t>::max()));
  // buffer is the burst's transmission time in psched ticks of 64 ns (PSCHED_SHIFT); the kernel
  // recomputes it from TCA_TBF_BURST, which is sent too.
  q.buffer = static_cast<uint32_t>(std::min<double>(1e9 * burst / static_cast<double>(bytes) / 64.0,
                                                    std::numeric_limits<uint32_t>::max()));
  MsgPtr m = NewRootQdisc(ifindex, "tbf");
  nlattr* opts = nla_nest_start(m.get(), TCA_OPTIONS);
  nla_put(m.get(), TCA_TBF_PARMS, sizeof q, &q);
  if (bytes > std::numeric_limits<uint32_t>::max()) nla_put_u64(m.get(), TCA_TBF_RATE64, bytes);
  nla_put_u32(m.get(), TCA_TBF_BURST, burst);
  nla_nest_end(m.get(), opts);
  return nl::MsgBytes(m.get());
}

std::vector<uint8_t> EncodeNetemLoss(int ifindex, double percent) {
  tc_netem_qopt q{};
  q.limit = 1000;  // packets, netem's default
  double p = std::clamp(percent, 0.0, 100.0) / 100.0;
  q.loss = static_cast<uint32_t>(std::llround(p * std::numeric_limits<uint32_t>::max()));
  MsgPtr m = NewRootQdisc(ifindex, "netem");
  // netem's options are its struct itself, not a nest (netem_change's parse_attr).
  nla_put(m.get(), TCA_OPTIONS, sizeof q, &q);
  return nl::MsgBytes(m.get());
}

// A veth pair as `ip link add NAME type veth peer name PEER` sends it. Built by hand: libnl's
// rtnl_link_veth_alloc/release leaks the peer object (Debian's 3.7, found by LeakSanitizer).
std::vector<uint8_t> EncodeVeth(const std::string& name, const std::string& peer) {
  MsgPtr m(nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL));
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO);
  nla_put_string(m.get(), IFLA_IFNAME, name.c_str());
  nlattr* info = nla_nest_start(m.get(), IFLA_LINKINFO);
  nla_put_string(m.get(), IFLA_INFO_KIND, "veth");
  nlattr* data = nla_nest_start(m.get(), IFLA_INFO_DATA);
  // VETH_INFO_PEER carries the peer's ifinfomsg followed by its attributes.
  nlattr* p = nla_nest_start(m.get(), VETH_INFO_PEER);
  nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO);
  nla_put_string(m.get(), IFLA_IFNAME, peer.c_str());
  nla_nest_end(m.get(), p);
  nla_nest_end(m.get(), data);
  nla_nest_end(m.get(), info);
  return nl::MsgBytes(m.get());
}

Result<void> TestNet::CreateVeth(const NetNs& ns, const std::string& name, const NetNs& peer_ns,
                                 const std::string& peer) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  int err = nl::SendAndAck(sock, EncodeVeth(name, peer));
  if (err < 0) return Fail(NlError(err, "create veth " + name + "/" + peer));
  if (peer_ns.SameAs(ns)) return {};
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo p, links_.GetByName(ns, peer));
  return links_.MoveTo(ns, p.ifindex, peer_ns, {});
}

Result<void> TestNet::CreateLink(const NetNs& ns, const std::string& name, const std::string& kind,
                                 const std::string& lower) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  int lower_index = 0;
  if (!lower.empty()) {
    KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, links_.GetByName(ns, lower));
    lower_index = l.ifindex;
  }
  rtnl_link* l = rtnl_link_alloc();
  if (l == nullptr) return Fail(ErrorCode::kIo, "allocate link");
  rtnl_link_set_name(l, name.c_str());
  int err = rtnl_link_set_type(l, kind.c_str());
  if (err >= 0 && lower_index != 0) rtnl_link_set_link(l, lower_index);
  if (err >= 0) err = rtnl_link_add(sock, l, NLM_F_CREATE | NLM_F_EXCL);
  rtnl_link_put(l);
  if (err < 0) return Fail(NlError(err, "create " + kind + " link " + name));
  return {};
}

Result<void> TestNet::DeleteLink(const NetNs& ns, const std::string& name) {
  auto l = links_.GetByName(ns, name);
  if (!l) return l.error().code() == ErrorCode::kNotFound ? Result<void>{} : Fail(l.error());
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  rtnl_link* del = rtnl_link_alloc();
  rtnl_link_set_ifindex(del, l->ifindex);
  int err = rtnl_link_delete(sock, del);
  rtnl_link_put(del);
  if (err < 0 && -err != NLE_NODEV && -err != NLE_OBJ_NOTFOUND) {
    return Fail(NlError(err, "delete link " + name));
  }
  return {};
}

Result<void> TestNet::SetMaster(const NetNs& ns, const std::string& name,
                                const std::string& master) {
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo port, links_.GetByName(ns, name));
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo bridge, links_.GetByName(ns, master));
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  int err = rtnl_link_enslave_ifindex(sock, bridge.ifindex, port.ifindex);
  if (err < 0) return Fail(NlError(err, "make " + name + " a port of " + master));
  return {};
}

Result<void> TestNet::ReplaceRootQdisc(const NetNs& ns, const std::string& name,
                                       const std::vector<uint8_t>& msg, const std::string& what) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, true));
  if (int err = nl::SendAndAck(sock, msg); err < 0) {
    Error e = NlError(err, what + " on " + name);
    // ENOENT from RTM_NEWQDISC: the qdisc kind's module is not in this kernel.
    if (-err == NLE_OBJ_NOTFOUND) {
      return Fail(ErrorCode::kUnsupported,
                  what + " on " + name + ": this kernel does not know the qdisc (its module, " +
                      "sch_tbf or sch_netem, is not loaded or not built)");
    }
    return Fail(e);
  }
  return {};
}

Result<void> TestNet::SetRateLimit(const NetNs& ns, const std::string& name,
                                   uint64_t bits_per_second) {
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, links_.GetByName(ns, name));
  return ReplaceRootQdisc(ns, name, EncodeTbf(l.ifindex, bits_per_second),
                          "set tbf rate " + std::to_string(bits_per_second) + " bit/s");
}

Result<void> TestNet::SetLoss(const NetNs& ns, const std::string& name, double percent) {
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, links_.GetByName(ns, name));
  return ReplaceRootQdisc(ns, name, EncodeNetemLoss(l.ifindex, percent),
                          "set netem loss " + FormatPercent(percent));
}

}  // namespace kuberdma::testing
