// SPDX-License-Identifier: Apache-2.0
// The DRA driver's publishing: the node's HCAs as resource.k8s.io/v1 ResourceSlices, from the
// same model the device plugin advertises (deviceplugin::Resource: its selectors, the node's own
// NICs left out, rails, health), so that the two paths never disagree on what the node has.
//
// One device per HCA port (an HCA's ports are separate devices only where it has several),
// named as DNS labels require ("mlx5-0", "mlx5-0-p2"), healthy ports only, with
//   - Kubernetes' standard attributes: resource.kubernetes.io/pcieRoot ("pci0000:15"), pciBusID,
//     numaNode (left out where sysfs says -1), for matchAttribute with GPUs of another driver;
//   - ours under the driver's name: rdmaDevice, netdev, linkLayer, rateGbps, port, rail,
//     firmware, pciAddress, netnsMode;
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
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/deviceplugin/resource.h"
#include "kuberdma/rails/rails.h"
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
  std::string node;        // spec.nodeName; the pool is "<node>/<resource name>"
  int64_t generation = 1;  // the pool's generation: bumped on every change
  std::string netns_mode;  // "shared" or "exclusive" (ib_core's), "" when unknown
};

struct Published {
  std::vector<nlohmann::json> objects;  // ResourceSlices, pool.resourceSliceCount each
  std::vector<std::string> devices;     // device names, in order
  std::vector<std::string> dropped;     // attributes left out, and why
};

// A DNS label (RFC 1123) for `hca` port `port`: lower case, '_' and '.' become '-'; "-p<port>"
// when the HCA has several ports.
std::string DeviceName(const std::string& hca, uint32_t port, bool several_ports);

// resource.kubernetes.io/pcieRoot of a PCI device: "pci0000:15" from its sysfs device path
// ("devices/pci0000:15/0000:15:01.0/..."), "" when it is not under a PCI root.
std::string PcieRoot(const std::string& device_path);

// Whether `name` is a qualified attribute name the API accepts: "<DNS subdomain>/<C identifier
// of at most 32>", or a bare identifier (the driver's own domain).
bool IsQualifiedName(const std::string& name);

// The ResourceSlices of `r`'s healthy HCAs (after its Refresh) on this node. kInvalidArgument
// when the node or driver name is not a valid DNS subdomain.
Result<Published> ResourceSlices(const deviceplugin::Resource& r, const PublishOptions& o,
                                 const rails::NodeRoles* roles = nullptr);

}  // namespace kuberdma::dra
