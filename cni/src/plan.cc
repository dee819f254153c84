// SPDX-License-Identifier: Apache-2.0
// Planning an ADD: selection, netns mode, pkey, the netdev, and the record that will be saved.
#include "kuberdma/cni/plan.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "kuberdma/cni/result.h"
#include "kuberdma/podenv/slot_id.h"

namespace kuberdma::cni {

using link::LinkInfo;
using netns::NetNs;
using sysfs::Hca;

namespace {

// Resolves a deviceID-style value: a bus address, a device-plugin slot ID ("mlx5_3-017"),
// or an HCA name.
// A deviceID from Multus (also copied into pciBusID): a PCI or auxiliary address, a per-HCA slot
// ID as rdma-device-plugin writes them (podenv/slot_id.h), or an HCA name. Pool slots name no HCA
// and are handled before this (IsPoolSlot).
Result<Hca> HcaForDeviceId(const sysfs::SysfsRoot& root, const std::string& id) {
  auto by_addr = sysfs::HcaForAddress(root, id, sysfs::HcaDetail::kPorts);
  if (by_addr || by_addr.error().code() != ErrorCode::kNotFound) return by_addr;
  auto by_name = sysfs::ReadHca(root, id, sysfs::HcaDetail::kPorts);
  if (by_name) return by_name;
  if (auto slot = podenv::ParseSlot(id); slot && slot->kind == podenv::SlotKind::kPerHca) {
    auto by_slot = sysfs::ReadHca(root, slot->base, sysfs::HcaDetail::kPorts);
    if (by_slot) return by_slot;
    return Fail(ErrorCode::kNotFound, "it is rdma-device-plugin's slot " +
                                          std::to_string(slot->index) + " of HCA " + slot->base +
                                          ", which this node does not have");
  }
  return Fail(ErrorCode::kNotFound,
              "tried it as a PCI/auxiliary address, an HCA name and a device-plugin slot ID");
}

bool IsPoolSlot(const Selector& sel) {
  bool device_id = sel.kind == SelectorKind::kRuntimeDeviceId ||
                   sel.kind == SelectorKind::kDeviceId || sel.kind == SelectorKind::kPciBusId;
  auto slot = device_id ? podenv::ParseSlot(sel.value) : std::nullopt;
  return slot && slot->kind == podenv::SlotKind::kPool;
}

std::string Hex4(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}

CniResult<std::map<std::string, std::string>> ClaimsOf(const StateStore& store, const NetConf& conf,
                                                       const std::string& self_key) {
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto records, store.List(), kStateFailure);
  std::map<std::string, std::string> claimed;
  for (const auto& r : records) {
    std::string key = AttachmentKey(r.container_id, r.ifname);
    if (key != self_key || r.network != conf.name) claimed[r.hca_address] = key;
  }
  return claimed;
}

}  // namespace

std::string AttachmentKey(const std::string& container_id, const std::string& ifname) {
  return container_id + "/" + ifname;
}

std::optional<bool> WantedAdminUp(const NetConf& conf, bool host_admin_up) {
  switch (conf.link_state) {
    case LinkState::kUp:
      return true;
    case LinkState::kDown:
      return false;
    // A netns move closes the device (dev_close in __dev_change_net_namespace), so "leave as it
    // is" means re-applying the admin state it had on the host.
    case LinkState::kLeave:
      return host_admin_up;
  }
  return std::nullopt;
}

Result<Hca> Planner::FindNamed(const Selector& sel, const NetNs& host) {
  switch (sel.kind) {
    case SelectorKind::kRuntimeDeviceId:
    case SelectorKind::kDeviceId:
    case SelectorKind::kPciBusId:
      return HcaForDeviceId(root_, sel.value);
    case SelectorKind::kHca:
      return sysfs::ReadHca(root_, sel.value, sysfs::HcaDetail::kPorts);
    case SelectorKind::kNetdev: {
      // Through rtnetlink first, so an alternative name (which sysfs does not list) resolves too.
      auto l = links_.GetByName(host, sel.value);
      return sysfs::HcaForNetdev(root_, l ? l->name : sel.value, sysfs::HcaDetail::kPorts);
    }
    case SelectorKind::kMac: {
      KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, link::FindByMac(links_, host, sel.value));
      return sysfs::HcaForNetdev(root_, l.name, sysfs::HcaDetail::kPorts);
    }
    case SelectorKind::kAuto:
      break;
  }
  return Fail(ErrorCode::kInternal, "no device named");
}

