// SPDX-License-Identifier: Apache-2.0
// One advertised resource (a pool of slots over selected HCAs): the device list with health and
// NUMA topology, Allocate's device nodes and environment, and GetPreferredAllocation's choice.
// Pure logic over the sysfs HCA model; the gRPC server in server.h wraps it.
//
//   Resource r(cfg.resources[0], SysfsRoot("/"));
//   r.Refresh(*DiscoverHcas(root, HcaDetail::kPorts));   // true when the list changed
//   auto alloc = r.Allocate({"mlx5_3-017"});   // device nodes + the pod-env contract (contract/)
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/contract/cdi.h"
#include "kuberdma/deviceplugin/config.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::deviceplugin {

struct DeviceView {
  std::string id;
  bool healthy = false;
  std::vector<int64_t> numa_nodes;
};

struct DeviceNode {
  std::string container_path;
  std::string host_path;
  std::string permissions = "rw";
};

struct ContainerAllocation {
  std::vector<DeviceNode> devices;
  std::map<std::string, std::string> envs;
  std::vector<std::string> cdi_devices;
  std::vector<std::string> hcas;  // names, for logs and metrics
};

struct HcaHealth {
  sysfs::Hca hca;
  bool present = false;
  bool healthy = false;
  std::string reason;     // why not healthy: "gone", "port 1 DOWN"
  bool node_own = false;  // not present because the node took it (an address or route on it)
};

class Resource {
 public:
  Resource(ResourceConfig cfg, sysfs::SysfsRoot root);

  const ResourceConfig& config() const { return cfg_; }
  const sysfs::SysfsRoot& root() const { return root_; }
  // Whether the config's selectors take `hca`; `all` (every HCA of the node) answers what its
  // PF is called (pfNames); `roles` (rails.h) gives each HCA's rail and whether it is the node's
  // own NIC, which no resource ever offers.
  bool Selects(const sysfs::Hca& hca, const std::vector<sysfs::Hca>& all = {},
               const rails::NodeRoles* roles = nullptr) const;
  // Why this resource leaves `hca` out ("vendors [15b3] does not list 8086", "the node's own
  // NIC: ..."), or "" when it selects it.
  std::string WhyNotSelected(const sysfs::Hca& hca, const std::vector<sysfs::Hca>& all = {},
                             const rails::NodeRoles* roles = nullptr) const;
  // Takes a fresh view of the node's HCAs (kPorts detail) and their roles. HCAs seen before but
  // now absent, or now the node's own, stay Unhealthy ("gone", "the node's own NIC: ...") until
  // they return. Returns true when the advertised list changed.
  bool Refresh(const std::vector<sysfs::Hca>& all, const rails::NodeRoles* roles = nullptr);
  std::vector<DeviceView> Devices() const;
  const std::map<std::string, HcaHealth>& hcas() const { return hcas_; }
  size_t healthy_hcas() const;
  // Advertised slots, and how many of them are Healthy (what Devices() would count, without
  // building it).
  size_t slots() const;
  size_t healthy_slots() const;

  // Device nodes, env and CDI names for one container. kInvalidArgument naming an unknown ID.
  Result<ContainerAllocation> Allocate(const std::vector<std::string>& ids) const;
  // The preferred `size` IDs out of `available`, `must_include` first (per-hca: distinct HCAs,
  // NUMA-local to each other; pool: the first available).
  std::vector<std::string> Preferred(const std::vector<std::string>& available,
                                     const std::vector<std::string>& must_include,
                                     size_t size) const;
  // The CDI spec describing this resource's HCAs (written when cdi is on).
  contract::CdiSpec Cdi() const;
  std::string CdiSpec() const;  // Cdi(), encoded
  std::string CdiKind() const;

 private:
  // The libraries' variables (comm_libraries) for `described` into `out`'s env; a plan that
  // cannot be made is logged and adds nothing.
  void AddCommEnv(const std::vector<contract::HcaInfo>& described, ContainerAllocation* out) const;
  // The HCA name a per-hca slot ID names ("mlx5_3-017" -> "mlx5_3"), or "" for pool IDs.
  std::string HcaOfSlot(const std::string& id) const;
  // Whether `id` is one of this pool's slot IDs ("shared-017").
  bool IsPoolSlot(const std::string& id) const;
  void AddDeviceNodes(const sysfs::Hca& hca, ContainerAllocation* out) const;
  // The HCAs device IDs `ids` give a container (every present HCA for a pool), in name order.
  Result<std::vector<const HcaHealth*>> HcasOf(const std::vector<std::string>& ids) const;
  // per-hca: adds slots from `available` to `out` until `size`, spread over distinct healthy
  // HCAs, NUMA-local to what is already chosen.
  void SpreadOverHcas(const std::vector<std::string>& available, size_t size,
                      std::vector<std::string>& out) const;
  ResourceConfig cfg_;
  sysfs::SysfsRoot root_;
  std::map<std::string, HcaHealth> hcas_;  // by HCA name, natural order via key compare below
};

}  // namespace kuberdma::deviceplugin
