// SPDX-License-Identifier: Apache-2.0
// The `rdma` plugin's verbs over injected operations: the testable core behind cni/main.cc.
//
//   netlink-backed ops in production, fakes in unit tests:
//   Plugin plugin({.links = links, .rdma = rdma, .namespaces = ns, .sysfs = SysfsRoot::FromEnv()});
//   CniResult<nlohmann::json> result = plugin.Add(request, conf);
//
// Every verb takes the node lock (bounded wait, then error 11). ADD plans first (read-only,
// plan.h), writes the state record before the first change, executes, and undoes completed steps
// on any failure; DEL, GC and a retried ADD all restore through the same locate-then-restore
// path, so a device is found wherever it ended up (pod, host, renamed devN by the kernel) and put
// back.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>

#include "kuberdma/cni/config.h"
#include "kuberdma/cni/ipam.h"
#include "kuberdma/cni/partition_hook.h"
#include "kuberdma/cni/plan.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/cni/types.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/link/vf_ops.h"
#include "kuberdma/netns/namespace_ops.h"
#include "kuberdma/rdma/rdma_ops.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::cni {

// Which HCAs kube-rdma's device plugin allocated to a pod (the kubelet's pod-resources API, asked
// through the device plugin's pods endpoint in production; contract/allocation.h).
class PodAllocations {
 public:
  virtual ~PodAllocations() = default;
  // An error when the answer cannot be had (nothing listens, no answer in time).
  virtual Result<contract::PodAnswer> Of(const std::string& ns, const std::string& name) = 0;
};

// Asks rdma-device-plugin at `socket`, waiting at most `timeout`.
class DevicePluginAllocations final : public PodAllocations {
 public:
  DevicePluginAllocations(std::string socket, std::chrono::milliseconds timeout)
      : socket_(std::move(socket)), timeout_(timeout) {}
  Result<contract::PodAnswer> Of(const std::string& ns, const std::string& name) override {
    return contract::AskPodHcas(socket_, {.ns = ns, .name = name}, timeout_);
  }
  const std::string& socket() const { return socket_; }

 private:
  std::string socket_;
  std::chrono::milliseconds timeout_;
};

struct Deps {
  link::LinkOps& links;
  rdma::RdmaOps& rdma;
  netns::NamespaceOps& namespaces;
  sysfs::SysfsRoot sysfs;
  // Needed by ADD (the node's own NICs are judged by their addresses and routes) and for
  // configs with an `ipam` section.
  link::AddrOps* addrs = nullptr;
  IpamPlugin* ipam = nullptr;
  // The node config (rails/node_config.h): declared rails and the node's addresses.
  rails::NodeConfig node;
  // Where the device plugin records allocations (contract/allocation.h); "" for none.
  std::string allocations;
  // Checks every HCA ADD attaches is the pod's (unless the node config allows unallocated ones);
  // nullptr: no check.
  PodAllocations* pod_allocations = nullptr;
  // The PFs' view of their VFs (mode vf); nullptr: mode vf is refused, and undo leaves a
  // recorded VF's PF-side settings as they are (logged).
  link::VfOps* vfs = nullptr;
  // How long a rebound VF may take to have its driver and netdev back.
  std::chrono::milliseconds rebind_wait{15000};
  // The external subnet manager's hook (the node config's partitionHook): told each GUID an
  // InfiniBand VF on a partition is given and given back; nullptr: none (opensm configured ahead
  // with `rdma-doctor partitions`).
  PartitionHook* partitions = nullptr;
};

// The IPAM an attachment uses: what its record says, else what the config says; nullopt for none.
std::optional<IpamState> IpamOf(const AttachmentRecord* rec, const NetConf& conf);

class Plugin {
 public:
  explicit Plugin(Deps deps) : d_(std::move(deps)) {}

