// SPDX-License-Identifier: Apache-2.0
// dcbnl over libnl3: the IEEE GET request, its decoding, and the round trip.
#include "kuberdma/dcb/dcb_ops.h"

#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

namespace kuberdma::dcb {

namespace {

using nl::MsgPtr;

void ReadApps(nlattr* table, DcbState* st) {
  nlattr* app = nullptr;
  int rem = 0;
  nla_for_each_nested(app, table, rem) {
    if (nla_type(app) != DCB_ATTR_IEEE_APP || nla_len(app) < static_cast<int>(sizeof(dcb_app))) {
      continue;
    }
    dcb_app a{};
    std::memcpy(&a, nla_data(app), sizeof a);
    if (a.selector == IEEE_8021QAZ_APP_SEL_DSCP) {
      st->dscp.push_back({static_cast<uint8_t>(a.protocol), a.priority});
    }
  }
}

}  // namespace

std::vector<int> DcbState::PfcPriorities() const {
  std::vector<int> out;
  for (int p = 0; p < 8; ++p) {
    if (PfcEnabled(p)) out.push_back(p);
  }
  return out;
}

int DcbState::PriorityOfDscp(uint8_t dscp_value) const {
  for (const auto& m : dscp) {
    if (m.dscp == dscp_value) return m.priority;
  }
  return -1;
}

std::vector<uint8_t> EncodeIeeeGet(const std::string& ifname) {
  MsgPtr m(nlmsg_alloc_simple(RTM_GETDCB, NLM_F_REQUEST));
  dcbmsg d{};
  d.dcb_family = AF_UNSPEC;
  d.cmd = DCB_CMD_IEEE_GET;
  nlmsg_append(m.get(), &d, sizeof d, NLMSG_ALIGNTO);
  nla_put_string(m.get(), DCB_ATTR_IFNAME, ifname.c_str());
  return nl::MsgBytes(m.get());
}

Result<DcbState> DecodeIeeeGet(std::span<const uint8_t> msg) {
  if (msg.size() < NLMSG_HDRLEN + sizeof(dcbmsg)) {
    return Fail(ErrorCode::kInvalidArgument, "DCB reply is truncated");
  }
  std::vector<uint8_t> copy(msg.begin(), msg.end());
  auto* h = reinterpret_cast<nlmsghdr*>(copy.data());
  if (h->nlmsg_type != RTM_GETDCB || h->nlmsg_len > copy.size()) {
    return Fail(ErrorCode::kInvalidArgument, "not a DCB reply");
  }
  nlattr* tb[DCB_ATTR_MAX + 1] = {};
  if (nlmsg_parse(h, sizeof(dcbmsg), tb, DCB_ATTR_MAX, nullptr) < 0 || !tb[DCB_ATTR_IEEE]) {
    return Fail(ErrorCode::kInvalidArgument, "DCB reply has no DCB_ATTR_IEEE");
  }
  nlattr* ieee[DCB_ATTR_IEEE_MAX + 1] = {};
  if (nla_parse_nested(ieee, DCB_ATTR_IEEE_MAX, tb[DCB_ATTR_IEEE], nullptr) < 0) {
    return Fail(ErrorCode::kInvalidArgument, "DCB_ATTR_IEEE does not parse");
  }
  DcbState st;
  if (ieee[DCB_ATTR_IEEE_PFC] != nullptr &&
      nla_len(ieee[DCB_ATTR_IEEE_PFC]) >= static_cast<int>(sizeof(ieee_pfc))) {
    ieee_pfc pfc{};
    std::memcpy(&pfc, nla_data(ieee[DCB_ATTR_IEEE_PFC]), sizeof pfc);
    st.pfc_cap = pfc.pfc_cap;
    st.pfc_enabled = pfc.pfc_en;
  }
  if (ieee[DCB_ATTR_IEEE_APP_TABLE] != nullptr) ReadApps(ieee[DCB_ATTR_IEEE_APP_TABLE], &st);
  if (tb[DCB_ATTR_DCBX] != nullptr) st.dcbx = nla_get_u8(tb[DCB_ATTR_DCBX]);
  return st;
}

Result<DcbState> NetlinkDcbOps::Get(const NetNs& ns, const std::string& ifname) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, socks_.Get(ns, NETLINK_ROUTE, false));
  std::string what = "read DCB state of " + ifname;
  std::vector<std::vector<uint8_t>> replies;
  if (int err = nl::SendAndCollect(sock, EncodeIeeeGet(ifname), &replies); err < 0) {
    Error e = nl::NlError(err, what);
    if (e.code() == ErrorCode::kUnsupported) {
      return Fail(ErrorCode::kUnsupported,
                  ifname + "'s driver has no DCB support (" + e.message() + ")");
    }
    return Fail(e);
  }
  if (replies.empty()) return Fail(ErrorCode::kIo, what + ": the kernel sent no answer");
  return DecodeIeeeGet(replies.back());
}

}  // namespace kuberdma::dcb
