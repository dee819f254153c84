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

#include <nlohmann/json.hpp>

#include "kuberdma/cni/config.h"
#include "kuberdma/cni/plan.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/cni/types.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/netns/namespace_ops.h"
#include "kuberdma/rdma/rdma_ops.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::cni {

struct Deps {
  link::LinkOps& links;
  rdma::RdmaOps& rdma;
  netns::NamespaceOps& namespaces;
  sysfs::SysfsRoot sysfs;
};

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
  CniResult<void> Status(const NetConf& conf);
  // Restores every attachment of this network not listed in cni.dev/valid-attachments.
  CniResult<void> Gc(const NetConf& conf);

 private:
  // A completed attachment's result again, when it still holds; nullopt to attach anew.
  std::optional<nlohmann::json> Repeat(const AttachmentRecord& old, const Request& req,
                                       const NetConf& conf, const netns::NetNs& pod);
  // Undoes an attachment left under the same key by an earlier ADD that did not finish.
  CniResult<void> UndoStale(const AttachmentRecord& old, const Request& req, const NetConf& conf,
                            const StateStore& store, const netns::NetNs& host);
  // Executes `plan`: record, moves, verification; on failure, the undo.
  CniResult<nlohmann::json> Execute(AttachPlan& plan, const Request& req, const NetConf& conf,
                                    const StateStore& store, const netns::NetNs& host,
                                    const netns::NetNs& pod);
  CniResult<nlohmann::json> RollBack(const AttachmentRecord& rec, const NetConf& conf,
                                     const StateStore& store, const netns::NetNs& host,
                                     const CniError& why);
  Result<void> Apply(AttachPlan& plan, const StateStore& store, const netns::NetNs& host,
                     const netns::NetNs& pod);
  Result<link::LinkInfo> Verify(const AttachmentRecord& rec, const NetConf& conf,
                                const netns::NetNs& pod);
  // Puts the netdev and RDMA device of `rec` back on the host, wherever they are now.
  Result<void> Restore(const AttachmentRecord& rec, const netns::NetNs& host);
  Result<void> RestoreNetdev(const AttachmentRecord& rec, const netns::NetNs& host,
                             const netns::NetNs* pod);
  Result<void> RestoreRdma(const AttachmentRecord& rec, const netns::NetNs& host,
                           const netns::NetNs* pod);
  nlohmann::json ResultFor(const AttachmentRecord& rec, const link::LinkInfo& link,
                           const std::string& pci_id, const NetConf& conf) const;
  void WriteDeviceInfo(const NetConf& conf, const sysfs::Hca& hca, const AttachmentRecord& rec);

  Deps d_;
};

}  // namespace kuberdma::cni
