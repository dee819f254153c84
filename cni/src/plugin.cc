// SPDX-License-Identifier: Apache-2.0
// The verbs of the `rdma` plugin. Each reads as a script: lock, open namespaces, select, record,
// apply (with undo), report.
#include "kuberdma/cni/plugin.h"

#include <spdlog/spdlog.h>

#include <set>

#include "kuberdma/base/files.h"
#include "kuberdma/cni/result.h"

namespace kuberdma::cni {

using link::LinkChange;
using link::LinkInfo;
using netns::NetNs;
using nlohmann::json;
using sysfs::Hca;

namespace {

CniResult<NodeLock> Lock(const NetConf& conf) {
  auto lock = NodeLock::Acquire(conf.state_dir, conf.lock_timeout_ms);
  if (!lock) return tl::unexpected(FromError(lock.error(), kStateFailure));
  return std::move(*lock);
}

std::string Key(const std::string& cid, const std::string& ifname) { return cid + "/" + ifname; }

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

bool IsInfiniBand(const AttachmentRecord& rec) { return rec.link_layer == "InfiniBand"; }

// Resolves a deviceID-style value: a bus address, a device-plugin slot ID ("mlx5_3-017"),
// or an HCA name.
Result<Hca> HcaForDeviceId(const sysfs::SysfsRoot& root, const std::string& id) {
  auto by_addr = sysfs::HcaForAddress(root, id, sysfs::HcaDetail::kPorts);
  if (by_addr || by_addr.error().code() != ErrorCode::kNotFound) return by_addr;
  auto dash = id.find_last_of('-');
  if (dash != std::string::npos && dash > 0) {
    auto by_slot = sysfs::ReadHca(root, id.substr(0, dash), sysfs::HcaDetail::kPorts);
    if (by_slot) return by_slot;
  }
  auto by_name = sysfs::ReadHca(root, id, sysfs::HcaDetail::kPorts);
  if (by_name) return by_name;
  return Fail(ErrorCode::kNotFound,
              "tried it as a PCI/auxiliary address, a device-plugin slot ID and an HCA name");
}

}  // namespace

CniResult<Plugin::Selected> Plugin::Select(const NetConf& conf, const NetNs& host, bool chained,
                                           const StateStore& store, const std::string& self_key) {
  auto records = store.List();
  if (!records) return tl::unexpected(FromError(records.error(), kStateFailure));
  std::map<std::string, std::string> claimed;  // hca address -> "cid/ifname"
  for (const auto& r : *records) {
    std::string key = Key(r.container_id, r.ifname);
    if (key != self_key || r.network != conf.name) claimed[r.hca_address] = key;
  }
  const Selector& sel = conf.selector;
  Result<Hca> found = Fail(ErrorCode::kNotFound, "");
  switch (sel.kind) {
    case SelectorKind::kRuntimeDeviceId:
    case SelectorKind::kDeviceId:
    case SelectorKind::kPciBusId:
      found = HcaForDeviceId(d_.sysfs, sel.value);
      break;
    case SelectorKind::kHca:
      found = sysfs::ReadHca(d_.sysfs, sel.value, sysfs::HcaDetail::kPorts);
      break;
    case SelectorKind::kNetdev: {
      // Through rtnetlink first, so an alternative name (which sysfs does not list) resolves too.
      auto l = d_.links.GetByName(host, sel.value);
      found = sysfs::HcaForNetdev(d_.sysfs, l ? l->name : sel.value, sysfs::HcaDetail::kPorts);
      break;
    }
    case SelectorKind::kMac: {
      auto l = link::FindByMac(d_.links, host, sel.value);
      found =
          l ? sysfs::HcaForNetdev(d_.sysfs, l->name, sysfs::HcaDetail::kPorts) : Fail(l.error());
      break;
    }
    case SelectorKind::kAuto: {
      if (chained) {
        return CniFail(kInvalidConfig,
                       "chained after another plugin, rdma needs the device named: "
                       "set deviceID (Multus passes it for NADs with a "
                       "k8s.v1.cni.cncf.io/resourceName annotation)");
      }
      // Identity is enough to choose; ports are read for the chosen HCA only.
      auto hcas = sysfs::DiscoverHcas(d_.sysfs, sysfs::HcaDetail::kIdentity);
      if (!hcas) return tl::unexpected(FromError(hcas.error(), kDeviceUnavailable));
      std::string tried;
      for (auto& h : *hcas) {
        std::string why;
        if (auto c = claimed.find(h.address); c != claimed.end()) {
          why = "attached to " + c->second;
        } else if (h.netdevs.empty()) {
          why = "has no netdev";
        } else if (auto l = d_.links.GetByName(host, h.netdevs.front()); !l) {
          why = "netdev " + h.netdevs.front() + " is not in the host namespace";
        } else {
          auto full = sysfs::ReadHca(d_.sysfs, h.name, sysfs::HcaDetail::kPorts);
          if (full) return Selected{std::move(*full), std::move(*l)};
          why = full.error().message();
        }
        tried += (tried.empty() ? "" : "; ") + h.name + ": " + why;
      }
      return CniFail(kInvalidConfig, "no free RDMA device for " + conf.name + " (" +
                                         (tried.empty() ? "no RDMA devices under " +
                                                              d_.sysfs.Sys("class/infiniband")
                                                        : "tried " + tried) +
                                         ")");
    }
  }
  if (!found) {
    return CniFail(kInvalidConfig, "no RDMA device matches " + std::string(SelectorName(sel.kind)) +
                                       " \"" + sel.value + "\": " + found.error().message());
  }
  if (auto c = claimed.find(found->address); c != claimed.end()) {
    return CniFail(kDeviceUnavailable,
                   found->name + " (" + found->address + ") is already attached to " + c->second);
  }
  return Selected{std::move(*found), std::nullopt};
}

CniResult<std::string> Plugin::NetnsMode(const NetNs& host, const NetConf& conf) {
  std::string mode;
  auto m = d_.rdma.GetNetnsMode(host);
  if (m) {
    mode = std::string(rdma::NetnsModeName(*m));
  } else if (m.error().code() == ErrorCode::kUnsupported) {
    mode = "unavailable";
  } else {
    return tl::unexpected(FromError(m.error().Wrap("read RDMA netns mode"), kKernelRefused));
  }
  if (mode != "exclusive" && conf.shared_policy == SharedPolicy::kError) {
    return CniFail(kSharedModeRejected,
                   "RDMA netns mode is " + mode +
                       " and sharedNetnsPolicy is \"error\": the RDMA "
                       "device cannot be isolated in the pod (set exclusive mode at boot with "
                       "ib_core netns_mode=0, or `rdma system set netns exclusive`)");
  }
  return mode;
}

CniResult<int> Plugin::CheckPkey(const Hca& hca, uint16_t pkey) {
  char want[8];
  std::snprintf(want, sizeof want, "0x%04x", pkey);
  if (hca.link_layer() != sysfs::LinkLayer::kInfiniBand) {
    if (pkey == sysfs::kDefaultPkey) return -1;
    return CniFail(kInvalidConfig, "pkey " + std::string(want) + " cannot apply to " + hca.name +
                                       ": its link layer is " +
                                       std::string(sysfs::LinkLayerName(hca.link_layer())) +
                                       " (RoCE has no partitions); leave pkey unset or \"0xffff\"");
  }
  auto full = sysfs::ReadHca(d_.sysfs, hca.name, sysfs::HcaDetail::kTables);
  if (!full) return tl::unexpected(FromError(full.error(), kDeviceUnavailable));
  const sysfs::Port* port = full->port(1);
  std::string table;
  if (port != nullptr) {
    for (size_t i = 0; i < port->pkeys.size(); ++i) {
      if (port->pkeys[i] == pkey) return static_cast<int>(i);
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%04x", port->pkeys[i]);
      table += (table.empty() ? "" : ", ") + std::string(buf);
    }
  }
  return CniFail(kInvalidConfig, "pkey " + std::string(want) + " is not in " + hca.name +
                                     " port 1's pkey table [" + table +
                                     "]: ask the subnet manager to add it, or use one listed");
}

Result<void> Plugin::RestoreNetdev(const AttachmentRecord& rec, const NetNs& host,
                                   const NetNs* pod) {
  if (!rec.netdev_moved) return {};
  LinkChange back{.name = rec.host_name, .mtu = rec.host_mtu, .up = rec.host_admin_up};
  if (pod != nullptr) {
    if (auto l = link::FindByMac(d_.links, *pod, rec.mac)) {
      return d_.links.MoveTo(*pod, l->ifindex, host, back);
    }
  }
  // Not in the pod: never moved, moved back already, or returned by the kernel when the pod's
  // namespace died (then named as in the pod, or devN). Restore it in place.
  auto l = link::FindByMac(d_.links, host, rec.mac);
  if (!l) {
    return Fail(ErrorCode::kNotFound, "netdev " + rec.host_name + " (" + rec.mac +
                                          ") is neither in the pod nor on the host");
  }
  LinkChange fix;
  if (l->name != rec.host_name) fix.name = rec.host_name;
  if (l->mtu != rec.host_mtu) fix.mtu = rec.host_mtu;
  if (l->admin_up != rec.host_admin_up) fix.up = rec.host_admin_up;
  if (!fix.name && !fix.mtu && !fix.up) return {};
  return d_.links.Change(host, l->ifindex, fix);
}

Result<void> Plugin::RestoreRdma(const AttachmentRecord& rec, const NetNs& host, const NetNs* pod) {
  if (!rec.rdma_moved) return {};
  if (pod != nullptr) {
    if (auto dev = d_.rdma.GetByName(*pod, rec.hca)) return d_.rdma.MoveTo(*pod, dev->index, host);
  }
  // The kernel hands RDMA devices back to init_net when a namespace dies.
  auto dev = d_.rdma.GetByName(host, rec.hca);
  if (!dev)
    return Fail(
        dev.error().Wrap("RDMA device " + rec.hca + " is neither in the pod nor on the host"));
  return {};
}

Result<void> Plugin::Restore(const AttachmentRecord& rec, const NetNs& host) {
  std::optional<NetNs> pod;
  if (!rec.netns.empty()) {
    auto p = d_.namespaces.Open(rec.netns);
    if (p) pod = std::move(*p);
  }
  const NetNs* podp = pod ? &*pod : nullptr;
  // Reverse of the order ADD used: InfiniBand moved the RDMA device first.
  Result<void> first =
      IsInfiniBand(rec) ? RestoreNetdev(rec, host, podp) : RestoreRdma(rec, host, podp);
  Result<void> second =
      IsInfiniBand(rec) ? RestoreRdma(rec, host, podp) : RestoreNetdev(rec, host, podp);
  if (!first) return first;
  return second;
}

Result<void> Plugin::Apply(AttachmentRecord& rec, const NetConf& conf, const StateStore& store,
                           const NetNs& host, const NetNs& pod) {
  auto move_rdma = [&]() -> Result<void> {
    if (rec.netns_mode != "exclusive") return {};
    KUBERDMA_ASSIGN_OR_RETURN(rdma::RdmaDevice dev, d_.rdma.GetByName(host, rec.hca));
    rec.rdma_moved = true;  // armed before the call: a partial move is found and undone
    KUBERDMA_TRY(store.Save(rec));
    return d_.rdma.MoveTo(host, dev.index, pod);
  };
  auto move_netdev = [&]() -> Result<void> {
    if (!rec.netdev_moved) return {};
    LinkChange into{
        .name = rec.ifname, .mtu = conf.mtu, .up = WantedAdminUp(conf, rec.host_admin_up)};
    return d_.links.MoveTo(host, rec.host_ifindex, pod, into);
  };
  // InfiniBand: the RDMA device first, then its IPoIB netdev; RoCE: the netdev first.
  if (IsInfiniBand(rec)) {
    KUBERDMA_TRY(move_rdma());
    return move_netdev();
  }
  KUBERDMA_TRY(move_netdev());
  return move_rdma();
}

Result<LinkInfo> Plugin::Verify(const AttachmentRecord& rec, const NetConf& conf,
                                const NetNs& pod) {
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, d_.links.GetByName(pod, rec.ifname));
  if (!rec.mac.empty() && link::NormalizeMac(l.mac) != link::NormalizeMac(rec.mac)) {
    return Fail(ErrorCode::kNotFound, rec.ifname + " in the pod has MAC " + l.mac + ", expected " +
                                          rec.mac + " (" + rec.hca + ")");
  }
  if (conf.mtu && l.mtu != *conf.mtu) {
    return Fail(ErrorCode::kInvalidArgument, rec.ifname + " has MTU " + std::to_string(l.mtu) +
                                                 ", config says " + std::to_string(*conf.mtu));
  }
  if (conf.link_state != LinkState::kLeave && l.admin_up != (conf.link_state == LinkState::kUp)) {
    return Fail(ErrorCode::kInvalidArgument, rec.ifname + " is administratively " +
                                                 (l.admin_up ? "up" : "down") + ", config says " +
                                                 (l.admin_up ? "down" : "up"));
  }
  if (rec.rdma_moved) {
    auto dev = d_.rdma.GetByName(pod, rec.hca);
    if (!dev) return Fail(dev.error().Wrap("RDMA device " + rec.hca + " is not in the pod"));
  }
  return l;
}

