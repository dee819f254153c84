// SPDX-License-Identifier: Apache-2.0
// KubeletDraStandIn: the kubelet's side of a DRA driver, for tests, the benchmark and
// `make demo DRA=1`: its plugin watcher (the driver's registration socket found in
// plugins_registry, GetInfo, NotifyRegistrationStatus), NodePrepareResources and
// NodeUnprepareResources over the socket GetInfo named; and the container runtime's side,
// ApplyCdi: a CDI device's container edits read from the specs in the CDI directory.
//
//   auto k = KubeletDraStandIn::Register(dir + "/plugins_registry", kDriverName, 10s);
//   auto prepared = k->Prepare({.ns = "team-a", .uid = uid, .name = "pairs"});
//   auto edits = ApplyCdi(dir + "/cdi", prepared->cdi_ids);
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/dra/prepare.h"

namespace kuberdma::standins {

class KubeletDraStandIn {
 public:
  // Waits up to `timeout` for <registry_dir>/<driver>-reg.sock, then registers the plugin as the
  // kubelet's plugin watcher does. kTimeout when no socket appears, kInvalidArgument when the
  // plugin is not a DRAPlugin of `driver` speaking v1.DRAPlugin.
  static Result<KubeletDraStandIn> Register(const std::string& registry_dir,
                                            const std::string& driver,
                                            std::chrono::milliseconds timeout);
  const std::string& endpoint() const { return endpoint_; }
  const std::string& version() const { return version_; }

  struct Prepared {
    std::vector<std::string> cdi_ids;  // of every device, deduplicated, in order
    size_t devices = 0;
  };
  // NodePrepareResources for one claim: its CDI IDs, or the error the driver gave for it.
  Result<Prepared> Prepare(const dra::ClaimRef& claim) const;
  // NodeUnprepareResources for `claims`: the first error the driver gave, if any.
  Result<void> Unprepare(const std::vector<dra::ClaimRef>& claims) const;
  // The driver's device health as the kubelet's DRA health manager reads it: watches
  // NodeWatchResources until `until` holds for a message ("pool/device" -> "Healthy",
  // "Unhealthy", "Unknown") or `timeout`; the last message, or kTimeout.
  using Health = std::map<std::string, std::string>;
  Result<Health> WatchHealth(const std::function<bool(const Health&)>& until,
                             std::chrono::milliseconds timeout) const;

 private:
  std::string endpoint_;
  std::string version_;
};

// What a container runtime applies for CDI devices `ids` ("kube-rdma.io/hca=<uid>_<address>"),
// as CDI merges them: each device's edits, and once each spec's own edits, from the *.json specs
// in `cdi_dir`; device nodes counted once per path. kNotFound naming an ID no spec has.
struct ContainerEdits {
  std::map<std::string, std::string> env;
  size_t device_nodes = 0;
};
Result<ContainerEdits> ApplyCdi(const std::string& cdi_dir, const std::vector<std::string>& ids);

}  // namespace kuberdma::standins
