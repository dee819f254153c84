// SPDX-License-Identifier: Apache-2.0
// GPUs on the PCI bus and PCI path distances.
#include "kuberdma/sysfs/topology.h"

#include <algorithm>
#include <cstdlib>

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

}  // namespace kuberdma::sysfs
