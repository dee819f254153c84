// SPDX-License-Identifier: Apache-2.0
// Mode vf's own rules: which MAC or GUID a VF is given, what the PF is asked to set, and the
// record's JSON form of a VF's settings. Planning (plan.cc) and the steps that change the PF
// (plugin.cc) share them.
//
//   link::VfChange want = WantedVfChange(*conf.vf, index, "InfiniBand", mac, guid);
//   rec.vf->before = VfConfigToJson(before);           // restored on every undo path
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kuberdma/cni/config.h"
#include "kuberdma/cni/partitions.h"  // GeneratedVfGuid
#include "kuberdma/cni/types.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/link/vf_ops.h"
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::cni {

// A GUID a VF may be given (runtimeConfig.infinibandGUID, CNI_ARGS GUID): 8 octets in either of
// `ip link`'s and sysfs' spellings, not zero, not all ones, not a group (multicast) identifier.
// Error 7 naming `field` otherwise.
CniResult<uint64_t> CheckVfGuid(std::string_view text, std::string_view field);

// The MAC an Ethernet VF gets when the pod asked for none: locally administered, unicast,
// derived from the attachment's identity and `salt` (tried again with the next salt while the
// node already has the MAC), so no two pods' VFs on a node share one.
std::string GeneratedVfMac(const std::string& network, const std::string& container_id,
                           const std::string& ifname, uint32_t salt);

// What the PF is asked to set on VF `index` for `vf`: on Ethernet the MAC, VLAN and QoS,
// spoof-check, trust; on InfiniBand the node and port GUID (both `guid`); link state and rates
// on both. Error 7 for a field the fabric has no such setting for (a VLAN on InfiniBand).
CniResult<link::VfChange> WantedVfChange(const VfConf& vf, uint32_t index, bool infiniband,
                                         const std::string& mac, uint64_t guid);

// The netdev in `host` of the PCI function at `address` (a PF, or a VF back from its rebind):
// the first name sysfs lists that rtnetlink finds there. kNotFound naming the address otherwise.
Result<link::LinkInfo> HostNetdevAt(link::LinkOps& links, const sysfs::SysfsRoot& root,
                                    const std::string& address, const link::NetNs& host);

// VF `index` as the PF `pf_ifindex` of `host` reports it now; nullopt when the PF reports no
// such VF, the listing's own error when the PF cannot be read.
Result<std::optional<link::VfConfig>> ReportedVf(link::VfOps& vfs, const link::NetNs& host,
                                                 int pf_ifindex, uint32_t index);

// A VF's settings as a record keeps them, and back. FromJson reads only what ToJson wrote and
// marks the rest as unreported (a hand-edited record never invents a setting to restore).
nlohmann::json VfConfigToJson(const link::VfConfig& v);
link::VfConfig VfConfigFromJson(const nlohmann::json& j);
nlohmann::json VfChangeToJson(const link::VfChange& c);

// How the PF's report `now` differs from what ADD `set` (VfChangeToJson): "vlan is 0 (ADD set
// 101)" for the first field that differs, "" when every setting the driver reports holds.
std::string VfDrift(const nlohmann::json& set, const link::VfConfig& now);

}  // namespace kuberdma::cni
