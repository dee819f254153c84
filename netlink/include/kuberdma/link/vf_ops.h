// SPDX-License-Identifier: Apache-2.0
// SR-IOV virtual functions as their physical function's driver sees them: what each VF of a PF is
// set to (rtnetlink IFLA_VFINFO_LIST, asked for with RTEXT_FILTER_VF) and changing it through the
// PF (RTM_NEWLINK on the PF carrying IFLA_VFINFO_LIST > IFLA_VF_INFO > IFLA_VF_*). A VF's own
// netdev cannot set these: they are the NIC's switch's view of the VF (its MAC, VLAN,
// spoof-check, trust, link state, rates; on InfiniBand its node and port GUID).
//
//   NetlinkVfOps vfs;
//   KUBERDMA_ASSIGN_OR_RETURN(std::vector<VfConfig> now, vfs.List(host, pf.ifindex));
//   KUBERDMA_TRY(vfs.Set(host, pf.ifindex, {.vf = 3, .mac = "02:5a:00:00:03:01", .spoofchk =
//   true}));
//
// Encoders and the decoder are pure and public, so the exact bytes are tested against the uapi
// and libnl's own encoding; the seam (VfOps) is what the CNI and the tests' fakes implement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/netns/netns.h"

namespace kuberdma::link {

using netns::NetNs;

// IFLA_VF_LINK_STATE_{AUTO,ENABLE,DISABLE}: the VF's link follows the PF's, is forced up, or
// forced down.
enum class VfLinkState : uint32_t { kAuto = 0, kEnable = 1, kDisable = 2 };
// "auto", "enable", "disable" (as `ip link set ... vf N state` spells them).
std::string_view VfLinkStateName(VfLinkState s);
std::optional<VfLinkState> ParseVfLinkState(std::string_view name);

// One VF as the PF reports it. Fields the driver does not report keep their defaults and the
// matching `has_*` is false (igb reports no link state or GUIDs; GUIDs only on InfiniBand).
struct VfConfig {
  uint32_t vf = 0;
  std::string mac;  // "aa:bb:cc:dd:ee:ff"; on InfiniBand the first 6 bytes are meaningless
  uint16_t vlan = 0;
  uint8_t qos = 0;
  bool spoofchk = false;
  bool trust = false;
  VfLinkState link_state = VfLinkState::kAuto;
  uint32_t min_tx_rate = 0;  // Mbit/s, 0: no minimum
  uint32_t max_tx_rate = 0;  // Mbit/s, 0: no limit
  uint64_t node_guid = 0;    // InfiniBand only
  uint64_t port_guid = 0;
  bool has_spoofchk = false;
  bool has_trust = false;
  bool has_link_state = false;
  bool has_rate = false;
  bool has_guids = false;
};

// What to change on one VF; unset fields are not sent, so the driver leaves them. A VLAN is sent
// with its QoS (IFLA_VF_VLAN carries both); rates are sent together (IFLA_VF_RATE carries both).
struct VfChange {
  uint32_t vf = 0;
  std::optional<std::string> mac;
  std::optional<uint16_t> vlan;  // 0: no VLAN
  uint8_t qos = 0;               // with `vlan`
  std::optional<bool> spoofchk;
  std::optional<bool> trust;
  std::optional<VfLinkState> link_state;
  std::optional<uint32_t> min_tx_rate;  // with max_tx_rate: both or neither
  std::optional<uint32_t> max_tx_rate;
  std::optional<uint64_t> node_guid;
  std::optional<uint64_t> port_guid;

  bool Empty() const {
    return !mac && !vlan && !spoofchk && !trust && !link_state && !min_tx_rate && !max_tx_rate &&
           !node_guid && !port_guid;
  }
};

// The change that puts every field `now` reports back as it is in `was` (what DEL sends): only
// the fields that differ, and only those the driver reports.
VfChange RestoreChange(const VfConfig& was, const VfConfig& now);

class VfOps {
 public:
  virtual ~VfOps() = default;
  // Every VF of the PF `pf_ifindex` in `ns`, in VF order. An empty list for a link that has no
  // VFs (or is not a PF).
  virtual Result<std::vector<VfConfig>> List(const NetNs& ns, int pf_ifindex) = 0;
  // Applies `change` to VF `change.vf` of PF `pf_ifindex`, in one RTM_NEWLINK. The kernel applies
  // the attributes in a fixed order and stops at the first the driver refuses (kUnsupported for
  // EOPNOTSUPP, kInvalidArgument for EINVAL): callers that must undo read the VF back first.
  virtual Result<void> Set(const NetNs& ns, int pf_ifindex, const VfChange& change) = 0;
};

// RTM_GETLINK for `pf_ifindex` with IFLA_EXT_MASK = RTEXT_FILTER_VF (without it the kernel leaves
// the VF list out).
std::vector<uint8_t> EncodeVfGet(int pf_ifindex);
// RTM_NEWLINK on `pf_ifindex` carrying `change`. kInvalidArgument for a MAC that does not parse.
Result<std::vector<uint8_t>> EncodeVfChange(int pf_ifindex, const VfChange& change);
// The VFs of an RTM_NEWLINK answer (the whole message, header included); an answer without
// IFLA_VFINFO_LIST is an empty list. kInvalidArgument for a message that does not parse.
Result<std::vector<VfConfig>> DecodeVfList(const std::vector<uint8_t>& msg);

// GUIDs as `ip link` and sysfs spell them: "0011:2233:4455:6677" (sysfs node_guid) or
// "00:11:22:33:44:55:66:77" (`ip link ... node_guid`, CNI args). Parse takes either;
// kInvalidArgument otherwise.
Result<uint64_t> ParseGuid(std::string_view text);
std::string FormatGuidColons(uint64_t guid);  // "00:11:22:33:44:55:66:77"
std::string FormatGuidSysfs(uint64_t guid);   // "0011:2233:4455:6677"

}  // namespace kuberdma::link
