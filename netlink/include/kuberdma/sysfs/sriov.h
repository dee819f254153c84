// SPDX-License-Identifier: Apache-2.0
// SR-IOV on the PCI bus, from sysfs: what a PF's firmware allows (sriov_totalvfs), how many VFs
// it has (sriov_numvfs) and which they are (virtfnN), and the two writes kube-rdma makes there:
// creating VFs, and rebinding one VF's driver so it takes a MAC or GUID its PF just set.
//
//   KUBERDMA_ASSIGN_OR_RETURN(auto pf, ReadSriovPf(root, "0000:1b:00.0"));
//   if (pf && pf->total_vfs >= 8) KUBERDMA_TRY(WriteNumVfs(root, *pf, 8));
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::sysfs {

struct SriovPf {
  std::string pci_address;
  // sriov_totalvfs: the most VFs the device offers. 0 when the firmware has SR-IOV off (mlx5:
  // SRIOV_EN=0) or NUM_OF_VFS=0; mlxconfig changes it, and it takes a firmware reset.
  int total_vfs = 0;
  int num_vfs = 0;                // sriov_numvfs: VFs that exist now
  std::optional<bool> autoprobe;  // sriov_drivers_autoprobe, where the kernel has it
  std::string driver;             // the PF's driver ("mlx5_core")
  std::vector<std::string> vfs;   // the VFs' PCI addresses, by VF number (virtfn0 first)
};

// The PF at `pci_address`; nullopt for a PCI function without the SR-IOV capability (no
// sriov_totalvfs: a VF itself, or a device that has none). kNotFound when there is no such
// device.
Result<std::optional<SriovPf>> ReadSriovPf(const SysfsRoot& root, const std::string& pci_address);

// Sets sriov_numvfs to `count`. The kernel takes a new count only from 0, so a change goes
// through 0 first: every VF of the PF is destroyed and created again (callers check none is in
// use). kInvalidArgument for a count above total_vfs; the kernel's refusal otherwise (EBUSY
// while VFs are assigned, ENOMEM/ERANGE where the BIOS gave the PF too little bus space).
Result<void> WriteNumVfs(const SysfsRoot& root, const SriovPf& pf, int count);

// Unbinds the PCI function at `pci_address` from its driver and asks the bus to probe it again
// (drivers_probe), waiting up to `wait` for a driver to be bound: how a VF takes a MAC or GUID
// that its PF set while its driver held the old one. Its netdev and RDMA device are created
// anew (new ifindex, possibly new names). kNotFound when it has no driver; kTimeout when none is
// bound again in time (the device is then driverless: the error says how to bind it by hand).
Result<void> RebindDriver(const SysfsRoot& root, const std::string& pci_address,
                          std::chrono::milliseconds wait);

// Asks the bus to probe the PCI function at `pci_address` (drivers_probe) when it has no driver,
// waiting up to `wait` for one: how a VF whose rebind was cut short (the process killed between
// the unbind and the probe) gets its driver, and its netdev, back. Nothing when it has a driver
// (idempotent). kTimeout when none is bound in time, saying how to bind it by hand; the bus'
// refusal of the probe as it came.
Result<void> BindIfUnbound(const SysfsRoot& root, const std::string& pci_address,
                           std::chrono::milliseconds wait);

}  // namespace kuberdma::sysfs
