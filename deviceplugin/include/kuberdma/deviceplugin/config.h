// SPDX-License-Identifier: Apache-2.0
// rdma-device-plugin configuration: Mellanox k8s-rdma-shared-dev-plugin's JSON as written, plus
// kube-rdma's additions (selection by PCI address and HCA name, allocation policy, which character
// devices and environment to inject, CDI). Errors name the entry and field:
//
//   auto cfg = ParseConfig(R"({"configList":[{"resourceName":"shared","rdmaHcaMax":1000,
//                              "selectors":{"vendors":["15b3"]}}]})");
//   // cfg->resources[0].FullName() == "rdma/shared"
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/contract/comm_env.h"

namespace kuberdma::deviceplugin {

struct Selectors {
  std::vector<std::string> vendors;        // "15b3" (a "0x" prefix is accepted)
  std::vector<std::string> device_ids;     // "1021"
  std::vector<std::string> drivers;        // "mlx5_core"
  std::vector<std::string> if_names;       // netdev names; the deprecated "devices" lands here
  std::vector<std::string> link_types;     // "ether" / "infiniband" (also "ethernet", "ib")
  std::vector<std::string> pci_addresses;  // ours: "0000:1a:00.0", "1a:00.0" or an auxiliary name
  std::vector<std::string> hca_names;      // ours: "mlx5_3" (IB-only HCAs have no netdev)
  // sriov-network-device-plugin's: VFs of the PFs with these netdev names / PCI addresses (a PF
  // itself matches its own name or address too).
  std::vector<std::string> pf_names;      // "ens1f0np0"
  std::vector<std::string> root_devices;  // "0000:1a:00.0"
  // ours: which kind of function: "pf" (a physical function), "vf" (an SR-IOV virtual function),
  // "sf" (an auxiliary scalable function). The shipped config selects "pf", so PFs and their
  // VFs are never mixed in one resource.
  std::vector<std::string> functions;
  // ours: physical rails (1-based, rails/rails.h: declared in the node config, else PCI-address
  // order), so that a resource per rail lets the scheduler admit only pods whose node can give
  // every rail they ask for.
  std::vector<int> rails;
};

enum class Policy { kPool, kPerHca };

struct ResourceConfig {
  std::string resource_name;
  std::string resource_prefix = "rdma";
  uint32_t rdma_hca_max = 0;  // slots: per pool (pool) or per HCA (per-hca)
  Selectors selectors;
  Policy policy = Policy::kPool;
  bool inject_mad = true;  // umad/issm per port where they exist
  bool nccl_env = true;    // NCCL_IB_HCA and KUBERDMA_HCAS
  // With nccl_env: each library's variables for the allocated HCAs (contract/comm_env.h) that do
  // not need the pod's addresses (no RoCE GIDs: rdma-validate --env in the pod), told that the
  // pod's control interface is comm_interface.
  std::vector<contract::Library> comm_libraries = contract::AllLibraries();
  std::string comm_interface = "eth0";
  std::map<std::string, std::string> extra_env;
  bool cdi = false;  // answer with CDI device names and write a CDI spec

  std::string FullName() const { return resource_prefix + "/" + resource_name; }
};

// Bounds on a config: resources (each a gRPC server and a registration) and slots per resource
// (ListAndWatch sends every slot in one message, which the kubelet caps at 4 MiB).
inline constexpr size_t kMaxResources = 64;
inline constexpr uint64_t kMaxSlots = 10000;

struct Config {
  uint32_t periodic_update_interval_s = 60;  // full rescan; 0 disables (events still apply)
  uint32_t health_poll_ms = 500;             // port-state re-read (ib_core sends no event)
  std::string cdi_dir = "/var/run/cdi";
  std::vector<ResourceConfig> resources;
};

// Parses and validates. kInvalidArgument with "configList[1].selectors.vendors: ..." style
// messages.
Result<Config> ParseConfig(std::string_view text);

}  // namespace kuberdma::deviceplugin