void Plugin::WriteDeviceInfo(const NetConf& conf, const Hca& hca, const AttachmentRecord& rec) {
  if (conf.device_info_file.empty()) return;
  // Keep what Multus copied from the device plugin (if anything), and name the RDMA device.
  json info = json::object();
  if (auto old = ReadFile(conf.device_info_file)) {
    info = json::parse(*old, nullptr, false);
    if (info.is_discarded() || !info.is_object()) info = json::object();
  }
  info["type"] = "pci";
  info["version"] = "1.1.0";
  if (!info.contains("pci") || !info["pci"].is_object()) info["pci"] = json::object();
  info["pci"]["pci-address"] = hca.pci_address;
  info["pci"]["rdma-device"] = hca.name;
  if (!hca.pf_address.empty()) info["pci"]["pf-pci-address"] = hca.pf_address;
  if (hca.bus == sysfs::BusKind::kAuxiliary) info["pci"]["auxiliary-device"] = hca.address;
  info["pci"]["rdma-netns-mode"] = rec.netns_mode;
  if (auto w = WriteFileAtomic(conf.device_info_file, info.dump() + "\n"); !w) {
    spdlog::warn("could not write device-info file: {}", w.error().message());
  }
}

CniResult<json> Plugin::Attach(const Request& req, const NetConf& conf, const StateStore& store,
                               const NetNs& host, const NetNs& pod) {
  const bool chained =
      conf.prev_result && PrevResultHasInterface(*conf.prev_result, req.ifname, req.netns);
  auto selected = Select(conf, host, chained, store, Key(req.container_id, req.ifname));
  if (!selected) return tl::unexpected(selected.error());
  const Hca* hca = &selected->hca;
  auto mode = NetnsMode(host, conf);
  if (!mode) return tl::unexpected(mode.error());
  AttachmentRecord rec{.network = conf.name,
                       .container_id = req.container_id,
                       .ifname = req.ifname,
                       .netns = req.netns,
                       .hca = hca->name,
                       .hca_address = hca->address,
                       .link_layer = std::string(sysfs::LinkLayerName(hca->link_layer())),
                       .netns_mode = *mode,
                       .pkey = conf.pkey.value_or(sysfs::kDefaultPkey)};
  auto pkey_index = CheckPkey(*hca, rec.pkey);
  if (!pkey_index) return tl::unexpected(pkey_index.error());
  rec.pkey_index = *pkey_index;
  Result<LinkInfo> netdev = Fail(ErrorCode::kNotFound, hca->name + " has no netdev");
  if (chained) {
    netdev = d_.links.GetByName(pod, req.ifname);
  } else if (selected->host_link) {
    netdev = *selected->host_link;
  } else if (!hca->netdevs.empty()) {
    netdev = d_.links.GetByName(host, hca->netdevs.front());
  }
  if (!netdev)
    return tl::unexpected(
        FromError(netdev.error().Wrap("attach " + hca->name), kDeviceUnavailable));
  if (!chained) {
    if (d_.links.GetByName(pod, req.ifname)) {
      return CniFail(kInvalidEnv, "CNI_IFNAME " + req.ifname + " already exists in " + req.netns);
    }
    rec.netdev_moved = true;
  }
  rec.host_name = netdev->name;
  rec.host_ifindex = netdev->ifindex;
  rec.mac = netdev->mac;
  rec.host_mtu = netdev->mtu;
  rec.host_admin_up = netdev->admin_up;
  if (mode->find("exclusive") == std::string::npos) {
    spdlog::warn(
        "RDMA netns mode is {}: {} stays visible to every namespace (sharedNetnsPolicy "
        "continue)",
        *mode, hca->name);
  }
  // The record exists before the first change, so a crash at any point can be undone.
  AttachmentRecord armed = rec;
  armed.rdma_moved = false;
  if (auto s = store.Save(armed); !s) return tl::unexpected(FromError(s.error(), kStateFailure));
  auto applied = Apply(rec, conf, store, host, pod);
  auto verified = applied ? Verify(rec, conf, pod) : Result<LinkInfo>(Fail(applied.error()));
  if (!verified) {
    auto undone = Restore(rec, host);
    std::string what =
        "attach " + hca->name + " as " + req.ifname + ": " + verified.error().message();
    if (!undone) {
      return CniFail(kRollbackIncomplete, what + "; undo incomplete: " + undone.error().message(),
                     "state kept in " + conf.state_dir + " so that DEL or GC can finish the undo");
    }
    (void)store.Remove(rec.network, rec.container_id, rec.ifname);
    return tl::unexpected(FromError(Error(verified.error().code(), what), kKernelRefused));
  }
  rec.done = true;
  if (auto s = store.Save(rec); !s) return tl::unexpected(FromError(s.error(), kStateFailure));
  WriteDeviceInfo(conf, *hca, rec);
  spdlog::info("attached {} ({}, {}) as {} in {}; rdma netns mode {}{}", hca->name, hca->address,
               rec.host_name, req.ifname, req.netns, rec.netns_mode,
               rec.pkey_index >= 0 ? ", pkey index " + std::to_string(rec.pkey_index) : "");
  Interface iface{.name = req.ifname,
                  .mac = verified->mac,
                  .mtu = verified->mtu,
                  .sandbox = req.netns,
                  .pci_id = hca->pci_address};
  return BuildResult(conf.cni_version, iface, conf.prev_result);
}

