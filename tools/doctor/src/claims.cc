// SPDX-License-Identifier: Apache-2.0
// A DRA claim's alignment in the pod: the GPU+NIC pairs it asked for on one PCIe root.
#include <algorithm>

#include "internal.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::doctor::internal {

namespace {

// One pair of the claim, `hca` promised on `root`: "" and `good` set when it holds, else why not.
std::string JudgePair(const std::string& hca, const std::string& root,
                      const std::vector<sysfs::Hca>& visible, const std::vector<sysfs::Gpu>& gpus,
                      std::string* good) {
  auto h = std::find_if(visible.begin(), visible.end(),
                        [&](const sysfs::Hca& x) { return x.name == hca; });
  if (h == visible.end()) return hca + " (promised on " + root + ") is not in the pod";
  std::string actual = sysfs::PcieRootOf(h->device_path);
  if (actual != root)
    return hca + " is on " + actual + ", not the " + root + " it was allocated for";
  std::string near;
  std::string have;
  for (const auto& g : gpus) {
    std::string at = sysfs::PcieRootOf(g.device_path);
    if (at == root) near += (near.empty() ? "" : "/") + g.address;
    have += (have.empty() ? "" : ", ") + g.address + " on " + at;
  }
  if (near.empty()) {
    return hca + " was paired with a GPU on " + root + ", but none of the pod's GPUs (" +
           (have.empty() ? "none" : have) + ") is under it";
  }
  *good = hca + "+" + near + " on " + root;
  return "";
}

}  // namespace

void CheckClaimAlignment(const Inputs& in, const std::vector<sysfs::Hca>& visible, View& v) {
  std::string promised = Env(in, contract::kClaimPcieRoots);
  if (promised.empty()) return;  // no claim tied an HCA to a GPU
  std::string claim = Env(in, contract::kClaim);
  std::vector<sysfs::Gpu> gpus = PodGpus(in);
  std::vector<std::string> bad;
  std::vector<std::string> good;
  for (const auto& pair : contract::ParseClaimPcieRoots(promised)) {
    std::string ok;
    std::string why = JudgePair(pair.hca, pair.root, visible, gpus, &ok);
    if (why.empty()) {
      good.push_back(ok);
    } else {
      bad.push_back(why);
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
