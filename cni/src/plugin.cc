// SPDX-License-Identifier: Apache-2.0
// The verbs of the `rdma` plugin. Each reads as a script: lock, open namespaces, plan, record,
// execute (with undo), report.
#include "kuberdma/cni/plugin.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "kuberdma/base/check.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/cni/result.h"
#include "kuberdma/contract/slot_id.h"
#include "kuberdma/sysfs/sriov.h"

namespace kuberdma::cni {

using link::LinkChange;
using link::LinkInfo;
using netns::NetNs;
using nlohmann::json;
using sysfs::Hca;

namespace {

// The config's state records, created under its state root.
StateStore StoreOf(const NetConf& conf) { return StateStore(conf.state_dir, conf.state_root); }

CniResult<NodeLock> Lock(const NetConf& conf) {
  KUBERDMA_CNI_ASSIGN_OR_RETURN(
      NodeLock lock, NodeLock::Acquire(conf.state_dir, conf.lock_timeout_ms, conf.state_root),
      kStateFailure);
  return lock;
}

bool IsInfiniBand(const AttachmentRecord& rec) { return rec.link_layer == "InfiniBand"; }

// The DRA claim device a deviceID names (released Multus passes the CDI device name's suffix).
std::optional<contract::ClaimDevice> ClaimDeviceOf(const NetConf& conf) {
  bool device_id = conf.selector.kind == SelectorKind::kRuntimeDeviceId ||
                   conf.selector.kind == SelectorKind::kDeviceId ||
                   conf.selector.kind == SelectorKind::kPciBusId;
  return device_id ? contract::ParseClaimDevice(conf.selector.value) : std::nullopt;
}

// A claim device ID is accepted only for that claim of the pod, and only for one of its HCAs.
CniResult<void> CheckClaimDevice(const Hca& hca, const contract::ClaimDevice& claimed,
                                 const contract::PodAnswer& answer, const std::string& ns,
                                 const std::string& name) {
  auto claim = answer.claims.find(claimed.uid);
  if (claim == answer.claims.end()) {
    return CniFail(kNotAllocated, "deviceID names DRA claim " + claimed.uid +
                                      ", which is no prepared claim of pod " + ns + "/" + name +
                                      " (rdma-doctor node lists the node's claims). Nothing "
                                      "was changed");
  }
  const auto& hcas = claim->second;
  if (std::find(hcas.begin(), hcas.end(), hca.name) != hcas.end()) return {};
  return CniFail(kNotAllocated, hca.name + " (" + hca.address + ") is not a device of DRA claim " +
                                    claimed.uid + " of pod " + ns + "/" + name +
                                    ". Nothing was changed");
}

}  // namespace

Result<void> Plugin::RestoreNetdev(const AttachmentRecord& rec, const NetNs& host,
                                   const NetNs* pod) {
  KUBERDMA_TRY(PutNetdevBack(rec, host, pod));
  return RestoreNodeAddresses(rec, host);
}

std::string Plugin::HomeName(const AttachmentRecord& rec, const NetNs& host, int ifindex) {
  auto holder = d_.links.GetByName(host, rec.host_name);
  if (!holder || holder->ifindex == ifindex) return rec.host_name;
  // Another link has the name now (a VF whose driver was rebound took the lowest free ethN):
  // the name the kernel gives a device that comes home to a taken name, so DEL never sticks.
  std::string name = "dev" + std::to_string(ifindex);
  spdlog::warn("{} ({}) comes home as {}: another link is named {} on the host now", rec.ifname,
               rec.hca, name, rec.host_name);
  return name;
}

Result<void> Plugin::PutNetdevBack(const AttachmentRecord& rec, const NetNs& host,
                                   const NetNs* pod) {
  if (!rec.netdev_moved) return {};
  LinkChange back{.name = rec.host_name, .mtu = rec.host_mtu, .up = rec.host_admin_up};
  if (pod != nullptr) {
    if (auto l = FindRecorded(rec, *pod)) {
      back.name = HomeName(rec, host, l->ifindex);
      return d_.links.MoveTo(*pod, l->ifindex, host, back);
    }
  }
  // Not in the pod: never moved, moved back already, or returned by the kernel when the pod's
  // namespace died (then named as in the pod, or devN). Restore it in place.
  auto l = FindRecorded(rec, host);
  if (!l) {
    return Fail(ErrorCode::kNotFound, "netdev " + rec.host_name + " (" + rec.mac +
                                          ") is neither in the pod nor on the host");
  }
  LinkChange fix;
  if (std::string name = HomeName(rec, host, l->ifindex); l->name != name) fix.name = name;
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
  if (!dev) {
    return Fail(
        dev.error().Wrap("RDMA device " + rec.hca + " is neither in the pod nor on the host"));
  }
  return {};
}

Result<void> Plugin::RemoveChild(const AttachmentRecord& rec, const NetNs* pod) {
  // No pod namespace: the kernel deleted the child with it (children have rtnl_link_ops, so
  // default_device_exit_batch deletes them rather than handing them back).
  if (pod == nullptr) return {};
  auto l = d_.links.GetByName(*pod, rec.ifname);
  if (!l) return l.error().code() == ErrorCode::kNotFound ? Result<void>{} : Fail(l.error());
  if (l->kind != AttachModeName(rec.mode) ||
      (!rec.mac.empty() && link::NormalizeMac(l->mac) != link::NormalizeMac(rec.mac))) {
    // Never created (ADD died before), and the name is someone else's now: not ours to delete.
    spdlog::warn("{} in {} is a {} link with MAC {}, not the {} child {} recorded: leaving it",
                 rec.ifname, rec.netns, l->kind.empty() ? "physical" : l->kind, l->mac,
                 AttachModeName(rec.mode), rec.mac);
    return {};
  }
  auto deleted = d_.links.Delete(*pod, l->ifindex);
  if (!deleted && deleted.error().code() == ErrorCode::kNotFound) return {};
  return deleted;
}

Result<void> Plugin::Restore(const AttachmentRecord& rec, const NetNs& host) {
  std::optional<NetNs> pod;
  if (!rec.netns.empty()) {
    // A runtime's DEL naming the node's own namespace has no pod to take the device from.
    auto p = d_.namespaces.Open(rec.netns);
    if (p && !p->SameAs(host)) pod = std::move(*p);
  }
  const NetNs* podp = pod ? &*pod : nullptr;
  if (IsChildMode(rec.mode)) return RemoveChild(rec, podp);
  // A VF whose rebind was cut short (a SIGKILL between the unbind and the probe, in ADD or an
  // earlier DEL) has no driver and so no netdev: probe it first, or everything below finds
  // nothing and the VF is lost to every later pod. Failing keeps the record: DEL is retried.
  if (rec.vf) KUBERDMA_TRY(sysfs::BindIfUnbound(d_.sysfs, rec.hca_address, d_.rebind_wait));
  // Reverse of the order ADD used: InfiniBand moved the RDMA device first; a VF's PF-side
  // settings were made before either moved, so they are restored last.
  Result<void> first =
      IsInfiniBand(rec) ? RestoreNetdev(rec, host, podp) : RestoreRdma(rec, host, podp);
  Result<void> second =
      IsInfiniBand(rec) ? RestoreRdma(rec, host, podp) : RestoreNetdev(rec, host, podp);
  Result<void> third = RestoreVf(rec, host);
  // The GUID leaves its partition whatever else failed: the pod no longer holds it. A subnet
  // manager out of reach must not keep the pod's sandbox from going (rdma-doctor partitions
  // shows who still needs each GUID).
  if (auto told = TellPartition(rec, false); !told) {
    spdlog::warn("{}/{}: {}", rec.container_id, rec.ifname, told.error().msg);
  }
  if (!first) return first;
  if (!second) return second;
  return third;
}

Result<void> Plugin::Apply(AttachPlan& plan, const StateStore& store, const NetNs& host,
                           const NetNs& pod) {
  AttachmentRecord& rec = plan.record;
  if (plan.child) {
    KUBERDMA_TRY(d_.links.CreateChild(host, rec.host_ifindex, pod, *plan.child));
    if (!plan.into.up) return {};
    // The record already names the child's MAC (planned: macvlan's derived one, ipvlan's parent's).
    KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, d_.links.GetByName(pod, rec.ifname));
    return d_.links.Change(pod, l.ifindex, plan.into);
  }
  auto move_rdma = [&]() -> Result<void> {
    if (rec.netns_mode != rdma::NetnsMode::kExclusive) return {};
    KUBERDMA_ASSIGN_OR_RETURN(rdma::RdmaDevice dev, d_.rdma.GetByName(host, rec.hca));
    rec.rdma_moved = true;  // armed before the call: a partial move is found and undone
    KUBERDMA_TRY(store.Save(rec));
    return d_.rdma.MoveTo(host, dev.index, pod);
  };
  KUBERDMA_TRY(ApplyVf(plan, store, host));
  auto move_netdev = [&]() -> Result<void> {
    if (!rec.netdev_moved) return {};
    return d_.links.MoveTo(host, rec.host_ifindex, pod, plan.into);
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
  if (IsChildMode(rec.mode) && l.kind != AttachModeName(rec.mode)) {
    return Fail(ErrorCode::kNotFound,
                rec.ifname + " in the pod is a " + (l.kind.empty() ? "physical" : l.kind) +
                    " link, not the " + std::string(AttachModeName(rec.mode)) + " child of " +
                    rec.host_name + " (" + rec.hca + ")");
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
  KUBERDMA_TRY(VerifyAddresses(rec, pod, l.ifindex));
  return l;
}

void Plugin::WriteDeviceInfo(const NetConf& conf, const Hca& hca, const AttachmentRecord& rec) {
  if (conf.device_info_file.empty()) return;
  // Keep what Multus copied from the device plugin (if anything), and name the RDMA device.
  // ParseConfig confined the path to Multus's device-info directory; what is there is Multus's
  // copy or ours. Never read through a link planted there, and replace only by rename.
  json info = json::object();
  auto old = ReadRegularFile(conf.device_info_file);
  if (!old && old.error().code() != ErrorCode::kNotFound) {
    spdlog::warn("not writing device-info file: {}", old.error().message());
    return;
  }
  if (old) {
    auto parsed = ParseUntrustedJson(*old, "device-info file");
    if (parsed && parsed->is_object()) info = std::move(*parsed);
  }
  info["type"] = "pci";
  info["version"] = "1.1.0";
  if (!info.contains("pci") || !info["pci"].is_object()) info["pci"] = json::object();
  info["pci"]["pci-address"] = hca.pci_address;
  info["pci"]["rdma-device"] = hca.name;
  if (!hca.pf_address.empty()) info["pci"]["pf-pci-address"] = hca.pf_address;
  if (hca.bus == sysfs::BusKind::kAuxiliary) info["pci"]["auxiliary-device"] = hca.address;
  info["pci"]["rdma-netns-mode"] = rdma::NetnsModeName(rec.netns_mode);
  if (IsChildMode(rec.mode)) {
    // The pod's interface is a child: name the parent it shares the HCA through.
    info["pci"]["interface-mode"] = AttachModeName(rec.mode);
    info["pci"]["parent-netdev"] = rec.host_name;
  }
  if (auto w = WriteFileAtomic(conf.device_info_file, DumpJson(info) + "\n"); !w) {
    spdlog::warn("could not write device-info file: {}", w.error().message());
  }
}

json Plugin::ResultFor(const AttachmentRecord& rec, const LinkInfo& link, const std::string& pci_id,
                       const NetConf& conf) const {
  Interface iface{
      .name = rec.ifname, .mac = link.mac, .mtu = link.mtu, .sandbox = rec.netns, .pci_id = pci_id};
  std::optional<IpamResult> ipam;
  if (rec.ipam && rec.ipam->result.is_object()) {
    if (auto r = IpamResult::Parse(rec.ipam->result, rec.ipam->type)) ipam = std::move(*r);
  }
  return BuildResult(conf.cni_version, iface, conf.prev_result, ipam ? &*ipam : nullptr);
}

CniResult<json> Plugin::RollBack(const AttachmentRecord& rec, const Request& req,
                                 const NetConf& conf, const StateStore& store, const NetNs& host,
                                 const CniError& why) {
  std::string left;
  if (auto undone = Restore(rec, host); !undone) left = undone.error().message();
  if (rec.ipam && rec.ipam->requested) {
    if (auto released = ReleaseAddresses(*rec.ipam, req, conf); !released) {
      left += (left.empty() ? "" : "; ") + released.error().msg;
    }
  }
  if (!left.empty()) {
    return CniFail(kRollbackIncomplete, why.msg + "; undo incomplete: " + left,
                   "state kept in " + conf.state_dir + " so that DEL or GC can finish the undo");
  }
  (void)store.Remove(rec.network, rec.container_id, rec.ifname);
  return tl::unexpected(why);
}

namespace {

void LogAttached(const AttachmentRecord& rec) {
  spdlog::info(
      "attached {} ({}, {}) as {}{} in {}; rdma netns mode {}{}", rec.hca, rec.hca_address,
      rec.host_name,
      IsChildMode(rec.mode) ? "a " + std::string(AttachModeName(rec.mode)) + " child " : "",
      rec.ifname, rec.netns, rdma::NetnsModeName(rec.netns_mode),
      rec.pkey_index >= 0 ? ", pkey index " + std::to_string(rec.pkey_index) : "");
}

}  // namespace

CniResult<json> Plugin::Execute(AttachPlan& plan, const Request& req, const NetConf& conf,
                                const StateStore& store, const NetNs& host, const NetNs& pod) {
  AttachmentRecord& rec = plan.record;
  if (rec.netns_mode != rdma::NetnsMode::kExclusive) {
    spdlog::warn(
        "RDMA netns mode is {}: {} stays visible to every namespace (sharedNetnsPolicy "
        "continue)",
        rdma::NetnsModeName(rec.netns_mode), rec.hca);
  }
  // The record exists before the first change, so a crash at any point can be undone.
  KUBERDMA_CNI_TRY(store.Save(rec), kStateFailure);
  const std::string what = "attach " + rec.hca + " as " + req.ifname;
  if (auto applied = Apply(plan, store, host, pod); !applied) {
    return RollBack(rec, req, conf, store, host,
                    FromError(applied.error().Wrap(what), kKernelRefused));
  }
  if (rec.ipam) {
    if (auto a = AllocateAddresses(plan, req, conf, store, pod); !a) {
      return RollBack(rec, req, conf, store, host,
                      {a.error().code, what + ": " + a.error().msg, a.error().details});
    }
  }
  auto verified = Verify(rec, conf, pod);
  if (!verified) {
    return RollBack(rec, req, conf, store, host,
                    FromError(verified.error().Wrap(what), kKernelRefused));
  }
  // Last: the subnet manager is told of a GUID only once the pod's VF has it.
  if (auto told = TellPartition(rec, true); !told) {
    return RollBack(rec, req, conf, store, host,
                    {told.error().code, what + ": " + told.error().msg, told.error().details});
  }
  rec.done = true;
  KUBERDMA_CNI_TRY(store.Save(rec), kStateFailure);
  WriteDeviceInfo(conf, plan.hca, rec);
  LogAttached(rec);
  return ResultFor(rec, *verified, plan.hca.pci_address, conf);
}

std::optional<json> Plugin::Repeat(const AttachmentRecord& old, const Request& req,
                                   const NetConf& conf, const NetNs& pod) {
  if (!old.done || old.netns != req.netns) return std::nullopt;
  auto l = Verify(old, conf, pod);
  if (!l) return std::nullopt;
  auto hca = sysfs::HcaForAddress(d_.sysfs, old.hca_address, sysfs::HcaDetail::kIdentity);
  return ResultFor(old, *l, hca ? hca->pci_address : "", conf);
}

CniResult<void> Plugin::UndoStale(const AttachmentRecord& old, const Request& req,
                                  const NetConf& conf, const StateStore& store, const NetNs& host) {
  // A half-done or stale attachment under the same key: undo it before starting again.
  if (auto r = Restore(old, host); !r) {
    return CniFail(kRollbackIncomplete,
                   "an earlier ADD of " + req.container_id + "/" + req.ifname + " left " + old.hca +
                       " half-attached and it could not be undone: " + r.error().message());
  }
  if (old.ipam && old.ipam->requested) KUBERDMA_CNI_TRY(ReleaseAddresses(*old.ipam, req, conf), 0);
  (void)store.Remove(conf.name, req.container_id, req.ifname);
  return {};
}

CniResult<json> Plugin::Add(const Request& req, const NetConf& conf) {
  if (conf.ipam && (d_.ipam == nullptr || d_.addrs == nullptr)) {
    return CniFail(kInvalidConfig, "ipam is configured but this plugin was built without IPAM");
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(NodeLock lock, Lock(conf), 0);
  StateStore store = StoreOf(conf);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(NetNs host, d_.namespaces.Host(), kIoFailure);
  auto pod = d_.namespaces.Open(req.netns);
  if (!pod) return CniFail(kInvalidEnv, "CNI_NETNS: " + pod.error().message());
  if (pod->SameAs(host)) {
    return CniFail(kInvalidEnv, "CNI_NETNS " + req.netns +
                                    " is the namespace rdma runs in (the node's), not a pod's: "
                                    "refusing to rename the node's HCA netdevs");
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto existing, store.Load(conf.name, req.container_id, req.ifname),
                                kStateFailure);
  if (existing) {
    if (auto again = Repeat(*existing, req, conf, *pod)) return *again;
    KUBERDMA_CNI_TRY(UndoStale(*existing, req, conf, store, host), 0);
  }
  // ADD judges the node's own NICs by their addresses and routes: main always wires AddrOps in.
  KUBERDMA_CHECK(d_.addrs != nullptr);
  Planner planner(d_.links, d_.rdma, *d_.addrs, d_.sysfs, d_.node, d_.allocations, d_.vfs);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(AttachPlan plan, planner.Plan(req, conf, store, host, *pod), 0);
  KUBERDMA_CNI_TRY(CheckAllocated(plan.hca, req, conf), 0);
  return Execute(plan, req, conf, store, host, *pod);
}

CniResult<void> Plugin::CheckAllocated(const sysfs::Hca& hca, const Request& req,
                                       const NetConf& conf) const {
  if (d_.pod_allocations == nullptr || d_.node.allow_unallocated) return {};
  std::string ns = CniArg(req.args, "K8S_POD_NAMESPACE");
  std::string name = CniArg(req.args, "K8S_POD_NAME");
  if (ns.empty() || name.empty()) {
    return CniFail(kInvalidConfig,
                   "CNI_ARGS names no pod (K8S_POD_NAMESPACE, K8S_POD_NAME), so " + hca.name +
                       " cannot be checked against the pod's allocation; outside Kubernetes, set "
                       "\"allowUnallocated\": true in the node config. Nothing was changed");
  }
  auto answer = d_.pod_allocations->Of(ns, name);
  if (!answer || !answer->error.empty()) {
    return CniFail(
        kTryAgainLater,
        "cannot check that " + hca.name + " was allocated to pod " + ns + "/" + name + ": " +
            (answer ? "rdma-device-plugin: " + answer->error : answer.error().message()) +
            " (is rdma-device-plugin running on this node? kubectl -n kube-rdma get "
            "pods -o wide). Nothing was changed; the runtime retries");
  }
  if (auto claimed = ClaimDeviceOf(conf)) return CheckClaimDevice(hca, *claimed, *answer, ns, name);
  const auto& hcas = answer->hcas;
  if (std::find(hcas.begin(), hcas.end(), hca.name) != hcas.end()) return {};
  std::string got;
  for (const auto& s : answer->slots) got += (got.empty() ? "" : ", ") + s;
  return CniFail(kNotAllocated,
                 hca.name + " (" + hca.address + ") was not allocated to pod " + ns + "/" + name +
                     (got.empty() ? ", which has no kube-rdma allocation"
                                  : ", whose kube-rdma allocation is " + got) +
                     ": a network may only attach the pod's own HCAs (ask for them in the pod's "
                     "resources; a NAD's deviceID, hca or device cannot name another pod's). "
                     "Nothing was changed");
}

namespace {

// The record DEL undoes. Without a network name (a config DEL could only salvage), the
// attachment's record in any network.
Result<std::optional<AttachmentRecord>> FindForDel(const StateStore& store, const Request& req,
                                                   const NetConf& conf) {
  if (!conf.name.empty()) return store.Load(conf.name, req.container_id, req.ifname);
  std::vector<Error> unreadable;
  KUBERDMA_ASSIGN_OR_RETURN(auto all, store.List("", &unreadable));
  for (const auto& e : unreadable) spdlog::warn("DEL: skipping {}", e.message());
  for (auto& r : all) {
    if (r.container_id == req.container_id && r.ifname == req.ifname) return std::optional(r);
  }
  return std::optional<AttachmentRecord>{};
}

}  // namespace

CniResult<void> Plugin::Del(const Request& req, const NetConf& conf) {
  StateStore store = StoreOf(conf);
  // No state directory, no record: DEL creates nothing (it may come with a config ADD refused).
  std::optional<NodeLock> lock;
  std::optional<AttachmentRecord> rec;
  if (store.Exists()) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(lock, Lock(conf), 0);
    KUBERDMA_CNI_ASSIGN_OR_RETURN(rec, FindForDel(store, req, conf), kStateFailure);
  }
  if (rec) {
    AttachmentRecord r = *rec;
    if (!req.netns.empty()) r.netns = req.netns;
    KUBERDMA_CNI_TRY(RestoreForDel(r, req, conf), 0);
  } else if (IsChildMode(conf.mode)) {
    KUBERDMA_CNI_TRY(RemoveUnrecordedChild(req, conf), kRollbackIncomplete);
  } else {
    spdlog::info("DEL {}/{}: no state recorded; no device to restore", req.container_id,
                 req.ifname);
  }
  // IPAM DEL every time (the specification makes it idempotent): also without state, after the
  // namespace died, and when repeated, so that no address outlives its attachment.
  if (auto ipam = IpamOf(rec ? &*rec : nullptr, conf)) {
    auto released = ReleaseAddresses(*ipam, req, conf);
    // An IPAM plugin that never ran for this attachment and cannot run now holds nothing of it.
    bool never_allocated = rec && rec->ipam && !rec->ipam->requested;
    if (!released && !(never_allocated && released.error().details == kIpamNotRun)) {
      return tl::unexpected(released.error());
    }
  }
  if (rec) {
    KUBERDMA_CNI_TRY(store.Remove(rec->network, rec->container_id, rec->ifname), kStateFailure);
    spdlog::info("restored {} as {} on the host", rec->hca, rec->host_name);
  }
  return {};
}

Result<void> Plugin::RemoveUnrecordedChild(const Request& req, const NetConf& conf) {
  // The record is gone (a node's /run wiped, a hand clean-up): the child may still be in a live
  // pod. Delete what ADD would have made: the ifname, of this mode, with this attachment's MAC.
  spdlog::info("DEL {}/{}: no state recorded; removing the {} child if it is there",
               req.container_id, req.ifname, AttachModeName(conf.mode));
  AttachmentRecord guess{.container_id = req.container_id,
                         .ifname = req.ifname,
                         .netns = req.netns,
                         .mode = conf.mode};
  if (conf.mode == AttachMode::kMacvlan)
    guess.mac = ChildMac(conf.name, req.container_id, req.ifname);
  if (req.netns.empty()) return {};
  KUBERDMA_ASSIGN_OR_RETURN(NetNs host, d_.namespaces.Host());
  auto pod = d_.namespaces.Open(req.netns);
  if (!pod || pod->SameAs(host)) return {};
  return RemoveChild(guess, &*pod);
}

CniResult<void> Plugin::RestoreForDel(const AttachmentRecord& r, const Request& req,
                                      const NetConf& conf) {
  KUBERDMA_CNI_ASSIGN_OR_RETURN(NetNs host, d_.namespaces.Host(), kIoFailure);
  auto restored = Restore(r, host);
  if (!restored && restored.error().code() != ErrorCode::kNotFound) {
    return CniFail(kRollbackIncomplete,
                   "DEL " + req.container_id + "/" + req.ifname + " (" + r.hca +
                       "): " + restored.error().message(),
                   "state kept in " + conf.state_dir + "; DEL can be retried");
  }
  if (!restored) spdlog::warn("DEL {}: {}", r.hca, restored.error().message());
  return {};
}

CniResult<void> Plugin::Check(const Request& req, const NetConf& conf) {
  StateStore store = StoreOf(conf);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto rec, store.Load(conf.name, req.container_id, req.ifname),
                                kStateFailure);
  std::string who = AttachmentKey(req.container_id, req.ifname);
  if (!rec) return CniFail(kCheckFailed, "no attachment recorded for " + who);
  if (!rec->done) return CniFail(kCheckFailed, "ADD of " + who + " did not complete");
  auto pod = d_.namespaces.Open(req.netns);
  if (!pod) return CniFail(kCheckFailed, pod.error().message());
  if (auto l = Verify(*rec, conf, *pod); !l) {
    return CniFail(kCheckFailed, "CHECK " + who + ": " + l.error().message());
  }
  KUBERDMA_CNI_TRY(CheckVf(*rec, who), 0);
  if (conf.prev_result && !PrevResultHasInterface(*conf.prev_result, req.ifname, req.netns)) {
    return CniFail(kCheckFailed, "prevResult does not list " + req.ifname + " in " + req.netns);
  }
  if (auto ipam = IpamOf(&*rec, conf)) KUBERDMA_CNI_TRY(CheckAddresses(*ipam, req, conf), 0);
  return {};
}

CniResult<void> Plugin::Status(const NetConf& conf) const {
  StateStore store = StoreOf(conf);
  if (auto w = store.CheckWritable(); !w) {
    return CniFail(kPluginNotAvailable, "state directory unusable: " + w.error().message());
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(
      auto hcas, sysfs::DiscoverHcas(d_.sysfs, sysfs::HcaDetail::kIdentity), kPluginNotAvailable);
  if (hcas.empty()) {
    return CniFail(kPluginNotAvailable,
                   "no RDMA devices under " + d_.sysfs.Sys("class/infiniband"));
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto records, store.List(), kPluginNotAvailable);
  std::set<std::string> claimed;
  for (const auto& r : records) {
    if (!IsChildMode(r.mode)) claimed.insert(r.hca_address);
  }
  for (const auto& h : hcas) {
    if (!claimed.contains(h.address)) return {};
  }
  return CniFail(kPluginLimited, "all " + std::to_string(hcas.size()) +
                                     " RDMA devices are attached to pods; new ADDs without a "
                                     "free device will fail");
}

CniResult<void> Plugin::CollectRecord(const AttachmentRecord& r, const Request& req,
                                      const NetConf& conf, const NetNs& host) {
  auto restored = Restore(r, host);
  if (!restored && restored.error().code() != ErrorCode::kNotFound) {
    return CniFail(kRollbackIncomplete, r.hca + ": " + restored.error().message());
  }
  if (auto ipam = IpamOf(&r, conf)) {
    Request who = req;
    who.container_id = r.container_id;
    who.ifname = r.ifname;
    who.netns = r.netns;
    KUBERDMA_CNI_TRY(ReleaseAddresses(*ipam, who, conf), 0);
  }
  return {};
}

CniResult<void> Plugin::Gc(const NetConf& conf, const Request& req) {
  if (!conf.valid_attachments) {
    return CniFail(kInvalidConfig,
                   "GC needs cni.dev/valid-attachments (refusing to treat every "
                   "attachment as stale)");
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(NodeLock lock, Lock(conf), 0);
  StateStore store = StoreOf(conf);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(NetNs host, d_.namespaces.Host(), kIoFailure);
  std::set<std::string> valid;
  for (const auto& a : *conf.valid_attachments)
    valid.insert(AttachmentKey(a.container_id, a.ifname));
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto records, store.List(conf.name), kStateFailure);
  std::string failures;
  for (const auto& r : records) {
    if (valid.contains(AttachmentKey(r.container_id, r.ifname))) continue;
    if (auto c = CollectRecord(r, req, conf, host); !c) {
      failures += (failures.empty() ? "" : "; ") + c.error().msg;
      continue;
    }
    (void)store.Remove(r.network, r.container_id, r.ifname);
    spdlog::info("GC restored {} from stale attachment {}/{}", r.hca, r.container_id, r.ifname);
  }
  if (!failures.empty()) return CniFail(kRollbackIncomplete, "GC could not restore: " + failures);
  if (conf.ipam) KUBERDMA_CNI_TRY(CollectAddresses(conf, req), 0);
  return {};
}

}  // namespace kuberdma::cni
