// SPDX-License-Identifier: Apache-2.0
// Planning and applying the node config's VF counts.
#include "kuberdma/sriov/vfs.h"

#include <algorithm>

namespace kuberdma::sriov {

using sysfs::Hca;

namespace {

bool IsPf(const Hca& h) { return h.bus == sysfs::BusKind::kPci && h.pf_address.empty(); }

// The PF an entry names: by rail (the PF on it), else by netdev, PCI address or HCA name.
const Hca* FindPf(const rails::VfCount& want, const rails::NodeRoles& roles,
                  const std::vector<Hca>& hcas) {
  for (const auto& h : hcas) {
    if (!IsPf(h)) continue;
    if (want.rail > 0) {
      const rails::HcaRole* r = roles.Find(h.name);
      if (r != nullptr && r->rail == want.rail) return &h;
    } else if (rails::NamesHca(want.pf, h)) {
      return &h;
    }
  }
  return nullptr;
}

// The first VF of `pf` whose netdev has left the host (it is in a pod), or "".
std::string VfInPod(const sysfs::SysfsRoot& root, const sysfs::SriovPf& pf) {
  for (const auto& vf : pf.vfs) {
    if (!root.Exists("bus/pci/devices/" + vf + "/driver")) continue;  // unbound: in no pod
    auto nets = sysfs::NetdevsAtAddress(root, vf);
    if (nets && nets->empty()) return vf;
  }
  return "";
}

std::string FirmwareFix(const VfCountPlan& p) {
  return "mlxconfig -d " + p.pf_address +
         " set SRIOV_EN=1 NUM_OF_VFS=" + std::to_string(std::max(p.want.num_vfs, 1)) +
         ", then reset the firmware (mlxfwreset -d " + p.pf_address +
         " reset) or reboot the node when it is drained: the firmware takes the setting only "
         "after a reset, which kube-rdma never does for you";
}

void Judge(const sysfs::SysfsRoot& root, VfCountPlan& p) {
  auto pf = sysfs::ReadSriovPf(root, p.pf_address);
  if (!pf || !*pf) {
    p.blocked = Blocked::kNotSriov;
    p.why = p.pf_address + " has no SR-IOV capability (no sriov_totalvfs)";
    return;
  }
  p.total_vfs = (*pf)->total_vfs;
  p.num_vfs = (*pf)->num_vfs;
  if (p.want.num_vfs > p.total_vfs) {
    p.blocked = Blocked::kFirmware;
    p.why = p.total_vfs == 0
                ? "SR-IOV is off in " + p.pf_address + "'s firmware (sriov_totalvfs 0)"
                : p.pf_address + "'s firmware offers " + std::to_string(p.total_vfs) +
                      " VFs (sriov_totalvfs), " + std::to_string(p.want.num_vfs) + " are wanted";
    p.fix = FirmwareFix(p);
    return;
  }
  if (p.num_vfs == p.want.num_vfs) return;
  if (std::string vf = VfInPod(root, **pf); !vf.empty()) {
    p.blocked = Blocked::kInUse;
    p.why = "VF " + vf + " of " + p.pf_address +
            " is in a pod (its netdev is not on the host): the PF keeps its " +
            std::to_string(p.num_vfs) + " VFs until none is";
    p.fix = "let the pods on " + p.netdev + "'s VFs end; the next start of the DaemonSet's pod " +
            "on this node applies the count";
  }
}

}  // namespace

std::vector<VfCountPlan> PlanVfCounts(const sysfs::SysfsRoot& root, const rails::NodeConfig& config,
                                      const rails::NodeRoles& roles, const std::vector<Hca>& hcas) {
  std::vector<VfCountPlan> out;
  for (const auto& want : config.sriov) {
    VfCountPlan p{.want = want};
    const Hca* pf = FindPf(want, roles, hcas);
    if (pf == nullptr) {
      p.blocked = Blocked::kNoSuchPf;
      p.why = "node config sriov: " + want.Target() + " names no PF of this node";
      out.push_back(std::move(p));
      continue;
    }
    p.pf_address = pf->pci_address;
    p.hca = pf->name;
    p.netdev = pf->netdevs.empty() ? "" : pf->netdevs.front();
    Judge(root, p);
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::string> ApplyVfCount(const sysfs::SysfsRoot& root, VfCountPlan& plan) {
  std::string who = plan.want.Target() + " (" +
                    (plan.pf_address.empty() ? "no PF" : plan.pf_address + " " + plan.hca) + ")";
  if (plan.blocked != Blocked::kNone) {
    return who + ": not changed: " + plan.why + (plan.fix.empty() ? "" : "; fix: " + plan.fix);
  }
  if (plan.Done()) return who + ": has its " + std::to_string(plan.num_vfs) + " VFs";
  KUBERDMA_ASSIGN_OR_RETURN(auto pf, sysfs::ReadSriovPf(root, plan.pf_address));
  if (!pf) return Fail(ErrorCode::kNotFound, who + ": the SR-IOV capability disappeared");
  // Probed as they appear: each VF comes up bound to its driver, with its netdev and RDMA device.
  if (pf->autoprobe == false) {
    KUBERDMA_TRY(
        root.WriteAttr("bus/pci/devices/" + plan.pf_address + "/sriov_drivers_autoprobe", "1"));
  }
  KUBERDMA_TRY(sysfs::WriteNumVfs(root, *pf, plan.want.num_vfs));
  int before = plan.num_vfs;
  plan.num_vfs = plan.want.num_vfs;
  return who + ": " + std::to_string(before) + " -> " + std::to_string(plan.want.num_vfs) +
         " VFs (sriov_numvfs; at most " + std::to_string(plan.total_vfs) + ")";
}

}  // namespace kuberdma::sriov
