// SPDX-License-Identifier: Apache-2.0
// SR-IOV PFs and VFs from sysfs, sriov_numvfs and driver rebinding.
#include "kuberdma/sysfs/sriov.h"

#include <cstdlib>
#include <thread>

namespace kuberdma::sysfs {

namespace {

std::string Basename(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int IntAttr(const SysfsRoot& root, const std::string& rel, int fallback) {
  auto v = root.ReadAttr(rel);
  return v && !v->empty() ? std::atoi(v->c_str()) : fallback;
}

}  // namespace

Result<std::optional<SriovPf>> ReadSriovPf(const SysfsRoot& root, const std::string& pci_address) {
  std::string dir = "bus/pci/devices/" + pci_address;
  if (!root.Exists(dir)) return Fail(ErrorCode::kNotFound, "no PCI device " + pci_address);
  if (!root.Exists(dir + "/sriov_totalvfs")) return std::optional<SriovPf>{};
  SriovPf pf{.pci_address = pci_address};
  pf.total_vfs = IntAttr(root, dir + "/sriov_totalvfs", 0);
  pf.num_vfs = IntAttr(root, dir + "/sriov_numvfs", 0);
  if (auto a = root.ReadAttr(dir + "/sriov_drivers_autoprobe")) pf.autoprobe = *a == "1";
  if (auto d = root.Resolve(dir + "/driver")) pf.driver = Basename(*d);
  for (int i = 0; i < pf.num_vfs; ++i) {
    auto vf = root.Resolve(dir + "/virtfn" + std::to_string(i));
    if (!vf) break;  // fewer links than the count: a PF being changed right now
    pf.vfs.push_back(Basename(*vf));
  }
  return std::optional<SriovPf>(std::move(pf));
}

Result<void> WriteNumVfs(const SysfsRoot& root, const SriovPf& pf, int count) {
  if (count < 0 || count > pf.total_vfs) {
    return Fail(ErrorCode::kInvalidArgument,
                "PF " + pf.pci_address + " offers at most " + std::to_string(pf.total_vfs) +
                    " VFs (sriov_totalvfs), " + std::to_string(count) + " were asked for");
  }
  if (count == pf.num_vfs) return {};
  std::string attr = "bus/pci/devices/" + pf.pci_address + "/sriov_numvfs";
  if (pf.num_vfs != 0) {
    if (auto r = root.WriteAttr(attr, "0"); !r) {
      return Fail(r.error().Wrap("remove the " + std::to_string(pf.num_vfs) + " VFs of " +
                                 pf.pci_address + " before creating " + std::to_string(count)));
    }
  }
  if (count == 0) return {};
  if (auto r = root.WriteAttr(attr, std::to_string(count)); !r) {
    return Fail(r.error().Wrap("create " + std::to_string(count) + " VFs on " + pf.pci_address));
  }
  return {};
}

namespace {

// Probes `pci_address` and waits up to `wait` for a driver; `driver` (the one it had, or "") only
// names what to bind by hand.
Result<void> ProbeAndWait(const SysfsRoot& root, const std::string& pci_address,
                          const std::string& driver, std::chrono::milliseconds wait) {
  const std::string dir = "bus/pci/devices/" + pci_address;
  if (auto r = root.WriteAttr("bus/pci/drivers_probe", pci_address); !r) {
    return Fail(r.error().Wrap("probe " + pci_address + " for a driver" +
                               (driver.empty() ? "" : " after unbinding it from " + driver)));
  }
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (!root.Exists(dir + "/driver")) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(ErrorCode::kTimeout, pci_address + " has no driver " +
                                           std::to_string(wait.count()) +
                                           " ms after it was probed; bind it by hand: echo " +
                                           pci_address + " > /sys/bus/pci/drivers/" +
                                           (driver.empty() ? "<its driver>" : driver) + "/bind");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

}  // namespace

Result<void> RebindDriver(const SysfsRoot& root, const std::string& pci_address,
                          std::chrono::milliseconds wait) {
  std::string dir = "bus/pci/devices/" + pci_address;
  auto drv = root.Resolve(dir + "/driver");
  if (!drv) {
    return Fail(ErrorCode::kNotFound, "PCI function " + pci_address + " has no driver to rebind");
  }
  std::string driver = Basename(*drv);
  if (auto r = root.WriteAttr(dir + "/driver/unbind", pci_address); !r) {
    return Fail(r.error().Wrap("unbind " + pci_address + " from " + driver));
  }
  return ProbeAndWait(root, pci_address, driver, wait);
}

Result<void> BindIfUnbound(const SysfsRoot& root, const std::string& pci_address,
                           std::chrono::milliseconds wait) {
  if (root.Exists("bus/pci/devices/" + pci_address + "/driver")) return {};
  if (!root.Exists("bus/pci/devices/" + pci_address)) {
    return Fail(ErrorCode::kNotFound, "no PCI function " + pci_address);
  }
  return ProbeAndWait(root, pci_address, "", wait);
}

}  // namespace kuberdma::sysfs