CniResult<Planner::Selected> Planner::FirstFree(const NetConf& conf, const NetNs& host,
                                                const Claims& claimed) {
  // Identity is enough to choose; ports are read for the chosen HCA only.
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto hcas, sysfs::DiscoverHcas(root_, sysfs::HcaDetail::kIdentity),
                                kDeviceUnavailable);
  std::string tried;
  for (auto& h : hcas) {
    std::string why;
    if (h.bus == sysfs::BusKind::kVirtual) {
      why = "a software RDMA device (cannot be moved)";
    } else if (auto c = claimed.find(h.address); c != claimed.end()) {
      why = "attached to " + c->second;
    } else if (h.netdevs.empty()) {
      why = "has no netdev";
    } else if (auto l = links_.GetByName(host, h.netdevs.front()); !l) {
      why = "netdev " + h.netdevs.front() + " is not in the host namespace";
    } else {
      auto full = sysfs::ReadHca(root_, h.name, sysfs::HcaDetail::kPorts);
      if (full) return Selected{std::move(*full), std::move(*l)};
      why = full.error().message();
    }
    tried += (tried.empty() ? "" : "; ") + h.name + ": " + why;
  }
  return CniFail(kInvalidConfig,
                 "no free RDMA device for " + conf.name + " (" +
                     (tried.empty() ? "no RDMA devices under " + root_.Sys("class/infiniband")
                                    : "tried " + tried) +
                     ")");
}

CniResult<Planner::Selected> Planner::Select(const NetConf& conf, const NetNs& host, bool chained,
                                             const Claims& claimed) {
  const Selector& sel = conf.selector;
  if (IsPoolSlot(sel)) {
    // A share of rdma-device-plugin's pool names no HCA: take a free one, as without a deviceID.
    spdlog::info("{} {} is a pool slot: taking the first free HCA", SelectorName(sel.kind),
                 sel.value);
    return FirstFree(conf, host, claimed);
  }
  if (sel.kind == SelectorKind::kAuto) {
    if (chained) {
      return CniFail(kInvalidConfig,
                     "chained after another plugin, rdma needs the device named: "
                     "set deviceID (Multus passes it for NADs with a "
                     "k8s.v1.cni.cncf.io/resourceName annotation)");
    }
    return FirstFree(conf, host, claimed);
  }
  auto found = FindNamed(sel, host);
  if (!found) {
    return CniFail(kInvalidConfig, "no RDMA device matches " + std::string(SelectorName(sel.kind)) +
                                       " \"" + sel.value + "\": " + found.error().message());
  }
  if (found->bus == sysfs::BusKind::kVirtual) {
    // Measured on Debian 12's kernel with Soft-RoCE (tests/vm): moving rxe's netdev out of the
    // host namespace deletes the rxe device, and `rdma dev set ... netns` is EOPNOTSUPP.
    return CniFail(kDeviceUnavailable,
                   found->name + " is a software RDMA device (" +
                       (found->netdevs.empty() ? "no netdev" : "on " + found->netdevs.front()) +
                       ", no PCI parent): it cannot be moved into a pod (the kernel deletes a "
                       "Soft-RoCE device when its netdev leaves the host namespace, and refuses "
                       "to move the RDMA device); nothing was changed");
  }
  if (auto c = claimed.find(found->address); c != claimed.end()) {
    return CniFail(kDeviceUnavailable,
                   found->name + " (" + found->address + ") is already attached to " + c->second);
  }
  return Selected{std::move(*found), std::nullopt};
}

CniResult<RdmaNetnsMode> Planner::NetnsMode(const NetNs& host, const NetConf& conf) {
  RdmaNetnsMode mode = RdmaNetnsMode::kUnavailable;
  if (auto m = rdma_.GetNetnsMode(host)) {
    mode = *m == rdma::NetnsMode::kExclusive ? RdmaNetnsMode::kExclusive : RdmaNetnsMode::kShared;
  } else if (m.error().code() != ErrorCode::kUnsupported) {
    return tl::unexpected(FromError(m.error().Wrap("read RDMA netns mode"), kKernelRefused));
  }
  if (mode != RdmaNetnsMode::kExclusive && conf.shared_policy == SharedPolicy::kError) {
    return CniFail(kSharedModeRejected,
                   "RDMA netns mode is " + std::string(RdmaNetnsModeName(mode)) +
                       " and sharedNetnsPolicy is \"error\": the RDMA "
                       "device cannot be isolated in the pod (set exclusive mode at boot with "
                       "ib_core netns_mode=0, or `rdma system set netns exclusive`)");
  }
  return mode;
}

