// SPDX-License-Identifier: Apache-2.0
// The DRA driver's preparing (what NodePrepareResources / NodeUnprepareResources do, without the
// gRPC service or the API server client around them): a ResourceClaim's allocation, as the API
// server holds it, checked and turned into a CDI spec for the claim with the same device nodes
// and environment the device plugin's Allocate gives (deviceplugin::Resource, contract).
//
//   Preparer p(resource, {.node = "gpu-node-7"}, "/var/run/cdi");
//   auto done = p.Prepare({.ns = "team-a", .uid = "8c1f...", .name = "trainer-0-nics"}, claim);
//   // done->devices[i].cdi_id: "kube-rdma.io/hca=8c1f..._0000:18:00.0"; the runtime applies it
//   p.Unprepare(ref);  // removes it; both idempotent
//
// The claim's CDI spec file is the checkpoint: a restarted driver prepares again by rewriting it
// and unprepares by removing it, whatever it remembered.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/contract/cdi.h"
#include "kuberdma/contract/comm_env.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/deviceplugin/resource.h"
#include "kuberdma/dra/slices.h"

namespace kuberdma::dra {

struct ClaimRef {
  std::string ns;
  std::string uid;
  std::string name;
  std::string Text() const { return ns + "/" + name + " (" + uid + ")"; }
};

// One of the claim's devices that is this driver's (status.allocation.devices.results).
struct AllocatedDevice {
  std::string request;
  std::string pool;
  std::string device;
  std::string hca;  // the HCA the device name stands for on this node
  // Once prepared: its CDI device ("kube-rdma.io/hca=<claim uid>_<PCI address>[_p<port>]",
  // contract/slot_id.h), which makes that HCA alone the container's.
  std::string cdi_id;
};

// The per-claim options (status.allocation.devices.config, opaque, this driver's): what the CNI
// applies to the claim's interfaces, checked here so that a bad value fails at prepare.
struct ClaimConfig {
  int mtu = 0;             // 0: the NAD's
  std::string link_state;  // "", "enable", "disable", "auto"
  std::string mode;        // "", "exclusive", "macvlan", "ipvlan"
  // The communication libraries the claim's containers are told about (comm-libs.md), in place
  // of the device plugin's commLibraries: a list of names, "all", or "none" ([]). CDI sets its
  // variables over the container's own, so a pod that sets a library's variables itself asks for
  // the others only. nullopt: the device plugin's.
  std::optional<std::vector<contract::Library>> comm_libraries;
};

// This driver's devices in `claim` (a resource.k8s.io/v1 ResourceClaim as JSON), checked: it is
// the claim the kubelet named (uid), it is allocated, to this node (the allocation's node
// selector, the pools), each device is one this node publishes (`published`, from
// ResourceSlices()), and the opaque config parses. Errors name what is wrong: kNotFound (the
// claim was deleted and created again; a device this node no longer has), kBusy (not allocated
// yet), kInvalidArgument (another node's, no device of this driver, a bad config).
Result<std::vector<AllocatedDevice>> OurDevices(const nlohmann::json& claim, const ClaimRef& ref,
                                                const PublishOptions& o,
                                                const deviceplugin::Resource& r,
                                                ClaimConfig* config = nullptr);

// A prepared claim: its devices of this driver, each with its CDI device.
struct Prepared {
  std::vector<AllocatedDevice> devices;
};

class Preparer {
 public:
  // `allocations_dir` (the device plugin's, contract/allocation.h): where each prepared claim is
  // recorded with its pods for the CNI's allocation check; "" for nowhere.
  Preparer(const deviceplugin::Resource& r, PublishOptions o, std::string cdi_dir,
           std::string allocations_dir = "")
      : r_(r),
        o_(std::move(o)),
        cdi_dir_(std::move(cdi_dir)),
        allocations_dir_(std::move(allocations_dir)) {}

  // The claim's devices and CDI device IDs, after writing its CDI spec (atomically; again on a
  // repeat). Besides the device plugin's environment, the spec sets KUBERDMA_CLAIM
  // ("ns/name") and, where the claim constrains our devices and another driver's (a GPU's) to
  // one resource.kubernetes.io/pcieRoot, KUBERDMA_CLAIM_PCIE_ROOTS ("mlx5_0=pci0000:15,..."):
  // the root each HCA was promised a GPU on, which rdma-validate checks in the pod.
  Result<Prepared> Prepare(const ClaimRef& ref, const nlohmann::json& claim) const;
  // Removes the claim's CDI spec; a claim never prepared (or already unprepared) is fine.
  Result<void> Unprepare(const ClaimRef& ref) const;
  // Where the claim's spec lives.
  std::string SpecPath(const ClaimRef& ref) const;

 private:
  // The claim's environment: the device plugin's for its HCAs (`plugin_env`), KUBERDMA_CLAIM,
  // KUBERDMA_CLAIM_PCIE_ROOTS where it tied HCAs to another driver's devices.
  std::vector<std::string> ClaimEnv(const ClaimRef& ref, const nlohmann::json& claim,
                                    const std::vector<AllocatedDevice>& devices,
                                    const std::map<std::string, std::string>& plugin_env) const;
  // The claim's CDI spec: the device plugin's device nodes and environment for its HCAs, the
  // claim, the roots it tied HCAs to. Sets each device's cdi_id.
  Result<contract::CdiSpec> Spec(const ClaimRef& ref, const nlohmann::json& claim,
                                 std::vector<AllocatedDevice>& devices) const;
  const deviceplugin::Resource& r_;
  PublishOptions o_;
  std::string cdi_dir_;
  std::string allocations_dir_;
};

inline constexpr const char* kClaimEnv = contract::kClaim;
inline constexpr const char* kClaimRootsEnv = contract::kClaimPcieRoots;
inline constexpr const char* kPcieRootAttribute = "resource.kubernetes.io/pcieRoot";

// "mlx5_0=pci0000:15,..." for `devices` of `claim` that a matchAttribute constraint on
// resource.kubernetes.io/pcieRoot ties to another driver's device; "" when none is.
std::string AlignedRoots(const nlohmann::json& claim, const std::string& driver,
                         const std::vector<AllocatedDevice>& devices,
                         const deviceplugin::Resource& r);

}  // namespace kuberdma::dra
