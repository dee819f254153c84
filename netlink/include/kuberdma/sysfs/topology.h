// SPDX-License-Identifier: Apache-2.0
// GPU PCI topology: the NVIDIA GPUs on the PCI bus, the PCI path between a GPU and an HCA in the
// terms of `nvidia-smi topo -m`, and what GPUDirect RDMA needs of the node (nvidia-peermem or
// DMA-BUF, no PCIe ACS redirect between the two), for the doctor, the validator and the demo.
//
//   KUBERDMA_ASSIGN_OR_RETURN(auto gpus, DiscoverGpus(root));
//   PciDistance d = Distance(gpus[0].device_path, gpus[0].numa_node, hca.device_path,
//                            hca.numa_node);
//   if (d <= PciDistance::kPxb) ...   // the pairing NCCL wants
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::sysfs {

// A GPU (NVIDIA display/3D controller) on the PCI bus.
struct Gpu {
  std::string address;      // "0000:18:00.0"
  std::string device_path;  // relative to sys/
  int numa_node = -1;
};

// Every NVIDIA GPU under bus/pci/devices, in address order. No PCI bus is an empty list.
Result<std::vector<Gpu>> DiscoverGpus(const SysfsRoot& root);

// The PCI path between two devices, nearest first, so that distances compare with `<`:
// kPix (one PCIe switch), kPxb (several bridges, no host bridge), kPhb (through the host bridge),
// kNode (between host bridges of one NUMA node), kSys (across NUMA nodes).
enum class PciDistance { kPix, kPxb, kPhb, kNode, kSys };

// nvidia-smi's name of `d`: "PIX", "PXB", "PHB", "NODE", "SYS".
std::string_view PciDistanceName(PciDistance d);

// The PCIe root complex of a device, as DRA's standard attribute resource.kubernetes.io/pcieRoot
// names it: "pci0000:15" from a sysfs device path "devices/pci0000:15/0000:15:01.0/...", "" when
// the path is not under a PCI root (a virtual device).
std::string PcieRootOf(const std::string& device_path);

// The distance between devices at `a_path` and `b_path` (device paths relative to sys/, as
// Hca::device_path and Gpu::device_path) on NUMA nodes `a_numa` and `b_numa` (-1: unknown).
PciDistance Distance(const std::string& a_path, int a_numa, const std::string& b_path, int b_numa);

// GPUDirect RDMA's kernel side as sysfs shows it: the NVIDIA driver (and whether it is the open
// kernel module, which DMA-BUF of GPU memory needs: its taint has no 'P'), and the peer-memory
// module (nvidia-peermem, or MOFED's nv_peer_mem), the two ways an HCA can reach GPU memory.
struct GpuDirectSupport {
  bool nvidia_loaded = false;
  bool nvidia_open = false;
  std::string nvidia_version;  // "550.54.15" ("" when sysfs does not say)
  bool peermem_loaded = false;
  std::string peermem;  // "nvidia_peermem 550.54.15", "nv_peer_mem 1.3"
  // The driver's registry (RegistryDwords in /proc/driver/nvidia/params, under the root) sets
  // PeerMappingOverride=1: a NIC may map GPU memory for non-admin processes (what IBGDA's doorbells
  // need; NVIDIA's open-gpu-kernel-modules discussion #1053). nullopt when the file is unreadable.
  std::optional<bool> peer_mapping_override;
};
GpuDirectSupport ReadGpuDirectSupport(const SysfsRoot& root);

// Whether the PCI function at `device_path` may issue PCIe AtomicOps (Device Control 2's AtomicOp
// Requester Enable, PCIe capability): what an HCA needs to do GPU-initiated atomics (NVSHMEM's
// IBGDA, NCCL's GDAKI). kUnreadable without the capability list (not root), kNoCapability for a
// function without the PCIe capability.
enum class AtomicOps { kEnabled, kDisabled, kNoCapability, kUnreadable };
AtomicOps ReadAtomicOpRequester(const SysfsRoot& root, const std::string& device_path);

// PCIe Access Control Services on a bridge: kOn when it redirects peer-to-peer requests or
// completions (or egress-controls them) up to the root complex, so GPU<->HCA traffic leaves the
// switch; kUnreadable when its config space past 64 bytes cannot be read (not root).
enum class AcsRedirect { kOff, kOn, kNoCapability, kUnreadable };
AcsRedirect ReadAcsRedirect(const SysfsRoot& root, const std::string& device_path);

// The bridges a peer-to-peer transfer between the devices at `a_path` and `b_path` crosses below
// their common ancestor (the switch's downstream ports ACS acts on), as device paths.
std::vector<std::string> BridgesBetween(const std::string& a_path, const std::string& b_path);

}  // namespace kuberdma::sysfs
