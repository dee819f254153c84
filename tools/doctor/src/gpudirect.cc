// SPDX-License-Identifier: Apache-2.0
// GPUDirect RDMA on this node: can an HCA reach GPU memory at all (nvidia-peermem, or DMA-BUF
// with the open GPU kernel module on Linux >= 5.12), and does PCIe ACS send GPU<->HCA traffic up
// to the root complex instead of across the switch they share. What rdma-validate's GPUDirect
// judgement points at when NCCL staged an HCA's traffic through host memory.
#include <sys/utsname.h>

#include <cstdio>
#include <set>

#include "internal.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::doctor {

namespace {

using internal::Add;

// Linux's version as major * 100 + minor (5.12 -> 512); 0 when unknown.
int KernelVersion() {
  utsname u{};
  if (::uname(&u) != 0) return 0;
  int major = 0;
  int minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return 0;
  return major * 100 + minor;
}

void CheckPeerMemory(const sysfs::GpuDirectSupport& g, int kernel, View& v) {
  if (g.peermem_loaded) {
    Add(v, "gdr-peermem", Status::kOk, g.peermem + " is loaded");
  } else {
    Add(v, "gdr-peermem", Status::kWarn, "nvidia-peermem is not loaded",
        "modprobe nvidia-peermem (it ships with the GPU driver; the GPU Operator loads it with "
        "driver.rdma.enabled=true); not needed where DMA-BUF works");
  }
  bool dmabuf = g.nvidia_open && kernel >= 512;
  std::string why = !g.nvidia_open ? "the NVIDIA driver is the proprietary kernel module "
                                     "(DMA-BUF of GPU memory needs the open one)"
                                   : "Linux " + std::to_string(kernel / 100) + "." +
                                         std::to_string(kernel % 100) + " is older than 5.12";
  if (dmabuf) {
    Add(v, "gdr-dmabuf", Status::kOk,
        "the open NVIDIA kernel module " + g.nvidia_version + " on Linux >= 5.12: DMA-BUF works");
  } else {
    Add(v, "gdr-dmabuf", Status::kWarn, "no DMA-BUF: " + why,
        "install the open GPU kernel module (nvidia-open, R515+) on a kernel >= 5.12, or rely "
        "on nvidia-peermem");
  }
  if (!g.peermem_loaded && !dmabuf) {
    Add(v, "gpudirect-rdma", Status::kFail,
        "neither nvidia-peermem nor DMA-BUF: NCCL will stage every transfer through host memory "
        "(\"GPU Direct RDMA Disabled for HCA\" in its log)",
        "load nvidia-peermem, or move to the open GPU kernel module; rdma-validate fails such a "
        "node unless --allow-no-gdr");
  }
}

// ACS on the bridges between every HCA and the GPUs on its switch.
void CheckAcs(const sysfs::SysfsRoot& root, const std::vector<sysfs::Gpu>& gpus,
              const std::vector<sysfs::Hca>& hcas, View& v) {
  std::set<std::string> redirecting;
  std::set<std::string> unreadable;
  std::string example;
  for (const auto& h : hcas) {
    if (h.device_path.empty() || h.bus == sysfs::BusKind::kVirtual) continue;
    for (const auto& g : gpus) {
      auto d = sysfs::Distance(g.device_path, g.numa_node, h.device_path, h.numa_node);
      if (d > sysfs::PciDistance::kPxb) continue;  // not peers on a switch: ACS is not the matter
      for (const auto& bridge : sysfs::BridgesBetween(g.device_path, h.device_path)) {
        std::string bdf = bridge.substr(bridge.find_last_of('/') + 1);
        auto acs = sysfs::ReadAcsRedirect(root, bridge);
        if (acs == sysfs::AcsRedirect::kUnreadable) unreadable.insert(bdf);
        if (acs != sysfs::AcsRedirect::kOn || !redirecting.insert(bdf).second) continue;
        if (example.empty()) example = bdf + " (between GPU " + g.address + " and " + h.name + ")";
      }
    }
  }
  std::string list;
  for (const auto& b : redirecting) list += (list.empty() ? "" : ", ") + b;
  if (!redirecting.empty()) {
    Add(v, "pcie-acs", Status::kFail,
        "PCIe ACS redirects peer-to-peer traffic at " + list + ", e.g. " + example +
            ": GPUDirect RDMA goes through the root complex at a fraction of line rate",
        "turn ACS off on those ports at boot (setpci -s <bdf> ECAP_ACS+0x6.w=0000, or the BIOS's "
        "ACS setting); keep it only where VMs need IOMMU isolation");
  } else if (!unreadable.empty()) {
    Add(v, "pcie-acs", Status::kUnknown,
        "the PCIe config space of " + std::to_string(unreadable.size()) +
            " bridge(s) between GPUs and HCAs is unreadable here",
        "run as root on the host (kubectl debug node/<node> --profile=sysadmin)");
  } else {
    Add(v, "pcie-acs", Status::kOk, "no ACS redirect between any GPU and the HCAs on its switch");
  }
}

}  // namespace

namespace internal {

void CheckGpuDirect(const Inputs& in, const std::vector<sysfs::Hca>& hcas, View& v) {
  auto gpus = sysfs::DiscoverGpus(in.root);
  if (!gpus || gpus->empty()) {
    Add(v, "gpudirect-rdma", Status::kOk, "no NVIDIA GPU on this node's PCI bus: not applicable");
    return;
  }
  auto g = sysfs::ReadGpuDirectSupport(in.root);
  if (!g.nvidia_loaded) {
    Add(v, "gpudirect-rdma", Status::kUnknown,
        "NVIDIA GPUs on the PCI bus but no NVIDIA driver loaded (no module/nvidia in sysfs)",
        "install the GPU driver (the GPU Operator's driver DaemonSet) before judging GPUDirect");
    return;
  }
  int kernel = in.kernel_version > 0 ? in.kernel_version : KernelVersion();
  v.doc["gpuDirect"] = {{"nvidiaDriver", g.nvidia_version},
                        {"openKernelModule", g.nvidia_open},
                        {"peermem", g.peermem},
                        {"kernel", kernel}};
  CheckPeerMemory(g, kernel, v);
  CheckAcs(in.root, *gpus, hcas, v);
}

}  // namespace internal
}  // namespace kuberdma::doctor
