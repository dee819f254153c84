// SPDX-License-Identifier: Apache-2.0
// CDI specs (the Container Device Interface, cdiVersion 0.5.0): how the device plugin (one spec
// per resource, `cdi: true`) and the DRA driver (one spec per prepared claim) tell the container
// runtime which device nodes and variables a device brings. One writer for both, so that the two
// paths cannot drift in shape (docs/deviceplugin.md#cdi, docs/dra.md).
//
//   CdiSpec spec{.kind = "kube-rdma.io/hca", .devices = {{.name = "mlx5_0", .edits = {...}}}};
//   KUBERDMA_TRY(WriteCdiSpec(dir + "/kube-rdma-hca.json", spec));
#pragma once

#include <string>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::contract {

inline constexpr char kCdiVersion[] = "0.5.0";

struct CdiDeviceNode {
  std::string path;       // in the container
  std::string host_path;  // on the node
  bool operator==(const CdiDeviceNode&) const = default;
};

// A spec's or a device's containerEdits.
struct CdiEdits {
  std::vector<CdiDeviceNode> device_nodes;
  std::vector<std::string> env;  // "NAME=value"; left out of the spec when empty
};

struct CdiDevice {
  std::string name;  // the part after "<kind>=" in a CDI device ID
  CdiEdits edits;
};

struct CdiSpec {
  std::string kind;  // "vendor/class"
  std::vector<CdiDevice> devices;
  CdiEdits edits;  // applied once for any device of the spec
};

// The spec as the runtime reads it (JSON, indented).
std::string EncodeCdiSpec(const CdiSpec& spec);

// Writes the encoded spec to `path` atomically (a reader sees the old spec or the new one).
// kIo naming the path when it cannot.
Result<void> WriteCdiSpec(const std::string& path, const CdiSpec& spec);

}  // namespace kuberdma::contract
