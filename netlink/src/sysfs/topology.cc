// SPDX-License-Identifier: Apache-2.0
// GPUs on the PCI bus and PCI path distances.
#include "kuberdma/sysfs/topology.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kuberdma/base/files.h"

namespace kuberdma::sysfs {

namespace {

std::vector<std::string> SplitPath(const std::string& p) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= p.size()) {
    size_t e = p.find('/', pos);
    parts.push_back(p.substr(pos, e == std::string::npos ? std::string::npos : e - pos));
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  return parts;
}

bool IsNvidiaGpu(const SysfsRoot& root, const std::string& base) {
  if (root.ReadAttrOr(base + "/vendor", "") != "0x10de") return false;
  std::string cls = root.ReadAttrOr(base + "/class", "");
  return cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0;
}

}  // namespace

Result<std::vector<Gpu>> DiscoverGpus(const SysfsRoot& root) {
  std::vector<Gpu> out;
  if (!root.Exists("bus/pci/devices")) return out;
  KUBERDMA_ASSIGN_OR_RETURN(auto devs, root.ListDir("bus/pci/devices"));
  for (const auto& d : devs) {
    std::string base = "bus/pci/devices/" + d;
    if (!IsNvidiaGpu(root, base)) continue;
    Gpu g;
    g.address = d;
    if (auto p = root.Resolve(base)) g.device_path = *p;
    g.numa_node = std::atoi(root.ReadAttrOr(base + "/numa_node", "-1").c_str());
    out.push_back(std::move(g));
  }
  // Fixed-width hex addresses sort as text (a natural sort would put 3a before 18).
  std::sort(out.begin(), out.end(),
            [](const Gpu& x, const Gpu& y) { return x.address < y.address; });
  return out;
}

std::string PcieRootOf(const std::string& device_path) {
  auto a = device_path.find('/');
  if (a == std::string::npos) return "";
  auto b = device_path.find('/', a + 1);
  std::string root =
      device_path.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  return root.rfind("pci", 0) == 0 ? root : "";
}

std::string_view PciDistanceName(PciDistance d) {
  switch (d) {
    case PciDistance::kPix:
      return "PIX";
    case PciDistance::kPxb:
      return "PXB";
    case PciDistance::kPhb:
      return "PHB";
    case PciDistance::kNode:
      return "NODE";
    case PciDistance::kSys:
      break;
  }
  return "SYS";
}

PciDistance Distance(const std::string& a_path, int a_numa, const std::string& b_path, int b_numa) {
  auto a = SplitPath(a_path);
  auto b = SplitPath(b_path);
  // parts: "devices", "pciDDDD:BB" (host bridge), root port, [switch up, switch down ...], device
  if (a.size() < 3 || b.size() < 3 || a[1] != b[1]) {
    return a_numa >= 0 && a_numa == b_numa ? PciDistance::kNode : PciDistance::kSys;
  }
  size_t common = 0;
  while (common < a.size() - 1 && common < b.size() - 1 && a[common] == b[common]) ++common;
  // common counts "devices" and the host bridge; beyond that, shared bridges.
  size_t shared_bridges = common - 2;
  if (shared_bridges == 0) return PciDistance::kPhb;
  if (shared_bridges == 1) return PciDistance::kPxb;
  return PciDistance::kPix;
}