CniResult<json> Plugin::Add(const Request& req, const NetConf& conf) {
  auto lock = Lock(conf);
  if (!lock) return tl::unexpected(lock.error());
  StateStore store(conf.state_dir);
  auto host = d_.namespaces.Host();
  if (!host) return tl::unexpected(FromError(host.error(), kIoFailure));
  auto pod = d_.namespaces.Open(req.netns);
  if (!pod) return CniFail(kInvalidEnv, "CNI_NETNS: " + pod.error().message());
  auto existing = store.Load(conf.name, req.container_id, req.ifname);
  if (!existing) return tl::unexpected(FromError(existing.error(), kStateFailure));
  if (*existing) {
    const AttachmentRecord& old = **existing;
    if (old.done && old.netns == req.netns) {
      if (auto l = Verify(old, conf, *pod)) {
        auto hca = sysfs::HcaForAddress(d_.sysfs, old.hca_address, sysfs::HcaDetail::kIdentity);
        Interface iface{.name = req.ifname,
                        .mac = l->mac,
                        .mtu = l->mtu,
                        .sandbox = req.netns,
                        .pci_id = hca ? hca->pci_address : ""};
        return BuildResult(conf.cni_version, iface, conf.prev_result);
      }
    }
    // A half-done or stale attachment under the same key: undo it before starting again.
    if (auto r = Restore(old, *host); !r) {
      return CniFail(kRollbackIncomplete,
                     "an earlier ADD of " + req.container_id + "/" + req.ifname + " left " +
                         old.hca +
                         " half-attached and it could not be undone: " + r.error().message());
    }
    (void)store.Remove(conf.name, req.container_id, req.ifname);
  }
  return Attach(req, conf, store, *host, *pod);
}

