// SPDX-License-Identifier: Apache-2.0
// libnl's own encodings, for tests that check ours against them: the node library is the only
// code that includes libnl, so the reference lives here, beside the other test support.
//
//   auto theirs = LibnlVfGuidChange(12, 2, guid, guid);   // rtnl_link_vf_set_ib_*_guid
//   auto attrs = VfInfoAttributes(theirs);                  // IFLA_VF_* payloads by type
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace kuberdma::testing {

// The RTM_NEWLINK libnl builds (rtnl_link_build_add_request) for link `ifindex` carrying one VF,
// `vf`, with these IB node and port GUIDs set through rtnl_link_vf_set_ib_{node,port}_guid.
std::vector<uint8_t> LibnlVfGuidChange(int ifindex, uint32_t vf, uint64_t node_guid,
                                       uint64_t port_guid);

// The attributes of the first IFLA_VF_INFO of an RTM_NEWLINK message (header included), by
// IFLA_VF_* type, as raw payloads; empty when it has none.
std::map<int, std::vector<uint8_t>> VfInfoAttributes(const std::vector<uint8_t>& msg);

}  // namespace kuberdma::testing
