// SPDX-License-Identifier: Apache-2.0
// A small stand-in for kube-scheduler's DRA allocator, for tests and `make demo DRA=1`: it gives
// a resource.k8s.io/v1 ResourceClaim an allocation from the published ResourceSlices the way the
// scheduler would for what our templates ask, so that the driver, the CNI and the validator can
// be run on real claims without a cluster.
//
// What it honours: `exactly` requests with a DeviceClass and a count (allocationMode
// ExactCount; All takes every matching device), CEL selectors of the DeviceClass and the
// request in the form our chart writes them (`device.driver == "x"`,
// `device.attributes["domain"].name == <string|int|bool>`, `has(device.attributes["d"].name)`,
// joined by `&&`) with CEL's semantics for a missing attribute (an error, which fails the
// allocation as kube-scheduler's does, unless a false term or a has() guard decides first),
// device taints (NoSchedule and NoExecute keep a device out unless the request's tolerations
// match the taint), `matchAttribute` constraints over the requests they name (all when none),
// one node for the whole claim, and devices already allocated to other claims. It searches
// exhaustively (backtracking), so when it says a claim cannot be satisfied, no assignment exists.
// What it does not do (docs/dra.md): other CEL (an expression it cannot read is an error, not
// a guess), firstAvailable, adminAccess, capacity/consumable devices, partitionable devices,
// distinctAttribute, node affinity beyond one node, scoring (the first assignment found wins).
//
//   auto alloc = Allocate(claim, slices, classes, in_use);
//   if (alloc) claim["status"]["allocation"] = *alloc;
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::standins {

// A device as "driver/pool/device".
std::string DeviceKey(const std::string& driver, const std::string& pool,
                      const std::string& device);

// The allocation (status.allocation) for `claim` from `slices` (every driver's), the
// DeviceClasses `classes`, leaving out devices in `in_use` (DeviceKey). kInvalidArgument for an
// unknown class or a selector it cannot read; kNotFound naming the constraint or request that
// no node can satisfy.
Result<nlohmann::json> Allocate(const nlohmann::json& claim,
                                const std::vector<nlohmann::json>& slices,
                                const std::vector<nlohmann::json>& classes,
                                const std::set<std::string>& in_use);

// One CEL selector on one `device` (a ResourceSlice device of `driver`), as the allocator
// evaluates it: kInvalidArgument for what it cannot read or a missing attribute.
Result<bool> EvaluateSelector(const std::string& expression, const std::string& driver,
                              const nlohmann::json& device);

// A ResourceSlice for `gpus` of `node` as NVIDIA's DRA driver (gpu.nvidia.com) publishes them
// (cmd/gpu-kubelet-plugin/deviceinfo.go, GpuInfo.GetDevice): devices "gpu-<i>" with `type`,
// `uuid`, `productName`, `pcieBusID` and resource.kubernetes.io/pcieRoot (its version
// attributes and capacity are left out). For the demo and tests.
nlohmann::json StandInGpuSlice(const std::string& node, const std::vector<sysfs::Gpu>& gpus);

// The devices an allocation takes (DeviceKey), to add to `in_use`.
std::set<std::string> AllocatedKeys(const nlohmann::json& allocation);

}  // namespace kuberdma::standins
