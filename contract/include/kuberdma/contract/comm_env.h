// SPDX-License-Identifier: Apache-2.0
// What each communication library of a pod is told, so that it uses the pod's HCAs (every one, the
// right port and RoCE GID) and its control interface, not eth0 or the node's first NIC: one plan,
// from the pod's allocation, for NCCL (and RCCL, which reads NCCL's names), UCX (and what runs on
// it: Open MPI's pml ucx, NIXL, UCC), Open MPI, NVSHMEM, Mooncake, NIXL/vLLM, Gloo/TensorPipe and
// oneCCL; and the reading back of what a pod's environment says, for the doctor. Every format is
// the library's own parser's (each cited in docs/comm-libs.md). The variable names are spelled
// here and nowhere else (.ci/check-boundaries.sh).
//
//   CommTopology t{.hcas = {{.name = "mlx5_3", .link_layer = "Ethernet", .gid_index = 3}},
//                  .control_netdev = "eth0"};
//   KUBERDMA_ASSIGN_OR_RETURN(LibraryEnv ucx, PlanFor(Library::kUcx, t));
//   for (const auto& [k, v] : ucx.vars) ...   // UCX_NET_DEVICES=mlx5_3:1, UCX_IB_GID_INDEX=3, ...
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/contract/pod_env.h"

