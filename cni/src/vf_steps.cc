// SPDX-License-Identifier: Apache-2.0
// Mode vf's steps that change something: the PF's settings for the pod's VF (recorded before the
// first change), the VF's netdev taking its new MAC or its driver rebound, and their undo.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "kuberdma/cni/plugin.h"
#include "kuberdma/cni/vf.h"
#include "kuberdma/sysfs/sriov.h"

namespace kuberdma::cni {

using link::LinkInfo;
using link::VfConfig;
using netns::NetNs;

namespace {

bool IsInfiniBand(const AttachmentRecord& rec) { return rec.link_layer == "InfiniBand"; }

// The netdev of the PCI function at `address` on the host, waiting up to `wait` for one to
// appear (a rebound driver creates it anew).
Result<LinkInfo> NetdevOf(link::LinkOps& links, const sysfs::SysfsRoot& root,
                          const std::string& address, const NetNs& host,
                          std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    if (auto l = HostNetdevAt(links, root, address, host)) return *l;
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(ErrorCode::kTimeout, address + " has no netdev on the host " +
                                           std::to_string(wait.count()) +
                                           " ms after its driver was rebound");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

Result<LinkInfo> Plugin::FindRecorded(const AttachmentRecord& rec, const NetNs& ns) {
  auto l = link::FindByMac(d_.links, ns, rec.mac);
  if (l || !rec.vf || rec.vf->host_mac.empty() || rec.vf->host_mac == rec.mac) return l;
  return link::FindByMac(d_.links, ns, rec.vf->host_mac);
}

Result<void> Plugin::ApplyVf(AttachPlan& plan, const StateStore& store, const NetNs& host) {
  if (!plan.vf) return {};
  if (d_.vfs == nullptr) return Fail(ErrorCode::kInternal, "mode vf without VF operations");
  AttachmentRecord& rec = plan.record;
  rec.vf->changed = true;  // armed before the call: a PF that took part of it is restored
  KUBERDMA_TRY(store.Save(rec));
  if (auto set = d_.vfs->Set(host, plan.vf->pf_ifindex, plan.vf->change); !set) {
    return Fail(set.error().Wrap("set VF " + std::to_string(rec.vf->index) + " (" + rec.hca +
                                 ") through its PF " + plan.vf->pf_name));
  }
  bool rebind = plan.vf->rebind;
  if (!rebind && plan.vf->change.mac && link::NormalizeMac(rec.vf->host_mac) != rec.mac) {
    // mlx5 VFs take a MAC their PF set at once; a driver that holds its own (igbvf) refuses the
    // VF-side change while trust is off, and takes the PF's on its next probe.
    auto own = d_.links.Change(host, rec.host_ifindex, {.mac = rec.mac});
    if (!own) {
      spdlog::info("{} refused its new MAC {} ({}): rebinding its driver to take the PF's",
                   rec.host_name, rec.mac, own.error().message());
      rebind = true;
    }
  }
  if (!rebind) return {};
  KUBERDMA_TRY(sysfs::RebindDriver(d_.sysfs, rec.hca_address, d_.rebind_wait));
  rec.vf->rebound = true;
  KUBERDMA_TRY(FollowRebound(plan, host));
  return store.Save(rec);
}

Result<void> Plugin::FollowRebound(AttachPlan& plan, const NetNs& host) {
  AttachmentRecord& rec = plan.record;
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l,
                            NetdevOf(d_.links, d_.sysfs, rec.hca_address, host, d_.rebind_wait));
  rec.host_ifindex = l.ifindex;
  rec.host_name = l.name;  // a rebound driver's netdev takes the lowest free name, maybe another
  rec.mac = l.mac;         // IPoIB's hardware address carries the port GID, so the new GUID
  // The RDMA device is created anew with its driver: the lowest free name, maybe another one.
  auto deadline = std::chrono::steady_clock::now() + d_.rebind_wait;
  for (;;) {
    auto hca = sysfs::HcaForAddress(d_.sysfs, rec.hca_address, sysfs::HcaDetail::kPorts);
    if (hca) {
      rec.hca = hca->name;
      plan.hca = std::move(*hca);
      return {};
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(hca.error().Wrap(rec.hca_address + " has no RDMA device after its rebind"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

namespace {

// The derived GUID of the record's VF (partitions.h); nullopt when the PF's GUID cannot be read.
std::optional<uint64_t> DerivedGuidOf(const sysfs::SysfsRoot& root, const AttachmentRecord& rec) {
  auto pf = sysfs::HcaForAddress(root, rec.vf->pf_address, sysfs::HcaDetail::kIdentity);
  if (!pf) return std::nullopt;
  auto pf_guid = link::ParseGuid(pf->node_guid);
  if (!pf_guid) return std::nullopt;
  auto g = GeneratedVfGuid(*pf_guid, rec.vf->index);
  return g ? std::optional<uint64_t>(*g) : std::nullopt;
}

// An unset GUID (zero) cannot be set again: the VF gets its derived one, which no pod can name
// for another VF, never keeping a GUID the pod chose (that would block it elsewhere).
void BackToUnsetGuid(const sysfs::SysfsRoot& root, const AttachmentRecord& rec,
                     const VfConfig& before, const VfConfig& now, link::VfChange* back) {
  if (!now.has_guids || (before.node_guid != 0 && before.port_guid != 0)) return;
  auto derived = DerivedGuidOf(root, rec);
  if (before.node_guid == 0) back->node_guid = derived;
  if (before.port_guid == 0) back->port_guid = derived;
  if (derived && now.node_guid == *derived) back->node_guid.reset();
  if (derived && now.port_guid == *derived) back->port_guid.reset();
}

}  // namespace

Result<void> Plugin::RestoreVf(const AttachmentRecord& rec, const NetNs& host) {
  if (!rec.vf || !rec.vf->changed) return {};
  if (d_.vfs == nullptr) {
    spdlog::warn("{}: no VF operations here; VF {} of {} keeps what ADD set", rec.ifname,
                 rec.vf->index, rec.vf->pf_address);
    return {};
  }
  auto pf = HostNetdevAt(d_.links, d_.sysfs, rec.vf->pf_address, host);
  if (!pf) {
    spdlog::warn("{}: PF {} of VF {} is gone ({}): nothing to restore its settings on", rec.ifname,
                 rec.vf->pf_address, rec.vf->index, pf.error().message());
    return {};
  }
  KUBERDMA_ASSIGN_OR_RETURN(auto reported, ReportedVf(*d_.vfs, host, pf->ifindex, rec.vf->index));
  if (!reported) {
    return Fail(ErrorCode::kNotFound, "the PF reports no VF " + std::to_string(rec.vf->index));
  }
  const VfConfig& now = *reported;
  VfConfig before = VfConfigFromJson(rec.vf->before);
  link::VfChange back = link::RestoreChange(before, now);
  BackToUnsetGuid(d_.sysfs, rec, before, now, &back);
  // The netdev's own MAC first, while the VF still has the trust ADD gave it (igbvf refuses it
  // once trust is off); a driver that refuses it takes the PF's on a probe after the PF's reset.
  const bool mac_back = VfNetdevMacBack(rec, host);
  if (auto r = d_.vfs->Set(host, pf->ifindex, back); !r) {
    return Fail(r.error().Wrap("restore VF " + std::to_string(rec.vf->index) + " of " + pf->name +
                               " as it was before " + rec.container_id + "/" + rec.ifname));
  }
  if (mac_back) return {};
  if (auto rebound = sysfs::RebindDriver(d_.sysfs, rec.hca_address, d_.rebind_wait); !rebound) {
    spdlog::warn("{}: VF {} keeps the pod's MAC until its next probe ({})", rec.ifname,
                 rec.vf->index, rebound.error().message());
  }
  return {};
}

bool Plugin::VfNetdevMacBack(const AttachmentRecord& rec, const NetNs& host) {
  if (IsInfiniBand(rec) || rec.vf->host_mac.empty()) return true;
  auto l = FindRecorded(rec, host);
  if (!l || link::NormalizeMac(l->mac) == link::NormalizeMac(rec.vf->host_mac)) return true;
  auto r = d_.links.Change(host, l->ifindex, {.mac = rec.vf->host_mac});
  if (!r) {
    spdlog::info("{} refused MAC {} back ({}): its driver is rebound to take the PF's", l->name,
                 rec.vf->host_mac, r.error().message());
  }
  return r.has_value();
}

CniResult<void> Plugin::TellPartition(const AttachmentRecord& rec, bool add) const {
  if (d_.partitions == nullptr) return {};
  auto member = VfPartitionMember(rec);
  if (!member) return {};
  return d_.partitions->Apply({.add = add,
                               .pkey = member->pkey,
                               .guid = member->guid,
                               .network = rec.network,
                               .container_id = rec.container_id,
                               .ifname = rec.ifname});
}

CniResult<void> Plugin::CheckVf(const AttachmentRecord& rec, const std::string& who) {
  if (!rec.vf || d_.vfs == nullptr) return {};
  KUBERDMA_CNI_ASSIGN_OR_RETURN(NetNs host, d_.namespaces.Host(), kIoFailure);
  const std::string vf = "VF " + std::to_string(rec.vf->index) + " of " + rec.vf->pf_address;
  auto pf = HostNetdevAt(d_.links, d_.sysfs, rec.vf->pf_address, host);
  if (!pf) return CniFail(kCheckFailed, "CHECK " + who + ": " + vf + ": " + pf.error().message());
  auto now = ReportedVf(*d_.vfs, host, pf->ifindex, rec.vf->index);
  if (!now || !*now) {
    return CniFail(kCheckFailed, "CHECK " + who + ": " + pf->name + " reports no " + vf);
  }
  std::string drift = VfDrift(rec.vf->set, **now);
  if (drift.empty()) return {};
  return CniFail(kCheckFailed, "CHECK " + who + ": " + vf + " (" + pf->name + "): " + drift +
                                   ": its PF's settings were changed behind the plugin");
}

}  // namespace kuberdma::cni