CniResult<int> Planner::CheckPkey(const Hca& hca, uint16_t pkey) {
  if (hca.link_layer() != sysfs::LinkLayer::kInfiniBand) {
    if (pkey == sysfs::kDefaultPkey) return -1;
    return CniFail(kInvalidConfig, "pkey " + Hex4(pkey) + " cannot apply to " + hca.name +
                                       ": its link layer is " +
                                       std::string(sysfs::LinkLayerName(hca.link_layer())) +
                                       " (RoCE has no partitions); leave pkey unset or \"0xffff\"");
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(Hca full, sysfs::ReadHca(root_, hca.name, sysfs::HcaDetail::kPkeys),
                                kDeviceUnavailable);
  const sysfs::Port* port = full.port(1);
  std::string table;
  if (port != nullptr) {
    for (size_t i = 0; i < port->pkeys.size(); ++i) {
      if (port->pkeys[i] == pkey) return static_cast<int>(i);
      table += (table.empty() ? "" : ", ") + Hex4(port->pkeys[i]);
    }
  }
  return CniFail(kInvalidConfig, "pkey " + Hex4(pkey) + " is not in " + hca.name +
                                     " port 1's pkey table [" + table +
                                     "]: ask the subnet manager to add it, or use one listed");
}

CniResult<LinkInfo> Planner::Netdev(const Request& req, const Selected& selected, bool chained,
                                    const NetNs& host, const NetNs& pod) {
  const Hca& hca = selected.hca;
  Result<LinkInfo> netdev = Fail(ErrorCode::kNotFound, hca.name + " has no netdev");
  if (chained) {
    netdev = links_.GetByName(pod, req.ifname);
  } else if (selected.host_link) {
    netdev = *selected.host_link;
  } else if (!hca.netdevs.empty()) {
    netdev = links_.GetByName(host, hca.netdevs.front());
  }
  if (!netdev) {
    return tl::unexpected(FromError(netdev.error().Wrap("attach " + hca.name), kDeviceUnavailable));
  }
  if (!chained && links_.GetByName(pod, req.ifname)) {
    return CniFail(kInvalidEnv, "CNI_IFNAME " + req.ifname + " already exists in " + req.netns);
  }
  return std::move(*netdev);
}

CniResult<AttachPlan> Planner::Plan(const Request& req, const NetConf& conf,
                                    const StateStore& store, const NetNs& host, const NetNs& pod) {
  const bool chained =
      conf.prev_result && PrevResultHasInterface(*conf.prev_result, req.ifname, req.netns);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(Claims claimed,
                                ClaimsOf(store, conf, AttachmentKey(req.container_id, req.ifname)),
                                kStateFailure);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(Selected selected, Select(conf, host, chained, claimed), 0);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(RdmaNetnsMode mode, NetnsMode(host, conf), 0);
  const uint16_t pkey = conf.pkey.value_or(sysfs::kDefaultPkey);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(int pkey_index, CheckPkey(selected.hca, pkey), 0);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(LinkInfo netdev, Netdev(req, selected, chained, host, pod), 0);
  AttachPlan plan{.hca = std::move(selected.hca), .chained = chained};
  const Hca& hca = plan.hca;
  plan.record = {.network = conf.name,
                 .container_id = req.container_id,
                 .ifname = req.ifname,
                 .netns = req.netns,
                 .hca = hca.name,
                 .hca_address = hca.address,
                 .link_layer = std::string(sysfs::LinkLayerName(hca.link_layer())),
                 .netdev_moved = !chained,
                 .host_name = netdev.name,
                 .host_ifindex = netdev.ifindex,
                 .mac = netdev.mac,
                 .host_mtu = netdev.mtu,
                 .host_admin_up = netdev.admin_up,
                 .netns_mode = mode,
                 .pkey = pkey,
                 .pkey_index = pkey_index};
  plan.want_up = WantedAdminUp(conf, netdev.admin_up);
  plan.into = {.name = req.ifname, .mtu = conf.mtu, .up = plan.want_up};
  if (conf.ipam) {
    plan.record.ipam = IpamState{.type = conf.ipam->type, .section = conf.ipam->section};
    plan.into.up.reset();  // set after IPAM's addresses, before its routes (which need it up)
  }
  return plan;
}

}  // namespace kuberdma::cni
