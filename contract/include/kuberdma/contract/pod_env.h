// SPDX-License-Identifier: Apache-2.0
// The pod-env contract: what rdma-device-plugin tells a container about the HCAs it was
// allocated, and how rdma-validate and rdma-doctor read it back. One codec for both variables:
//   NCCL_IB_HCA    NCCL's device list, exact-match form with ports: "=mlx5_0:1,mlx5_3:1";
//   KUBERDMA_HCAS  a JSON array describing each HCA (schema in docs/deviceplugin.md).
// Nothing address-related is in it: a pod's addresses (and so its RoCE GIDs) come later, from the
// CNI's IPAM, after the kubelet has already built the container's environment.
//
//   std::vector<HcaInfo> hcas = {Describe(hca, /*healthy=*/true)};
//   std::map<std::string, std::string> env = Encode(hcas);      // the device plugin
//   KUBERDMA_ASSIGN_OR_RETURN(PodEnv pod, Read(getenv));          // the validator, the doctor
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::contract {

// The variable names; nothing else in the repo spells them (.ci/check-boundaries.sh).
inline constexpr const char* kNcclIbHca = "NCCL_IB_HCA";
inline constexpr const char* kHcas = "KUBERDMA_HCAS";
// Set by the DRA driver's CDI spec (dra/prepare.h): the claim ("ns/name"), and where the claim
// tied an HCA to a GPU's PCIe root, which root ("mlx5_0=pci0000:15,..."), checked by rdma-doctor.
inline constexpr const char* kClaim = "KUBERDMA_CLAIM";
inline constexpr const char* kClaimPcieRoots = "KUBERDMA_CLAIM_PCIE_ROOTS";

struct PortInfo {
  uint32_t port = 0;
  std::string state;  // "ACTIVE"
  double rate_gbps = 0;
  std::string link_layer;  // "Ethernet", "InfiniBand"
  std::string netdev;      // RoCE: the port's netdev on the host ("" if none)
  std::string umad;        // "/dev/infiniband/umad3" ("" if none)
  std::string issm;
  bool operator==(const PortInfo&) const = default;
};

struct HcaInfo {
  std::string name;
  std::string pci_address;
  std::string bus_address;
  int numa_node = -1;
  std::string link_layer;
  std::string node_guid;
  std::vector<std::string> netdevs;
  std::string uverbs;  // "/dev/infiniband/uverbs3"
  bool healthy = false;
  std::vector<PortInfo> ports;
  bool operator==(const HcaInfo&) const = default;
};

// One entry of NCCL_IB_HCA: a device name and the ports given for it (none: every port).
struct IbHcaEntry {
  std::string name;
  std::vector<uint32_t> ports;
  bool operator==(const IbHcaEntry&) const = default;
};

// NCCL_IB_HCA as NCCL reads it: "^" excludes, "=" matches names exactly (else by prefix).
struct IbHcaList {
  bool exclude = false;
  bool exact = false;
  std::vector<IbHcaEntry> entries;  // in the order written

  std::vector<std::string> Names() const;
  // The entry for `name`, or nullptr.
  const IbHcaEntry* Find(const std::string& name) const;
  // The names of `present` that NCCL would use with this value.
  std::vector<std::string> Select(const std::vector<std::string>& present) const;
  bool operator==(const IbHcaList&) const = default;
};

IbHcaList ParseIbHca(std::string_view value);
std::string FormatIbHca(const IbHcaList& list);

// The contract's description of `hca` (read with HcaDetail::kPorts or more).
HcaInfo Describe(const sysfs::Hca& hca, bool healthy);

// Both variables for a container given `hcas`: NCCL_IB_HCA in exact form naming every ACTIVE
// port (every port when none is active, so the list is never empty), and KUBERDMA_HCAS.
std::map<std::string, std::string> Encode(const std::vector<HcaInfo>& hcas);

// Parses KUBERDMA_HCAS. kInvalidArgument naming what is wrong when it is not the contract's JSON.
Result<std::vector<HcaInfo>> DecodeHcas(std::string_view text);

// What a pod was told: each variable when set and not empty.
struct PodEnv {
  std::optional<std::vector<HcaInfo>> hcas;
  std::optional<IbHcaList> ib_hca;
  std::string ib_hca_raw;
  // The allocated HCAs' names (from KUBERDMA_HCAS), in order; empty when it is not set.
  std::vector<std::string> HcaNames() const;
};

// Reads both variables through `getenv`. kInvalidArgument when KUBERDMA_HCAS is set but malformed.
Result<PodEnv> Read(const std::function<const char*(const char*)>& getenv);

// ---- KUBERDMA_CLAIM_PCIE_ROOTS: the DRA driver writes it, the doctor and the validator read it
// ----

// One HCA a claim tied to a GPU, and the PCIe root it was allocated on.
struct ClaimPair {
  std::string hca;   // "mlx5_0"
  std::string root;  // "pci0000:15"
  bool operator==(const ClaimPair&) const = default;
};

// "mlx5_0=pci0000:15,mlx5_1=pci0000:15"; "" for none.
std::string FormatClaimPcieRoots(const std::vector<ClaimPair>& pairs);
// The pairs in order; an entry without '=' is skipped (the driver never writes one).
std::vector<ClaimPair> ParseClaimPcieRoots(std::string_view value);

}  // namespace kuberdma::contract