CniResult<void> Plugin::Del(const Request& req, const NetConf& conf) {
  auto lock = Lock(conf);
  if (!lock) return tl::unexpected(lock.error());
  StateStore store(conf.state_dir);
  auto rec = store.Load(conf.name, req.container_id, req.ifname);
  if (!rec) return tl::unexpected(FromError(rec.error(), kStateFailure));
  if (!*rec) {
    spdlog::info("DEL {}/{}: no state recorded; nothing to do", req.container_id, req.ifname);
    return {};
  }
  auto host = d_.namespaces.Host();
  if (!host) return tl::unexpected(FromError(host.error(), kIoFailure));
  AttachmentRecord r = **rec;
  if (!req.netns.empty()) r.netns = req.netns;
  auto restored = Restore(r, *host);
  if (!restored && restored.error().code() != ErrorCode::kNotFound) {
    return CniFail(kRollbackIncomplete,
                   "DEL " + req.container_id + "/" + req.ifname + " (" + r.hca +
                       "): " + restored.error().message(),
                   "state kept in " + conf.state_dir + "; DEL can be retried");
  }
  if (!restored) spdlog::warn("DEL {}: {}", r.hca, restored.error().message());
  if (auto rm = store.Remove(r.network, r.container_id, r.ifname); !rm) {
    return tl::unexpected(FromError(rm.error(), kStateFailure));
  }
  spdlog::info("restored {} as {} on the host", r.hca, r.host_name);
  return {};
}

