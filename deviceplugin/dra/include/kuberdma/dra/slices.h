// SPDX-License-Identifier: Apache-2.0
// The DRA driver's publishing: the node's HCAs as resource.k8s.io/v1 ResourceSlices, from the
// same model the device plugin advertises (deviceplugin::Resource: its selectors, the node's own
// NICs left out, rails, health), so that the two paths never disagree on what the node has.
//
// One device per HCA port (an HCA's ports are separate devices only where it has several),
// named as DNS labels require ("mlx5-0", "mlx5-0-p2"); an unhealthy one is published with a
// device taint that says why (link-down, node-nic, unhealthy; degraded with effect None), with
//   - Kubernetes' standard attributes: resource.kubernetes.io/pcieRoot ("pci0000:15"), pciBusID,
//     numaNode (left out where sysfs says -1), for matchAttribute with GPUs of another driver;
//   - ours under the driver's name: rdmaDevice, netdev, linkLayer, rateGbps, port, rail,
//     firmware, pciAddress, netnsMode, leaf (the rail's switch, from LLDP);
//   - Multus's: k8s.cni.cncf.io/deviceID (the PCI address the rdma CNI takes as deviceID) and
//     k8s.cni.cncf.io/resourceName (matched against a NAD's resourceName annotation).
// Within the API's limits (docs/dra.md): at most 128 devices a slice (more are further slices of
// the one pool), 32 attributes a device, 64-character strings (longer values are left out, said
// in `dropped`), qualified names checked.
//
//   auto slices = ResourceSlices(resource, {.node = "gpu-node-7", .generation = 3});
//   for (const auto& s : slices->objects) Publish(s);
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/deviceplugin/resource.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/rdma/netns_mode.h"
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::dra {

inline constexpr const char* kDriverName = "rdma.kube-rdma.io";
// resource.k8s.io/v1's limits (ResourceSliceMaxDevices, ResourceSliceMaxAttributesAndCapacities-
// PerDevice, DeviceAttributeMaxValueLength, DeviceMaxIDLength).
inline constexpr size_t kMaxDevicesPerSlice = 128;
inline constexpr size_t kMaxAttributesPerDevice = 32;
inline constexpr size_t kMaxStringValue = 64;
inline constexpr size_t kMaxIdentifier = 32;

struct PublishOptions {
  std::string driver = kDriverName;
  std::string node;                           // spec.nodeName; the pool is "<node>/<resource name>"
  int64_t generation = 1;                     // the pool's generation: bumped on every change
  std::optional<rdma::NetnsMode> netns_mode;  // ib_core's; nullopt when unknown (not published)
  // The effect of the taint an unhealthy device gets: "NoSchedule" (no new claim is allocated
  // it), or "NoExecute" (the pods whose claims hold it are evicted too). Degraded devices get
  // "None" (shown, not acted on) whatever this says.
  std::string taint_effect = "NoSchedule";
  // The fleet acceptance's verdicts by HCA (contract::ListVerdicts): each such device gets the
  // taint rdma.kube-rdma.io/acceptance with the verdict's reason and effect.
  std::map<std::string, std::pair<std::string, std::string>> acceptance;  // hca -> (why, effect)
  // Each rail's switch by HCA (contract::ListCabling, rdma-device-plugin --lldp): the attribute
  // rdma.kube-rdma.io/leaf, so that a claim can matchAttribute on it ("" where none was heard).
  std::map<std::string, std::string> leaves;
  // The API server drops device taints (DRADeviceTaints off): a device with a NoSchedule or
  // NoExecute taint is left out of the slices instead, as before taints existed.
  bool omit_tainted = false;
};

// The taint keys (under the driver's domain, "rdma.kube-rdma.io/link-down") and what each means.
inline constexpr const char* kTaintLinkDown = "link-down";     // the port is not ACTIVE
inline constexpr const char* kTaintNodeNic = "node-nic";       // the node's own NIC now
inline constexpr const char* kTaintUnhealthy = "unhealthy";    // the device plugin's verdict
inline constexpr const char* kTaintDegraded = "degraded";      // ACTIVE below its fabric's rate
inline constexpr const char* kTaintAcceptance = "acceptance";  // the fleet acceptance named it

// A ResourceSlice device taint (resource.k8s.io/v1 DeviceTaint; the API server adds timeAdded).
struct DeviceTaint {
  std::string key;
  std::string value;   // a label value: why, "port-1-DOWN"
  std::string effect;  // NoSchedule, NoExecute, None
  bool operator==(const DeviceTaint&) const = default;
};

// One device the node publishes, with its taints: what the slices say and the kubelet's health
// stream reports.
struct DeviceState {
  std::string pool;
  std::string device;
  std::string hca;
  uint32_t port = 0;
  std::vector<DeviceTaint> taints;
  bool Healthy() const;  // no taint but "None" ones
};

// Every device of `r` that the node publishes: each port of each present HCA (healthy or not:
// an unhealthy one is tainted), and of an HCA the node took as its own; not a gone HCA.
std::vector<DeviceState> DeviceStates(const deviceplugin::Resource& r, const PublishOptions& o);

struct Published {
  std::vector<nlohmann::json> objects;  // ResourceSlices, pool.resourceSliceCount each
  std::vector<std::string> devices;     // device names, in order
  std::vector<std::string> dropped;     // attributes left out, and why
  // Every device's state (DeviceStates), those left out of `objects` (omit_tainted) too: what
  // the health stream and the doctor's record say.
  std::vector<DeviceState> states;
};

// `why` as a label value (at most 63 of [A-Za-z0-9._-], alphanumeric at both ends).
std::string TaintValue(const std::string& why);

// A DNS label (RFC 1123) for `hca` port `port`: lower case, '_' and '.' become '-'; "-p<port>"
// when the HCA has several ports.
std::string DeviceName(const std::string& hca, uint32_t port, bool several_ports);

// resource.kubernetes.io/pcieRoot of a PCI device: "pci0000:15" from its sysfs device path
// ("devices/pci0000:15/0000:15:01.0/..."), "" when it is not under a PCI root.
std::string PcieRoot(const std::string& device_path);

// Whether `name` is a qualified attribute name the API accepts: "<DNS subdomain>/<C identifier
// of at most 32>", or a bare identifier (the driver's own domain).
bool IsQualifiedName(const std::string& name);

// The ResourceSlices of DeviceStates(r) (after its Refresh) on this node, unhealthy devices
// tainted. kInvalidArgument
// when the node or driver name is not a valid DNS subdomain.
Result<Published> ResourceSlices(const deviceplugin::Resource& r, const PublishOptions& o,
                                 const rails::NodeRoles* roles = nullptr);

}  // namespace kuberdma::dra
