// SPDX-License-Identifier: Apache-2.0
// Planning mode vf (reads only): the VF's PF, what the PFs report for every VF on the node, the
// MAC or GUID the pod's VF gets (unique on the node), and the PF-side change with what it undoes.
#include <algorithm>
#include <set>
#include <utility>

#include "kuberdma/cni/plan.h"
#include "kuberdma/cni/vf.h"

namespace kuberdma::cni {

using link::LinkInfo;
using link::VfConfig;
using netns::NetNs;
using sysfs::Hca;

namespace {

// A VF as its PF reports it, with the PF's address: who a MAC or GUID belongs to.
struct NodeVf {
  std::string pf_address;
  VfConfig vf;
};

std::string Owner(const NodeVf& v) {
  return "VF " + std::to_string(v.vf.vf) + " of PF " + v.pf_address;
}

// Every VF of every PF on the node that has VFs with an RDMA device, as the PFs report them.
// A PF that cannot be read is left out (its VFs' MACs cannot be compared, nothing else).
std::vector<NodeVf> NodeVfs(link::LinkOps& links, link::VfOps& vfs, const sysfs::SysfsRoot& root,
                            const NetNs& host) {
  std::vector<NodeVf> out;
  auto hcas = sysfs::DiscoverHcas(root, sysfs::HcaDetail::kIdentity);
  if (!hcas) return out;
  std::set<std::string> pfs;
  for (const auto& h : *hcas) {
    if (!h.pf_address.empty()) pfs.insert(h.pf_address);
  }
  for (const auto& pf : pfs) {
    auto l = HostNetdevAt(links, root, pf, host);
    if (!l) continue;
    auto list = vfs.List(host, l->ifindex);
    if (!list) continue;
    for (auto& v : *list) out.push_back({pf, std::move(v)});
  }
  return out;
}

// The pod's MAC (runtimeConfig.mac) when no other VF or host link has it, else error 7; without
// one, a generated MAC nothing on the node has.
CniResult<std::string> ChooseVfMac(link::LinkOps& links, const Request& req, const NetConf& conf,
                                   const std::vector<NodeVf>& node_vfs, const Hca& vf,
                                   const NetNs& host) {
  auto taken_by = [&](const std::string& mac) -> std::string {
    for (const auto& v : node_vfs) {
      bool self = v.pf_address == vf.pf_address && v.vf.vf == static_cast<uint32_t>(vf.vf_index);
      if (!self && link::NormalizeMac(v.vf.mac) == mac) return Owner(v);
    }
    auto l = link::FindByMac(links, host, mac);
    bool own_netdev = l && !vf.netdevs.empty() && l->name == vf.netdevs.front();
    return l && !own_netdev ? "host link " + l->name : "";
  };
  if (conf.vf->mac) {
    std::string owner = taken_by(*conf.vf->mac);
    if (owner.empty()) return *conf.vf->mac;
    return CniFail(kInvalidConfig, "runtimeConfig.mac " + *conf.vf->mac + " is already " + owner +
                                       "'s: each VF needs a MAC of its own; nothing was changed");
  }
  for (uint32_t salt = 0; salt < 64; ++salt) {
    std::string mac = GeneratedVfMac(conf.name, req.container_id, req.ifname, salt);
    if (taken_by(mac).empty()) return mac;
  }
  return CniFail(kInternalError, "no free MAC could be generated for " + vf.name);
}

// The pod's GUID (runtimeConfig.infinibandGUID, else CNI_ARGS GUID) when no other VF has it, else
// error 7; without one, the VF's derived GUID (vf.h).
CniResult<uint64_t> ChooseVfGuid(const Request& req, const NetConf& conf, const Hca& pf,
                                 const Hca& vf, const std::vector<NodeVf>& node_vfs) {
  std::optional<uint64_t> guid = conf.vf->guid;
  std::string field = "runtimeConfig.infinibandGUID";
  if (!guid) {
    for (const char* key : {"GUID", "guid"}) {
      std::string arg = CniArg(req.args, key);
      if (arg.empty()) continue;
      field = std::string("CNI_ARGS ") + key;
      KUBERDMA_CNI_ASSIGN_OR_RETURN(guid, CheckVfGuid(arg, field), 0);
    }
  }
  const auto index = static_cast<uint32_t>(vf.vf_index);
  if (!guid) {
    auto pf_guid = link::ParseGuid(pf.node_guid);
    Result<uint64_t> derived = pf_guid ? GeneratedVfGuid(*pf_guid, index) : Fail(pf_guid.error());
    if (!derived) {
      return CniFail(kInvalidConfig,
                     "no GUID for " + vf.name + ": " + derived.error().message() +
                         "; give the pod one (runtimeConfig.infinibandGUID or CNI_ARGS GUID)");
    }
    return *derived;
  }
  for (const auto& v : node_vfs) {
    bool self = v.pf_address == vf.pf_address && v.vf.vf == index;
    if (!self && v.vf.has_guids && (v.vf.node_guid == *guid || v.vf.port_guid == *guid)) {
      return CniFail(kInvalidConfig,
                     field + " " + link::FormatGuidColons(*guid) + " is already " + Owner(v) +
                         "'s: each VF needs a GUID of its own; nothing was changed");
    }
  }
  return *guid;
}

// Error 7 when a rate is above what the VF's port carries (a VF's port reports its PF's rate).
CniResult<void> CheckRates(const VfConf& vf, const Hca& hca) {
  const sysfs::Port* port = hca.port(1);
  if (port == nullptr || port->rate_gbps <= 0) return {};
  auto link_mbps = static_cast<uint64_t>(port->rate_gbps * 1000);
  for (auto [name, rate] :
       {std::pair{"min_tx_rate", vf.min_tx_rate}, std::pair{"max_tx_rate", vf.max_tx_rate}}) {
    if (rate && *rate > link_mbps) {
      return CniFail(kInvalidConfig, std::string(name) + " " + std::to_string(*rate) +
                                         " Mbit/s is above " + hca.name + "'s link (" +
                                         std::to_string(link_mbps) +
                                         " Mbit/s); nothing was changed");
    }
  }
  return {};
}

// What mode vf cannot plan at all: no VF operations, a chained attachment (sriov-cni put the
// netdev in the pod), a VF its PF does not list.
CniResult<void> CheckPlannable(const AttachPlan& plan, bool have_vf_ops) {
  const Hca& vf = plan.hca;
  if (!have_vf_ops) return CniFail(kInternalError, "mode vf without the PF's VF operations");
  if (plan.chained) {
    return CniFail(kInvalidConfig,
                   "mode vf moves the VF's netdev itself; it cannot follow a plugin (sriov) whose "
                   "prevResult already has it in the pod");
  }
  if (vf.vf_index < 0) {
    return CniFail(kDeviceUnavailable, vf.name + " (" + vf.address +
                                           ") is not among the virtfnN of " + vf.pf_address +
                                           "; nothing was changed");
  }
  return {};
}

// The VF as its PF reports it now: what every undo restores.
CniResult<VfConfig> VfBefore(link::VfOps& vfs, const NetNs& host, const LinkInfo& pf,
                             const Hca& vf) {
  auto v = ReportedVf(vfs, host, pf.ifindex, static_cast<uint32_t>(vf.vf_index));
  if (!v) return tl::unexpected(FromError(v.error(), kKernelRefused));
  if (*v) return **v;
  return CniFail(kDeviceUnavailable, pf.name + " reports no VF " + std::to_string(vf.vf_index) +
                                         " (" + vf.name + "); nothing was changed");
}

}  // namespace

CniResult<std::pair<Hca, LinkInfo>> Planner::VfPf(const Hca& vf, const NetNs& host) {
  auto pf = sysfs::HcaForAddress(root_, vf.pf_address, sysfs::HcaDetail::kPorts);
  if (!pf) {
    return CniFail(kDeviceUnavailable, vf.name + " is a VF of " + vf.pf_address +
                                           ", whose RDMA device is not on the host: " +
                                           pf.error().message() + "; nothing was changed");
  }
  auto pf_link = HostNetdevAt(links_, root_, vf.pf_address, host);
  if (!pf_link) {
    return CniFail(kDeviceUnavailable, vf.name + "'s PF " + pf->name + ": " +
                                           pf_link.error().message() +
                                           " (a VF is set up through its PF); nothing was changed");
  }
  auto own = NodeOwn(*pf, host);
  if (!own) return tl::unexpected(FromError(own.error(), kIoFailure));
  if (!own->empty()) {
    return CniFail(kNodeOwnNic, vf.name + " (" + vf.address + ") is a VF of " + pf_link->name +
                                    ", the node's own NIC: " + *own +
                                    "; its VFs share the node's port and are never handed to "
                                    "pods. Nothing was changed. Allocate VFs of a rail's PF");
  }
  return std::pair{std::move(*pf), std::move(*pf_link)};
}

CniResult<void> Planner::PlanVf(const Request& req, const NetConf& conf, const LinkInfo& netdev,
                                const NetNs& host, AttachPlan* plan) {
  const Hca& vf = plan->hca;
  KUBERDMA_CNI_TRY(CheckPlannable(*plan, vfs_ != nullptr), 0);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto pf, VfPf(vf, host), 0);
  const auto index = static_cast<uint32_t>(vf.vf_index);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(VfConfig before, VfBefore(*vfs_, host, pf.second, vf), 0);
  KUBERDMA_CNI_TRY(CheckRates(*conf.vf, vf), 0);
  const bool ib = vf.link_layer() == sysfs::LinkLayer::kInfiniBand;
  std::vector<NodeVf> node_vfs = NodeVfs(links_, *vfs_, root_, host);
  std::string mac;
  uint64_t guid = 0;
  if (ib) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(guid, ChooseVfGuid(req, conf, pf.first, vf, node_vfs), 0);
  } else {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(mac, ChooseVfMac(links_, req, conf, node_vfs, vf, host), 0);
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(link::VfChange change,
                                WantedVfChange(*conf.vf, index, ib, mac, guid), 0);
  plan->vf = AttachPlan::VfStep{
      .pf_ifindex = pf.second.ifindex,
      .pf_name = pf.second.name,
      .change = change,
      // The port reports a new GUID only once the VF's driver has probed it again.
      .rebind = ib && !(before.has_guids && before.node_guid == guid && before.port_guid == guid)};
  plan->record.vf = VfRecord{.pf_address = vf.pf_address,
                             .index = index,
                             .before = VfConfigToJson(before),
                             .host_mac = netdev.mac,
                             .set = VfChangeToJson(change)};
  if (!ib) plan->record.mac = mac;  // how the netdev is found once it has its new MAC
  return {};
}

}  // namespace kuberdma::cni