CniResult<void> Plugin::Check(const Request& req, const NetConf& conf) {
  StateStore store(conf.state_dir);
  auto rec = store.Load(conf.name, req.container_id, req.ifname);
  if (!rec) return tl::unexpected(FromError(rec.error(), kStateFailure));
  std::string who = req.container_id + "/" + req.ifname;
  if (!*rec) return CniFail(kCheckFailed, "no attachment recorded for " + who);
  if (!(*rec)->done) return CniFail(kCheckFailed, "ADD of " + who + " did not complete");
  auto pod = d_.namespaces.Open(req.netns);
  if (!pod) return CniFail(kCheckFailed, pod.error().message());
  if (auto l = Verify(**rec, conf, *pod); !l) {
    return CniFail(kCheckFailed, "CHECK " + who + ": " + l.error().message());
  }
  if (conf.prev_result && !PrevResultHasInterface(*conf.prev_result, req.ifname, req.netns)) {
    return CniFail(kCheckFailed, "prevResult does not list " + req.ifname + " in " + req.netns);
  }
  return {};
}

CniResult<void> Plugin::Status(const NetConf& conf) {
  StateStore store(conf.state_dir);
  if (auto w = store.CheckWritable(); !w) {
    return CniFail(kPluginNotAvailable, "state directory unusable: " + w.error().message());
  }
  auto hcas = sysfs::DiscoverHcas(d_.sysfs, sysfs::HcaDetail::kIdentity);
  if (!hcas) return CniFail(kPluginNotAvailable, hcas.error().message());
  if (hcas->empty()) {
    return CniFail(kPluginNotAvailable,
                   "no RDMA devices under " + d_.sysfs.Sys("class/infiniband"));
  }
  auto records = store.List();
  if (!records) return CniFail(kPluginNotAvailable, records.error().message());
  std::set<std::string> claimed;
  for (const auto& r : *records) claimed.insert(r.hca_address);
  for (const auto& h : *hcas) {
    if (!claimed.contains(h.address)) return {};
  }
  return CniFail(kPluginLimited, "all " + std::to_string(hcas->size()) +
                                     " RDMA devices are attached to pods; new ADDs without a "
                                     "free device will fail");
}