  // Attaches an HCA to the pod; returns the CNI result in conf.cni_version. Retry-safe: a repeated
  // ADD of a completed attachment returns the same result without changing anything.
  CniResult<nlohmann::json> Add(const Request& req, const NetConf& conf);
  // Gives the attachment back. Succeeds when the namespace is gone, state is missing, or repeated.
  CniResult<void> Del(const Request& req, const NetConf& conf);
  // Verifies that what ADD promised still holds.
  CniResult<void> Check(const Request& req, const NetConf& conf);
  // Whether this node can serve ADDs (50: not at all; 51: no free HCA left).
  CniResult<void> Status(const NetConf& conf) const;
  // Restores every attachment of this network not listed in cni.dev/valid-attachments and
  // releases its addresses; then passes the list to IPAM GC where the IPAM plugin has it.
  // `req` carries CNI_PATH for the IPAM plugin.
  CniResult<void> Gc(const NetConf& conf, const Request& req = {});

 private:
  // A completed attachment's result again, when it still holds; nullopt to attach anew.
  std::optional<nlohmann::json> Repeat(const AttachmentRecord& old, const Request& req,
                                       const NetConf& conf, const netns::NetNs& pod);
  // Undoes an attachment left under the same key by an earlier ADD that did not finish.
  CniResult<void> UndoStale(const AttachmentRecord& old, const Request& req, const NetConf& conf,
                            const StateStore& store, const netns::NetNs& host);
  // Error 108 when `hca` is not among the HCAs the kubelet allocated to the pod CNI_ARGS names,
  // 11 when that cannot be asked (the device plugin or the kubelet not answering), 7 when CNI_ARGS
  // names no pod; nothing when the node config allows unallocated HCAs.
  CniResult<void> CheckAllocated(const sysfs::Hca& hca, const Request& req,
                                 const NetConf& conf) const;
  // Executes `plan`: record, moves, verification; on failure, the undo.
  CniResult<nlohmann::json> Execute(AttachPlan& plan, const Request& req, const NetConf& conf,
                                    const StateStore& store, const netns::NetNs& host,
                                    const netns::NetNs& pod);
  CniResult<nlohmann::json> RollBack(const AttachmentRecord& rec, const Request& req,
                                     const NetConf& conf, const StateStore& store,
                                     const netns::NetNs& host, const CniError& why);
  Result<void> Apply(AttachPlan& plan, const StateStore& store, const netns::NetNs& host,
                     const netns::NetNs& pod);
  Result<link::LinkInfo> Verify(const AttachmentRecord& rec, const NetConf& conf,
                                const netns::NetNs& pod);
  Result<void> VerifyAddresses(const AttachmentRecord& rec, const netns::NetNs& pod,
                               int ifindex) const;

  // ---- IPAM (ipam_steps.cc) ----
  // IPAM ADD for `rec`, recorded before and after; its addresses, the link state and its routes
  // applied to the pod interface.
  CniResult<void> AllocateAddresses(AttachPlan& plan, const Request& req, const NetConf& conf,
                                    const StateStore& store, const netns::NetNs& pod);
  Result<void> ConfigureInterface(const AttachmentRecord& rec, const IpamResult& ipam,
                                  std::optional<bool> want_up, const netns::NetNs& pod);
  // "addresses": "node": the recorded host addresses and routes applied to the pod interface.
  CniResult<void> ApplyNodeAddresses(AttachPlan& plan, const netns::NetNs& pod);
  // ... and applied again on the host once the netdev is back there (every undo path).
  Result<void> RestoreNodeAddresses(const AttachmentRecord& rec, const netns::NetNs& host);
  // IPAM DEL for `ipam` (the recorded or configured section), as `req` names the attachment.
  CniResult<void> ReleaseAddresses(const IpamState& ipam, const Request& req, const NetConf& conf);
  // IPAM CHECK.
  CniResult<void> CheckAddresses(const IpamState& ipam, const Request& req, const NetConf& conf);
  // Runs the IPAM plugin, retrying once in a version it supports if it refuses the config's.
  CniResult<nlohmann::json> CallIpam(Command command, const IpamState& ipam, const Request& req,
                                     const NetConf& conf) const;
  // IPAM GC with cni.dev/valid-attachments, where the plugin supports cniVersion 1.1.0.
  CniResult<void> CollectAddresses(const NetConf& conf, const Request& req);
  // DEL's restore of `r`: a device that is nowhere is logged, not an error.
  CniResult<void> RestoreForDel(const AttachmentRecord& r, const Request& req, const NetConf& conf);
  // GC of one stale attachment: its devices back, its addresses released.
  CniResult<void> CollectRecord(const AttachmentRecord& r, const Request& req, const NetConf& conf,
                                const netns::NetNs& host);
  // The name `rec`'s netdev (ifindex `ifindex`) takes on the host: its recorded one, or
  // dev<ifindex> when another link has that now.
  std::string HomeName(const AttachmentRecord& rec, const netns::NetNs& host, int ifindex);
  // Puts the netdev and RDMA device of `rec` back on the host, wherever they are now, and a VF's
  // PF-side settings as they were.
  Result<void> Restore(const AttachmentRecord& rec, const netns::NetNs& host);

