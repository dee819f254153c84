// SPDX-License-Identifier: Apache-2.0
// SR-IOV VF settings through the PF over rtnetlink: the pure encoders and decoder, GUID text, and
// NetlinkVfOps (one socket per namespace, as the other rtnetlink operations).
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <utility>

#include "kuberdma/link/netlink_vf_ops.h"
#include "kuberdma/nl/common.h"

namespace kuberdma::link {

using nl::MsgPtr;

std::string_view VfLinkStateName(VfLinkState s) {
  switch (s) {
    case VfLinkState::kAuto:
      return "auto";
    case VfLinkState::kEnable:
      return "enable";
    case VfLinkState::kDisable:
      return "disable";
  }
  return "auto";
}

std::optional<VfLinkState> ParseVfLinkState(std::string_view name) {
  if (name == "auto") return VfLinkState::kAuto;
  if (name == "enable") return VfLinkState::kEnable;
  if (name == "disable") return VfLinkState::kDisable;
  return std::nullopt;
}

VfChange RestoreChange(const VfConfig& was, const VfConfig& now) {
  VfChange c{.vf = was.vf};
  if (NormalizeMac(was.mac) != NormalizeMac(now.mac)) c.mac = was.mac;
  if (was.vlan != now.vlan || was.qos != now.qos) {
    c.vlan = was.vlan;
    c.qos = was.qos;
  }
  if (now.has_spoofchk && was.spoofchk != now.spoofchk) c.spoofchk = was.spoofchk;
  if (now.has_trust && was.trust != now.trust) c.trust = was.trust;
  if (now.has_link_state && was.link_state != now.link_state) c.link_state = was.link_state;
  if (now.has_rate && (was.min_tx_rate != now.min_tx_rate || was.max_tx_rate != now.max_tx_rate)) {
    c.min_tx_rate = was.min_tx_rate;
    c.max_tx_rate = was.max_tx_rate;
  }
  if (now.has_guids && was.node_guid != now.node_guid) c.node_guid = was.node_guid;
  if (now.has_guids && was.port_guid != now.port_guid) c.port_guid = was.port_guid;
  return c;
}

namespace {

std::string MacText(const uint8_t* b) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4],
                b[5]);
  return buf;
}

// The VF attributes in the order the kernel's do_setvfinfo applies them (MAC, VLAN, rate,
// spoof-check, link state, trust, GUIDs): a driver's refusal stops it there.
Result<void> PutVfAddressing(nl_msg* m, const VfChange& c) {
  if (c.mac) {
    KUBERDMA_ASSIGN_OR_RETURN(auto bytes, MacBytes(*c.mac));
    ifla_vf_mac v{};
    v.vf = c.vf;
    std::memcpy(v.mac, bytes.data(), bytes.size());
    nla_put(m, IFLA_VF_MAC, sizeof v, &v);
  }
  if (c.vlan) {
    ifla_vf_vlan v{.vf = c.vf, .vlan = *c.vlan, .qos = c.qos};
    nla_put(m, IFLA_VF_VLAN, sizeof v, &v);
  }
  if (c.min_tx_rate || c.max_tx_rate) {
    ifla_vf_rate v{.vf = c.vf,
                   .min_tx_rate = c.min_tx_rate.value_or(0),
                   .max_tx_rate = c.max_tx_rate.value_or(0)};
    nla_put(m, IFLA_VF_RATE, sizeof v, &v);
  }
  return {};
}

void PutVfPolicy(nl_msg* m, const VfChange& c) {
  if (c.spoofchk) {
    ifla_vf_spoofchk v{.vf = c.vf, .setting = *c.spoofchk ? 1U : 0U};
    nla_put(m, IFLA_VF_SPOOFCHK, sizeof v, &v);
  }
  if (c.link_state) {
    ifla_vf_link_state v{.vf = c.vf, .link_state = static_cast<uint32_t>(*c.link_state)};
    nla_put(m, IFLA_VF_LINK_STATE, sizeof v, &v);
  }
  if (c.trust) {
    ifla_vf_trust v{.vf = c.vf, .setting = *c.trust ? 1U : 0U};
    nla_put(m, IFLA_VF_TRUST, sizeof v, &v);
  }
  // struct ifla_vf_guid has 4 bytes of padding between vf and guid: zeroed, as the kernel reads
  // only the fields (libnl leaves them as they were).
  for (auto [type, guid] : {std::pair{IFLA_VF_IB_NODE_GUID, c.node_guid},
                            std::pair{IFLA_VF_IB_PORT_GUID, c.port_guid}}) {
    if (!guid) continue;
    ifla_vf_guid v;
    std::memset(&v, 0, sizeof v);
    v.vf = c.vf;
    v.guid = *guid;
    nla_put(m, type, sizeof v, &v);
  }
}

