// SPDX-License-Identifier: Apache-2.0
// The node config: what only an admin of the node can say about its NICs, read by the CNI, the
// device plugin and the doctor alike. Which HCAs are the rails (in rail order: rail 1 first), and
// the addresses the node is known by. One file for the whole cluster (the chart's ConfigMap),
// with per-node overrides; the DaemonSet resolves it for its node and writes the result to the
// host (`rdma-device-plugin --write-node-config`), where the CNI reads it:
//
//   {"rails": ["ens1f0np0", "0000:1b:00.0", "mlx5_2"],      // netdev, PCI address or HCA name
//    "nodeAddresses": ["10.0.0.5"],
//    "allowUnallocated": false,                              // HCAs outside the pod's allocation
//    "sriov": [{"rail": 1, "numVfs": 8}, {"pf": "ens9f0np0", "numVfs": 4}],  // VFs to create
//    "partitionHook": "/opt/kube-rdma/sm-hook",    // told each VF GUID put on / off a partition
//    "railSwitches": ["leaf-1", "leaf-2", "leaf-3"],  // the switch (LLDP) each rail is cabled to
//    "stateRoots": ["/srv/kube-rdma"], "logRoots": ["/srv/log"],  // more places a NAD may
//    "deviceInfoDirs": ["/srv/devinfo"],                          // name (the CNI's roots)
//    "nodes": {"gpu-17": {"rails": ["ens2f0np0", "..."]}}}  // replaces the fields it names
//
//   KUBERDMA_ASSIGN_OR_RETURN(NodeConfig nc, LoadNodeConfig(NodeConfigPath(), node_name));
//   if (nc.Declared()) ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::rails {

inline constexpr char kNodeConfigEnv[] = "KUBERDMA_NODE_CONFIG";
inline constexpr char kNodeConfigPath[] = "/etc/kube-rdma/node.json";
// At most this many rails (and node addresses): a bound on what a file can make us hold.
inline constexpr size_t kMaxRails = 64;
// The most VFs one PF is asked for (PCIe's ARI allows 256 functions; mlx5 offers at most 127).
inline constexpr int kMaxVfs = 256;

// One "sriov" entry: how many VFs a PF should have, the PF named by netdev, PCI address or HCA
// name (`pf`) or by its physical rail (`rail`, 1-based), exactly one of the two.
struct VfCount {
  std::string pf;
  int rail = 0;
  int num_vfs = 0;
  // "rail 3" or the name, as messages say it.
  std::string Target() const { return pf.empty() ? "rail " + std::to_string(rail) : pf; }
};

struct NodeConfig {
  // The declared rails in rail order; each a netdev name, a PCI address or an HCA name. Empty: no
  // declaration, rails are numbered in PCI-address order (rails.h).
  std::vector<std::string> rails;
  // Addresses the node is known by (its Kubernetes node IP is added by the DaemonSet): a netdev
  // holding one is the node's own, declared as a rail or not.
  std::vector<std::string> node_addresses;
  // "allowUnallocated": the CNI may attach an HCA the kubelet did not allocate to the pod (a node
  // without rdma-device-plugin, or a NAD naming HCAs by hand). Off: every HCA must be the pod's.
  bool allow_unallocated = false;
  // "sriov": the VFs the DaemonSet's install step creates (sriov/vfs.h); empty: it leaves every
  // PF's VFs as they are.
  std::vector<VfCount> sriov;
  // "partitionHook": an executable (absolute path) the CNI runs when it gives an InfiniBand VF on
  // a partition a GUID, and when it takes it back, so that an external subnet manager (UFM) adds
  // or removes the GUID (docs/cni.md#infiniband-partitions); "" for none.
  std::string partition_hook;
  // "railSwitches": the switch each rail must be cabled to, in rail order, as LLDP names it (its
  // system name, else its chassis ID); the doctor holds each rail's neighbour to it
  // (rails/cabling.h). Empty: no expectation, only the fleet's majority.
  std::vector<std::string> rail_switches;
  // "stateRoots", "logRoots", "deviceInfoDirs": roots the CNI adds to its own (never removes)
  // under which a NAD's stateDir, logFile and CNIDeviceInfoFile may lie (cni/config.h,
  // docs/security.md). Each an absolute clean path other than /.
  std::vector<std::string> state_roots;
  std::vector<std::string> log_roots;
  std::vector<std::string> device_info_dirs;
  bool Declared() const { return !rails.empty(); }
};

// KUBERDMA_NODE_CONFIG when set, else kNodeConfigPath.
std::string NodeConfigPath();

// Parses a node config and resolves it for `node_name` (its entry in "nodes" replaces the
// top-level fields it sets; "" or an unlisted node: the top level). kInvalidArgument naming the
// field for a wrong type, an unknown key (a misspelt key must not silently mean "no rails"), an
// empty or duplicate rail, or more than kMaxRails entries.
Result<NodeConfig> ParseNodeConfig(std::string_view text, const std::string& node_name);

// Only the CNI's roots ("stateRoots", "logRoots", "deviceInfoDirs", held to IsCleanRoot) of a
// document that may carry other keys: the deprecated cni-node.json. The node config's own parser
// reads the same fields with the same rule.
Result<NodeConfig> ParseCniRoots(std::string_view text);

// Reads `path` and parses it; a missing file is the empty config (no declaration). kIo or
// kInvalidArgument naming the path otherwise.
Result<NodeConfig> LoadNodeConfig(const std::string& path, const std::string& node_name);

// The resolved config as the file the CNI reads on the host (no "nodes").
std::string FormatNodeConfig(const NodeConfig& config);

}  // namespace kuberdma::rails