  // ---- Mode vf (vf_steps.cc) ----
  // The PF sets what `plan.vf` says (record.vf armed and saved first); the VF's netdev takes
  // its new MAC, or its driver is rebound and the record follows the new netdev and RDMA device.
  Result<void> ApplyVf(AttachPlan& plan, const StateStore& store, const netns::NetNs& host);
  // After a rebind: the VF's netdev and RDMA device as they are now, into the record and plan.
  Result<void> FollowRebound(AttachPlan& plan, const netns::NetNs& host);
  // Every PF-side setting the record says ADD changed, back as the PF had it; the VF netdev's own
  // MAC too. A PF that is gone is logged, not an error (nothing is left to restore on).
  Result<void> RestoreVf(const AttachmentRecord& rec, const netns::NetNs& host);
  // The VF netdev's own MAC back as it was on the host; false when its driver refuses (igbvf
  // with trust off), which a rebind after the PF's restore then fixes.
  bool VfNetdevMacBack(const AttachmentRecord& rec, const netns::NetNs& host);
  // CHECK of a VF: error 105 when its PF no longer reports what ADD set (a VLAN, MAC, trust or
  // rate changed behind the plugin), naming the first setting that differs.
  CniResult<void> CheckVf(const AttachmentRecord& rec, const std::string& who);
  // Tells the partition hook (if any) that the GUID of `rec`'s VF joins (`add`) or leaves its
  // partition; nothing for a record without one (vf_steps.cc).
  CniResult<void> TellPartition(const AttachmentRecord& rec, bool add) const;
  // The recorded netdev in `ns`: by its MAC after ADD, or (a VF whose ADD stopped before its new
  // MAC took) by the MAC it had on the host.
  Result<link::LinkInfo> FindRecorded(const AttachmentRecord& rec, const netns::NetNs& ns);
  // Child modes: deletes the pod's child link when it is the one recorded (kind and MAC).
  Result<void> RemoveChild(const AttachmentRecord& rec, const netns::NetNs* pod);
  // DEL of a child-mode config without a record.
  Result<void> RemoveUnrecordedChild(const Request& req, const NetConf& conf);
  // The netdev back on the host, its host addresses too ("addresses": "node").
  Result<void> RestoreNetdev(const AttachmentRecord& rec, const netns::NetNs& host,
                             const netns::NetNs* pod);
  Result<void> PutNetdevBack(const AttachmentRecord& rec, const netns::NetNs& host,
                             const netns::NetNs* pod);
  Result<void> RestoreRdma(const AttachmentRecord& rec, const netns::NetNs& host,
                           const netns::NetNs* pod);
  nlohmann::json ResultFor(const AttachmentRecord& rec, const link::LinkInfo& link,
                           const std::string& pci_id, const NetConf& conf) const;
  void WriteDeviceInfo(const NetConf& conf, const sysfs::Hca& hca, const AttachmentRecord& rec);

  Deps d_;
};

}  // namespace kuberdma::cni
