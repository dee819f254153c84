// SPDX-License-Identifier: Apache-2.0
// What Multus v4 hands the `rdma` CNI for one pod, as a list of CNI calls: the Multus stand-in, for
// the namespace tests and the demo, so they drive the plugin with the objects deploy/ ships the way
// Multus would, not with configs written for them.
//
//   MultusPod pod{.ns = "default", .name = "llm-trainer-0", .uid = "u1", .sandbox = "c0ffee",
//                 .networks = ParseNetworksAnnotation(annotation), .allocated = {{"rdma/hca",
//                 ids}}};
//   for (const auto& call : MultusAdds(pod, nads, netns_path)) node.Run(rdma, call);
//
// What it reproduces (Multus v4.0; checked against the v4.0.2 thin plugin, docs/cni.md):
//   - attachments in the annotation's order, each named by its "interface" or net<i> (from 1);
//   - a NAD with k8s.v1.cni.cncf.io/resourceName gets the pod's i-th allocated device ID of that
//     resource as "deviceID" (and "pciBusID") in its config, the next attachment of the same
//     resource the next ID;
//   - runtimeConfig only for the capabilities the NAD's config declares ("deviceID",
//     "CNIDeviceInfoFile"); the device-info file is named by Multus, in its devinfo/cni directory;
//   - CNI_ARGS: Multus's IgnoreUnknown=true;K8S_POD_NAMESPACE=..;K8S_POD_NAME=..;
//     K8S_POD_INFRA_CONTAINER_ID=..;K8S_POD_UID=.. followed by the runtime's IgnoreUnknown=1 and
//     the same keys again (what Multus v4.0.2 passed when run against `rdma`, docs/cni.md);
//   - after a failed ADD (Multus DELs the failing delegate itself first), the runtime's DEL
//     re-sends every attachment's config (MultusDels).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/sim/manifests.h"
#include "kuberdma/sim/sim_node.h"

namespace kuberdma::standins {

struct MultusPod {
  std::string ns = "default";
  std::string name;
  std::string uid;
  std::string sandbox;  // the sandbox (infra container) ID: CNI_CONTAINERID
  std::vector<std::pair<std::string, std::string>> networks;  // NAD name, interface ("" = net<i>)
  std::map<std::string, std::vector<std::string>> allocated;  // resource -> device IDs, in order
};

// The k8s.v1.cni.cncf.io/networks annotation's JSON list ([{"name":..,"interface":..}]), or a
// plain comma-separated list of names. kInvalidArgument when it is neither.
Result<std::vector<std::pair<std::string, std::string>>> ParseNetworksAnnotation(
    const std::string& annotation);

// The ADDs Multus makes for `pod` in `netns`, in order. `config_overrides` are merged into every
// delegate config (a test keeps stateDir off the machine's /run/kube-rdma). kNotFound when the
// pod names a NAD that is not in `nads`, kInvalidArgument when it attaches more of a resource than
// it was allocated.
Result<std::vector<sim::CniCall>> MultusAdds(const MultusPod& pod,
                                             const std::vector<sim::Nad>& nads,
                                             const std::string& netns,
                                             const nlohmann::json& config_overrides = {});

// Multus' DRA path (resource.k8s.io/v1): the device IDs a pod's claims give each resource, for
// MultusPod::allocated. For every device of `allocation` (status.allocation of the pod's
// claims, results in order), its slice in `slices` (any driver's) is looked up: a device whose
// attribute k8s.cni.cncf.io/resourceName is R adds its attribute k8s.cni.cncf.io/deviceID to
// R's list (a NAD with k8s.v1.cni.cncf.io/resourceName R then gets them as "deviceID" in turn).
// Devices without both attributes (a GPU) are not networks and are skipped.
std::map<std::string, std::vector<std::string>> DraAllocated(
    const std::vector<nlohmann::json>& allocations, const std::vector<nlohmann::json>& slices);

// Released Multus' DRA path (v4.2.x-v4.3.0: pkg/kubeletclient, getDRAResources): the kubelet's
// pod-resources List, per container, per prepared claim (dynamic_resources): every CDI device of
// every ClaimResource, in order, its name after '=' a device ID, listed under the claim's *name*;
// a NAD whose k8s.v1.cni.cncf.io/resourceName is that claim name gets them as "deviceID" in turn
// (the i-th attachment the i-th). A CDI name without exactly one '=' is skipped, as Multus logs
// and skips it. `claims` is that List's view of one pod: claim name -> each ClaimResource's CDI
// device IDs as the kubelet lists them (kubelet.h's ListedCdi: under the kubelet's own code a
// device lists its predecessors' too, and Multus takes them all).
std::map<std::string, std::vector<std::string>> PodResourcesDraAllocated(
    const std::map<std::string, std::vector<std::vector<std::string>>>& claims);

// The DELs of the same attachments (what the runtime's DEL of the sandbox makes Multus send, also
// after a failed ADD), in reverse order.
std::vector<sim::CniCall> MultusDels(const std::vector<sim::CniCall>& adds);

}  // namespace kuberdma::standins
