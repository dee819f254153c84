// SPDX-License-Identifier: Apache-2.0
// A DRA claim's alignment in the pod: the GPU+NIC pairs it asked for on one PCIe root.
#include "internal.h"
#include "kuberdma/podenv/pod_env.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::doctor::internal {

namespace {

// "pci0000:15" of a sysfs device path "devices/pci0000:15/...", or "".
std::string RootOf(const std::string& device_path) {
  auto a = device_path.find('/');
  if (a == std::string::npos) return "";
  std::string root = device_path.substr(a + 1, device_path.find('/', a + 1) - a - 1);
  return root.rfind("pci", 0) == 0 ? root : "";
}

}  // namespace

void CheckClaimAlignment(const Inputs& in, const std::vector<sysfs::Hca>& visible, View& v) {
  std::string promised = Env(in, podenv::kClaimPcieRoots);
  if (promised.empty()) return;  // no claim tied an HCA to a GPU
  std::string claim = Env(in, podenv::kClaim);
  std::vector<sysfs::Gpu> gpus = PodGpus(in);
  std::vector<std::string> bad, good;
  for (const auto& pair : Split(promised, ',')) {
    auto eq = pair.find('=');
    if (eq == std::string::npos) continue;
    std::string hca = pair.substr(0, eq), root = pair.substr(eq + 1);
    auto h = std::find_if(visible.begin(), visible.end(),
                          [&](const sysfs::Hca& x) { return x.name == hca; });
    if (h == visible.end()) {
      bad.push_back(hca + " (promised on " + root + ") is not in the pod");
      continue;
    }
    if (RootOf(h->device_path) != root) {
      bad.push_back(hca + " is on " + RootOf(h->device_path) + ", not the " + root +
                    " it was allocated for");
      continue;
    }
    std::string near;
    for (const auto& g : gpus) {
      if (RootOf(g.device_path) == root) near += (near.empty() ? "" : "/") + g.address;
    }
    if (near.empty()) {
      std::string have;
      for (const auto& g : gpus) have += (have.empty() ? "" : ", ") + g.address + " on " + RootOf(g.device_path);
      bad.push_back(hca + " was paired with a GPU on " + root + ", but none of the pod's GPUs (" +
                    (have.empty() ? "none" : have) + ") is under it");
    } else {
      good.push_back(hca + "+" + near + " on " + root);
    }
  }
  if (!bad.empty()) {
    Add(v, "claim-alignment", Status::kFail,
        "claim " + claim + " asked for GPU+NIC pairs on one PCIe root: " + Join(bad, "; "),
        "the GPU and the HCA of a pair cross the CPU; delete the pod so that the scheduler "
        "allocates its claim again, and check that the GPU's DRA driver publishes "
        "resource.kubernetes.io/pcieRoot (docs/dra.md)");
  } else {
    Add(v, "claim-alignment", Status::kOk, "claim " + claim + ": " + Join(good, ", "));
  }
}

}  // namespace kuberdma::doctor::internal
