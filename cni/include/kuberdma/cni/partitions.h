// SPDX-License-Identifier: Apache-2.0
// InfiniBand partitions as the node hands them out: which port GUID each attachment needs in
// which partition (pkey), the GUIDs a VF is given when the pod names none, opensm's
// partitions.conf entries for all of them, and the hook an external subnet manager (UFM-style
// REST) is told through. Membership is the subnet manager's to grant; the node only says whom.
//
//   auto members = PartitionMembers(records, root);        // from the CNI's state records
//   std::string conf = RenderPartitionsConf("gpu-17", members);  // for opensm's partitions.conf
//
// The CNI calls a node's `partitionHook` (rails/node_config.h) with each VF GUID it gives a pod on
// a partition, and again when the VF is given back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::cni {

// The GUID an InfiniBand VF gets when the pod asked for none: deterministic for the VF (the same
// every time it is handed out, so a subnet manager can be told every VF's GUID ahead), never zero,
// and unique in the cluster. 0x02 (locally administered) in the top octet, VF index + 1 in the
// next, an 8-bit fold of the PF's OUI, then the PF node GUID's low 40 bits (the vendor's serial):
// VFs of one PF differ in their index, VFs of different PFs in the PF's serial.
// kInvalidArgument for a zero PF GUID or an index over 254.
Result<uint64_t> GeneratedVfGuid(uint64_t pf_node_guid, uint32_t vf_index);

// One port GUID that must be a full member of partition `pkey`, and who needs it.
struct PartitionMember {
  uint16_t pkey = 0;  // with the full-membership bit, as NADs and sysfs write it
  uint64_t guid = 0;
  std::string why;  // "pod ns/cid net1 (VF 2 of 0000:1a:00.0)", "VF 3 of mlx5_0 (derived)"
};

// The member a mode vf attachment on a partition needs: its pkey and the GUID ADD gave its VF;
// nullopt for any other record (RoCE, the default pkey, no GUID set yet).
std::optional<PartitionMember> VfPartitionMember(const AttachmentRecord& record);

// The members the node's attachments need: every InfiniBand attachment on a pkey other than the
// default, with the GUID its VF was given (mode vf) or its HCA port's GUID (modes move and
// ipoib; read from `root`, left out when unreadable). By pkey, in record order within one.
std::vector<PartitionMember> PartitionMembers(const std::vector<AttachmentRecord>& records,
                                              const sysfs::SysfsRoot& root);

// Every GUID this node can hand out on `pkey` before any pod asks: each InfiniBand PF's port GUID
// (IPoIB children and moved HCAs use it) and the derived GUID of each of its VFs up to
// sriov_totalvfs. For a subnet manager configured ahead (opensm without a hook).
Result<std::vector<PartitionMember>> NodePartitionMembers(const sysfs::SysfsRoot& root,
                                                          uint16_t pkey);

// opensm partitions.conf entries for `members`: one definition per pkey, named
// "kube-rdma-<pkey>", the pkey given explicitly (opensm merges repeated definitions of one pkey,
// so the output of every node can be concatenated), IPoIB-capable, each GUID a full member on a
// line of its own with a comment saying who needs it.
std::string RenderPartitionsConf(const std::string& node,
                                 const std::vector<PartitionMember>& members);

// "0x02aa000000000007": a GUID as partitions.conf and the partition hook write it.
std::string FormatGuidHex(uint64_t guid);

// The port GUID of an HCA's port 1: GID 0's interface identifier, else the node GUID (mlx5's
// functions have one port, whose GUID is the node's). kNotFound when sysfs has neither.
Result<uint64_t> PortGuid(const sysfs::SysfsRoot& root, const std::string& hca_address);

}  // namespace kuberdma::cni