GpuDirectSupport ReadGpuDirectSupport(const SysfsRoot& root) {
  GpuDirectSupport g;
  g.nvidia_loaded = root.Exists("module/nvidia");
  g.nvidia_version = root.ReadAttrOr("module/nvidia/version", "");
  // The proprietary module taints the kernel 'P'; the open one (MIT/GPL) only 'O' (out of tree).
  std::string taint = root.ReadAttrOr("module/nvidia/taint", "");
  g.nvidia_open = g.nvidia_loaded && taint.find('P') == std::string::npos;
  // Where NCCL and rdma-core look: nvidia_peermem's module, MOFED's nv_peer_mem (nv_mem,
  // nv_mem_nc).
  for (const auto& [path, name] : {std::pair{"module/nvidia_peermem", "nvidia_peermem"},
                                   std::pair{"kernel/mm/memory_peers/nv_mem", "nv_peer_mem"},
                                   std::pair{"kernel/mm/memory_peers/nv_mem_nc", "nv_peer_mem"}}) {
    if (!root.Exists(path)) continue;
    g.peermem_loaded = true;
    std::string v = root.ReadAttrOr(std::string(path) + "/version", "");
    g.peermem = std::string(name) + (v.empty() ? "" : " " + v);
    break;
  }
  std::string proc = (root.root() == "/" ? "" : root.root()) + "/proc/driver/nvidia/params";
  if (auto params = ReadFile(proc)) {
    size_t at = params->find("PeerMappingOverride=");
    g.peer_mapping_override = at != std::string::npos && params->compare(at + 20, 1, "1") == 0;
  }
  return g;
}

AtomicOps ReadAtomicOpRequester(const SysfsRoot& root, const std::string& device_path) {
  auto cfg = ReadFile(root.Sys(device_path + "/config"));
  if (!cfg || cfg->size() < 0x40) return AtomicOps::kUnreadable;
  const std::string& c = *cfg;
  auto u8 = [&](size_t at) { return static_cast<uint8_t>(c[at]); };
  // The standard capability list starts at 0x34; the PCIe capability (ID 0x10) holds Device
  // Control 2 at +0x28, whose bit 6 is AtomicOp Requester Enable.
  size_t at = u8(0x34) & 0xfc;
  for (int hops = 0; hops < 48 && at >= 0x40 && at + 0x2a <= c.size(); ++hops) {
    if (u8(at) == 0x10)
      return (u8(at + 0x28) & 0x40) != 0 ? AtomicOps::kEnabled : AtomicOps::kDisabled;
    at = u8(at + 1) & 0xfc;
  }
  return c.size() < 0x100 && at >= c.size() ? AtomicOps::kUnreadable : AtomicOps::kNoCapability;
}

AcsRedirect ReadAcsRedirect(const SysfsRoot& root, const std::string& device_path) {
  auto cfg = ReadFile(root.Sys(device_path + "/config"));
  // Unprivileged readers get the first 64 bytes only: extended capabilities start at 0x100.
  if (!cfg || cfg->size() < 0x104) return AcsRedirect::kUnreadable;
  const std::string& c = *cfg;
  auto u16 = [&](size_t at) {
    return static_cast<uint16_t>(static_cast<uint8_t>(c[at]) | static_cast<uint8_t>(c[at + 1])
                                                                   << 8);
  };
  size_t at = 0x100;
  for (int hops = 0; hops < 64 && at >= 0x100 && at + 8 <= c.size(); ++hops) {
    uint32_t header = u16(at) | static_cast<uint32_t>(u16(at + 2)) << 16;
    if (header == 0 || header == 0xffffffff) break;
    if ((header & 0xffff) == 0x000d) {  // Access Control Services
      uint16_t control = u16(at + 6);
      // P2P Request Redirect (bit 2), Completion Redirect (3), Egress Control (5).
      return (control & 0x2c) != 0 ? AcsRedirect::kOn : AcsRedirect::kOff;
    }
    at = header >> 20 & 0xffc;
  }
  return AcsRedirect::kNoCapability;
}

std::vector<std::string> BridgesBetween(const std::string& a_path, const std::string& b_path) {
  auto a = SplitPath(a_path);
  auto b = SplitPath(b_path);
  std::vector<std::string> out;
  if (a.size() < 3 || b.size() < 3 || a[1] != b[1]) return out;
  size_t common = 0;
  while (common < a.size() - 1 && common < b.size() - 1 && a[common] == b[common]) ++common;
  for (const auto* p : {&a, &b}) {
    std::string path;
    for (size_t i = 0; i + 1 < p->size(); ++i) {
      path += (i == 0 ? "" : "/") + (*p)[i];
      if (i >= common) out.push_back(path);
    }
  }
  return out;
}

}  // namespace kuberdma::sysfs