Result<void> PutVf(nl_msg* m, const VfChange& c) {
  KUBERDMA_TRY(PutVfAddressing(m, c));
  PutVfPolicy(m, c);
  return {};
}

// Copies attribute `a`'s payload into `out` when it is at least as long (older kernels' structs
// are never longer than the uapi's; a shorter one is malformed and skipped).
template <typename T>
bool Payload(const nlattr* a, T* out) {
  if (a == nullptr || nla_len(a) < static_cast<int>(sizeof(T))) return false;
  std::memcpy(out, nla_data(a), sizeof(T));
  return true;
}

VfConfig DecodeVf(nlattr* info) {
  nlattr* tb[IFLA_VF_MAX + 1] = {};
  nla_parse_nested(tb, IFLA_VF_MAX, info, nullptr);
  VfConfig v;
  if (ifla_vf_mac mac{}; Payload(tb[IFLA_VF_MAC], &mac)) {
    v.vf = mac.vf;
    v.mac = MacText(mac.mac);
  }
  if (ifla_vf_vlan vl{}; Payload(tb[IFLA_VF_VLAN], &vl)) {
    v.vlan = static_cast<uint16_t>(vl.vlan);
    v.qos = static_cast<uint8_t>(vl.qos);
  }
  if (ifla_vf_spoofchk s{}; Payload(tb[IFLA_VF_SPOOFCHK], &s) && s.setting != ~0U) {
    v.spoofchk = s.setting != 0;
    v.has_spoofchk = true;
  }
  if (ifla_vf_trust t{}; Payload(tb[IFLA_VF_TRUST], &t) && t.setting != ~0U) {
    v.trust = t.setting != 0;
    v.has_trust = true;
  }
  if (ifla_vf_link_state ls{}; Payload(tb[IFLA_VF_LINK_STATE], &ls) && ls.link_state <= 2) {
    v.link_state = static_cast<VfLinkState>(ls.link_state);
    v.has_link_state = true;
  }
  if (ifla_vf_rate r{}; Payload(tb[IFLA_VF_RATE], &r)) {
    v.min_tx_rate = r.min_tx_rate;
    v.max_tx_rate = r.max_tx_rate;
    v.has_rate = true;
  }
  ifla_vf_guid node{};
  ifla_vf_guid port{};
  if (Payload(tb[IFLA_VF_IB_NODE_GUID], &node) && Payload(tb[IFLA_VF_IB_PORT_GUID], &port)) {
    v.node_guid = node.guid;
    v.port_guid = port.guid;
    v.has_guids = true;
  }
  return v;
}

}  // namespace

std::vector<uint8_t> EncodeVfGet(int pf_ifindex) {
  MsgPtr m(nlmsg_alloc_simple(RTM_GETLINK, NLM_F_REQUEST));
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = pf_ifindex;
  nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO);
  nla_put_u32(m.get(), IFLA_EXT_MASK, RTEXT_FILTER_VF);
  return nl::MsgBytes(m.get());
}

Result<std::vector<uint8_t>> EncodeVfChange(int pf_ifindex, const VfChange& change) {
  MsgPtr m(nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK));
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = pf_ifindex;
  nlmsg_append(m.get(), &ifi, sizeof ifi, NLMSG_ALIGNTO);
  nlattr* list = nla_nest_start(m.get(), IFLA_VFINFO_LIST);
  nlattr* info = nla_nest_start(m.get(), IFLA_VF_INFO);
  KUBERDMA_TRY(PutVf(m.get(), change));
  nla_nest_end(m.get(), info);
  nla_nest_end(m.get(), list);
  return nl::MsgBytes(m.get());
}