CniResult<void> Plugin::Gc(const NetConf& conf) {
  if (!conf.valid_attachments) {
    return CniFail(kInvalidConfig,
                   "GC needs cni.dev/valid-attachments (refusing to treat every "
                   "attachment as stale)");
  }
  auto lock = Lock(conf);
  if (!lock) return tl::unexpected(lock.error());
  StateStore store(conf.state_dir);
  auto host = d_.namespaces.Host();
  if (!host) return tl::unexpected(FromError(host.error(), kIoFailure));
  std::set<std::string> valid;
  for (const auto& a : *conf.valid_attachments) valid.insert(Key(a.container_id, a.ifname));
  auto records = store.List(conf.name);
  if (!records) return tl::unexpected(FromError(records.error(), kStateFailure));
  std::string failures;
  for (const auto& r : *records) {
    if (valid.contains(Key(r.container_id, r.ifname))) continue;
    auto restored = Restore(r, *host);
    if (!restored && restored.error().code() != ErrorCode::kNotFound) {
      failures += (failures.empty() ? "" : "; ") + r.hca + ": " + restored.error().message();
      continue;
    }
    (void)store.Remove(r.network, r.container_id, r.ifname);
    spdlog::info("GC restored {} from stale attachment {}/{}", r.hca, r.container_id, r.ifname);
  }
  if (!failures.empty()) return CniFail(kRollbackIncomplete, "GC could not restore: " + failures);
  return {};
}

}  // namespace kuberdma::cni
