// SPDX-License-Identifier: Apache-2.0
// The node config's VF counts ("sriov", rails/node_config.h) planned against the node and made
// real: each PF found (by name or by rail), what its firmware allows, whether any of its VFs is
// in a pod, and sriov_numvfs written only where that is safe. The DaemonSet's install step
// applies the plan (`rdma-device-plugin --configure-vfs`); `rdma-doctor node` shows it, with the
// firmware command where the firmware is the limit. Nothing here drains or reboots a node.
//
//   auto plan = PlanVfCounts(root, node_config, roles, hcas);
//   for (auto& e : plan) std::cout << ApplyVfCount(root, e) << "\n";
#pragma once

#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/rails/node_config.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/sriov.h"

namespace kuberdma::sriov {

// Why a PF's count cannot be changed now.
enum class Blocked {
  kNone,
  kNoSuchPf,  // the entry names no PF of this node
  kNotSriov,  // the device has no SR-IOV capability
  kFirmware,  // sriov_totalvfs below the count: SR-IOV off or NUM_OF_VFS too small
  kInUse,     // a VF's netdev is in a pod: VFs are never re-created under a pod
};

struct VfCountPlan {
  rails::VfCount want;
  std::string pf_address;  // "" when no PF was found
  std::string hca;         // the PF's RDMA device
  std::string netdev;      // the PF's netdev on the host
  int total_vfs = 0;
  int num_vfs = 0;
  Blocked blocked = Blocked::kNone;
  std::string why;  // what blocks it, for kNone ""
  std::string fix;  // what an admin runs (kFirmware: the mlxconfig command and the reset)
  bool Done() const { return blocked == Blocked::kNone && num_vfs == want.num_vfs; }
};

// Plans every "sriov" entry of `config` against the node's HCAs (`hcas`, identity detail) and
// their rails (`roles`, rails.h). Reads only.
std::vector<VfCountPlan> PlanVfCounts(const sysfs::SysfsRoot& root, const rails::NodeConfig& config,
                                      const rails::NodeRoles& roles,
                                      const std::vector<sysfs::Hca>& hcas);

// Writes sriov_numvfs for `plan` when it is neither blocked nor done (the PF's VFs bind to their
// driver as the kernel probes them). Returns the line the install step prints: what it did, or
// why not. Re-reads the PF after the write; an error names the kernel's refusal.
Result<std::string> ApplyVfCount(const sysfs::SysfsRoot& root, VfCountPlan& plan);

}  // namespace kuberdma::sriov
