// SPDX-License-Identifier: Apache-2.0
// Data Center Bridging state of a netdev over rtnetlink (dcbnl, RTM_GETDCB with
// DCB_CMD_IEEE_GET): which priorities have PFC, and the APP table, whose DSCP entries mean the
// port trusts DSCP (mlx5 switches to DSCP trust when the first one is set). What a lossless RoCE
// host needs, read the way `dcb` and `mlnx_qos` read it.
//
//   NetlinkDcbOps dcb;
//   auto st = dcb.Get(host, "ens1f0np0");
//   if (!st && st.error().code() == ErrorCode::kUnsupported) ...  // no DCB in the driver (veth)
//   else if (st && !st->PfcEnabled(3)) ...                          // priority 3 is lossy
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/nl/common.h"

namespace kuberdma::dcb {

using netns::NetNs;

struct DscpMapping {
  uint8_t dscp = 0;
  uint8_t priority = 0;
  bool operator==(const DscpMapping&) const = default;
};

struct DcbState {
  uint8_t pfc_cap = 0;            // how many traffic classes may have PFC at once
  uint8_t pfc_enabled = 0;        // bit p: PFC on priority p
  std::vector<DscpMapping> dscp;  // APP entries with the DSCP selector, in table order
  uint8_t dcbx = 0;               // DCB_ATTR_DCBX mode bits (0 when not reported)

  bool PfcEnabled(int priority) const { return ((pfc_enabled >> priority) & 1) != 0; }
  std::vector<int> PfcPriorities() const;
  // DSCP trust (else the port trusts PCP, the 802.1p bits of a VLAN tag).
  bool TrustsDscp() const { return !dscp.empty(); }
  // The priority DSCP value `dscp_value` maps to, or -1 when the table does not map it.
  int PriorityOfDscp(uint8_t dscp_value) const;
  bool operator==(const DcbState&) const = default;
};

class DcbOps {
 public:
  virtual ~DcbOps() = default;
  // The IEEE DCB state of `ifname` in `ns`. kUnsupported when its driver has no DCB support (the
  // kernel answers EOPNOTSUPP: veths, most virtual links); kNotFound for no such netdev.
  virtual Result<DcbState> Get(const NetNs& ns, const std::string& ifname) = 0;
};

class NetlinkDcbOps final : public DcbOps {
 public:
  Result<DcbState> Get(const NetNs& ns, const std::string& ifname) override;

 private:
  nl::NlSocketCache socks_;
};

// RTM_GETDCB: struct dcbmsg {AF_UNSPEC, DCB_CMD_IEEE_GET} and DCB_ATTR_IFNAME.
std::vector<uint8_t> EncodeIeeeGet(const std::string& ifname);
// The kernel's answer to it: DCB_ATTR_IEEE's DCB_ATTR_IEEE_PFC (struct ieee_pfc) and
// DCB_ATTR_IEEE_APP_TABLE (struct dcb_app entries), and DCB_ATTR_DCBX. kInvalidArgument for a
// truncated or foreign message.
Result<DcbState> DecodeIeeeGet(std::span<const uint8_t> msg);

}  // namespace kuberdma::dcb