namespace kuberdma::contract {

// The device-list variables the doctor names in its findings.
inline constexpr const char* kUcxNetDevices = "UCX_NET_DEVICES";
inline constexpr const char* kNvshmemHcaList = "NVSHMEM_HCA_LIST";
inline constexpr const char* kMooncakeFilters = "MC_TE_FILTERS";

enum class Library { kNccl, kRccl, kUcx, kOpenMpi, kNvshmem, kMooncake, kNixl, kGloo, kOneCcl };

// "nccl", "rccl", "ucx", "mpi", "nvshmem", "mooncake", "nixl", "gloo", "oneccl".
std::string_view LibraryName(Library l);
// Every library, in that order.
std::vector<Library> AllLibraries();
// A comma list of names, or "all". kInvalidArgument naming an unknown one and the known ones.
Result<std::vector<Library>> ParseLibraries(std::string_view list);

// One of the pod's HCAs, as far as the caller knows it.
struct CommHca {
  std::string name;  // "mlx5_3"
  uint32_t port = 1;
  std::string link_layer;  // "Ethernet" (RoCE) or "InfiniBand"
  // RoCE: the index of the pod's own RoCE v2 GID on the port, and its IPv4 address: known in the
  // pod once the CNI gave it its addresses (rdma-validate --env), not at Allocate.
  std::optional<uint32_t> gid_index;
  std::string address;
  int nearest_gpu = -1;  // the local GPU (CUDA index) that shares its PCIe switch; -1 unknown
};

// How the pod's processes use the HCAs: a rendezvous stripes over this many at most.
enum class ProcessLayout {
  kOnePerGpu,  // one process (rank) per GPU, each with the NIC nearest its GPU (torchrun, MPI)
  kOneForAll,  // one process drives every NIC (a KV-cache server, one NIXL agent per pod)
};

struct CommTopology {
  std::vector<CommHca> hcas;
  std::string control_netdev = "eth0";  // the pod's cluster interface: bootstrap, TCP, OOB
  std::string control_address;          // its IP ("": not known, at Allocate)
  // The interfaces a TCP-only library (Gloo) deals its traffic over, round-robin; empty: the
  // control interface alone.
  std::vector<std::string> tcp_interfaces;
  ProcessLayout layout = ProcessLayout::kOnePerGpu;
  // One process's view (UCX's device list and rails): the local rank whose GPU it drives; the
  // HCAs nearest that GPU. nullopt: the whole pod's.
  std::optional<int> local_rank;
  // RoCE, when the GID indices differ between HCAs: one IPv4 prefix that holds the pod's own GIDs
  // and no other pod's on those HCAs ("" when there is none), for the libraries that take one
  // range for every HCA (NCCL_IB_ADDR_RANGE, NVSHMEM_IB_ADDR_RANGE). The validator computes it
  // from the GID tables (gid_env.h).
  std::string roce_range;
};

// The devices of `hcas` (KUBERDMA_HCAS's description) the plan is about: each ACTIVE port (every
// port of an HCA with none active), as NCCL_IB_HCA names them; no GIDs or GPUs yet.
std::vector<CommHca> CommHcasOf(const std::vector<HcaInfo>& hcas);

// What one library is told: its variables in the order to export them, and what the plan could
// not set and why (a note the caller shows: "UCX_IB_ROCE_SUBNETS needs UCX 1.18 or later").
struct LibraryEnv {
  Library library = Library::kNccl;
  std::vector<std::pair<std::string, std::string>> vars;
  std::vector<std::string> notes;
};

// `library`'s variables for `t`. kInvalidArgument, naming what, for no HCA (but for Gloo, which
// needs none), an HCA name a list
// cannot carry (empty, or with ',', ':', '=', '^', '[' or a space: every library splits on some of
// them), a port of 0, or HCAs of both link layers (one pod, one fabric). RoCE GIDs: one index for
// every HCA where they agree, else the library's per-HCA form where it has one (UCX 1.18's
// ROCE_SUBNETS), else the range, else a note saying the library picks its own.
Result<LibraryEnv> PlanFor(Library library, const CommTopology& t);
// Every library of `libraries`, their variables merged (a name two libraries share, UCX's under
// Open MPI and NIXL, once). The first error.
Result<std::vector<LibraryEnv>> PlanForAll(const std::vector<Library>& libraries,
                                           const CommTopology& t);

// ---- Reading back what a pod's environment tells each library (the doctor) ----

// An "hca:port" device of a UCX-style list ("mlx5_0:1"; port 0: no port given).
struct CommDevice {
  std::string name;
  uint32_t port = 0;
  bool operator==(const CommDevice&) const = default;
};

// What the environment says, for the checks that hold it to the allocation; each field empty or
// unset when its variable is.
struct CommSaid {
  std::optional<std::vector<CommDevice>> ucx_devices;  // UCX_NET_DEVICES ("all": nullopt)
  bool ucx_devices_exclude = false;                    // a "^" list
  std::optional<std::string> ucx_tls;                  // UCX_TLS
  std::optional<uint32_t> ucx_gid_index;               // UCX_IB_GID_INDEX (a number)
  std::optional<std::vector<std::string>> ucx_roce_subnets;
  std::optional<std::string> ompi_pml;  // OMPI_MCA_pml
  std::optional<std::string> ompi_pml_ucx_devices;
  std::optional<std::vector<CommDevice>> nvshmem_hcas;  // NVSHMEM_HCA_LIST (not a "^" list)
  std::optional<uint32_t> nvshmem_gid_index;
  std::optional<std::vector<std::string>> mooncake_filters;  // MC_TE_FILTERS
  std::optional<uint32_t> mooncake_gid_index;                // MC_GID_INDEX
  std::optional<uint32_t> nccl_gid_index;                    // NCCL_IB_GID_INDEX
  std::optional<std::vector<std::string>> gloo_ifnames;      // GLOO_SOCKET_IFNAME
  std::optional<std::string> tp_ifname;                      // TP_SOCKET_IFNAME
  // Each GID index variable that is set, by name ("UCX_IB_GID_INDEX" -> 3).
  std::map<std::string, uint32_t> GidIndices() const;
};

// Reads every variable above through `getenv`; a value that does not parse is left unset and said
// in `unparsed` ("UCX_IB_GID_INDEX=auto3 is not an index").
CommSaid ReadCommEnv(const std::function<const char*(const char*)>& getenv,
                     std::vector<std::string>* unparsed = nullptr);

// UCX_NET_DEVICES's list as UCX splits it (ucs config's comma list; "^" first: a deny list).
std::vector<CommDevice> ParseDeviceList(std::string_view value, bool* exclude = nullptr);

}  // namespace kuberdma::contract