Result<std::vector<VfConfig>> DecodeVfList(const std::vector<uint8_t>& msg) {
  const auto* hdr = reinterpret_cast<const nlmsghdr*>(msg.data());
  if (msg.size() < NLMSG_HDRLEN || hdr->nlmsg_len > msg.size() ||
      nlmsg_valid_hdr(hdr, sizeof(ifinfomsg)) == 0) {
    return Fail(ErrorCode::kInvalidArgument, "the link answer is not an RTM_NEWLINK message");
  }
  nlattr* tb[IFLA_MAX + 1] = {};
  if (nlmsg_parse(const_cast<nlmsghdr*>(hdr), sizeof(ifinfomsg), tb, IFLA_MAX, nullptr) < 0) {
    return Fail(ErrorCode::kInvalidArgument, "the link answer's attributes do not parse");
  }
  std::vector<VfConfig> out;
  if (tb[IFLA_VFINFO_LIST] == nullptr) return out;
  nlattr* a = nullptr;
  int rem = 0;
  nla_for_each_nested(a, tb[IFLA_VFINFO_LIST], rem) {
    if (nla_type(a) == IFLA_VF_INFO) out.push_back(DecodeVf(a));
  }
  return out;
}

Result<uint64_t> ParseGuid(std::string_view text) {
  std::string hex;
  size_t groups = 1;
  for (char ch : text) {
    if (ch == ':') {
      ++groups;
      continue;
    }
    if (std::isxdigit(static_cast<unsigned char>(ch)) == 0) break;
    hex += ch;
  }
  bool sysfs_form = groups == 4 && text.size() == 19;
  bool colon_form = groups == 8 && text.size() == 23;
  if (hex.size() != 16 || !(sysfs_form || colon_form)) {
    return Fail(ErrorCode::kInvalidArgument,
                "GUID '" + std::string(text) +
                    "' is neither 00:11:22:33:44:55:66:77 nor 0011:2233:4455:6677");
  }
  return std::stoull(hex, nullptr, 16);
}

std::string FormatGuidColons(uint64_t guid) {
  std::string out;
  char buf[4];
  for (int i = 7; i >= 0; --i) {
    std::snprintf(buf, sizeof buf, i == 7 ? "%02x" : ":%02x",
                  static_cast<unsigned>((guid >> (8 * i)) & 0xff));
    out += buf;
  }
  return out;
}

std::string FormatGuidSysfs(uint64_t guid) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%04x:%04x:%04x:%04x", static_cast<unsigned>(guid >> 48),
                static_cast<unsigned>((guid >> 32) & 0xffff),
                static_cast<unsigned>((guid >> 16) & 0xffff), static_cast<unsigned>(guid & 0xffff));
  return buf;
}

NetlinkVfOps::NetlinkVfOps() = default;
NetlinkVfOps::~NetlinkVfOps() = default;

Result<std::vector<VfConfig>> NetlinkVfOps::List(const NetNs& ns, int pf_ifindex) {
  // GETs get their reply; the SET below carries its own NLM_F_ACK.
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, false));
  std::vector<std::vector<uint8_t>> replies;
  if (int err = nl::SendAndCollect(sock, EncodeVfGet(pf_ifindex), &replies); err < 0) {
    return Fail(nl::NlError(
        err, "read the VFs of ifindex " + std::to_string(pf_ifindex) + " in netns " + ns.path()));
  }
  if (replies.empty()) return std::vector<VfConfig>{};
  return DecodeVfList(replies.front());
}

Result<void> NetlinkVfOps::Set(const NetNs& ns, int pf_ifindex, const VfChange& change) {
  if (change.Empty()) return {};
  KUBERDMA_ASSIGN_OR_RETURN(auto msg, EncodeVfChange(pf_ifindex, change));
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, false));
  if (int err = nl::SendAndAck(sock, msg); err < 0) {
    return Fail(nl::NlError(err, "set VF " + std::to_string(change.vf) + " through ifindex " +
                                     std::to_string(pf_ifindex) + " in netns " + ns.path()));
  }
  return {};
}

}  // namespace kuberdma::link
