// SPDX-License-Identifier: Apache-2.0
// The topology view: the GPU-to-HCA matrix in nvidia-smi topo's terms, with each GPU's nearest
// HCAs and a warning for GPUs whose nearest HCA is not the pod's.
#include <algorithm>

#include "internal.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::doctor {

using internal::Add;
using internal::Join;
using internal::Names;
using nlohmann::json;

namespace {

// GPU `g`'s row: its distance to each HCA and the nearest ones.
json MatrixRow(const sysfs::Gpu& g, const std::vector<sysfs::Hca>& hcas,
               std::vector<std::string>* nearest) {
  json dist = json::array();
  std::vector<sysfs::PciDistance> ds;
  for (const auto& h : hcas) {
    ds.push_back(sysfs::Distance(g.device_path, g.numa_node, h.device_path, h.numa_node));
    dist.push_back(std::string(sysfs::PciDistanceName(ds.back())));
  }
  sysfs::PciDistance best = *std::min_element(ds.begin(), ds.end());
  for (size_t i = 0; i < hcas.size(); ++i) {
    if (ds[i] == best) nearest->push_back(hcas[i].name);
  }
  return {
      {"gpu", g.address}, {"numaNode", g.numa_node}, {"distances", dist}, {"nearest", *nearest}};
}

// The pod's HCAs: the device plugin's description, else what NCCL_IB_HCA selects.
std::vector<std::string> PodHcas(const Inputs& in, const std::vector<sysfs::Hca>& hcas) {
  std::vector<std::string> ours = internal::Ours(in);
  std::string ib = internal::Env(in, contract::kNcclIbHca);
  if (ours.empty() && !ib.empty()) ours = contract::ParseIbHca(ib).Select(Names(hcas));
  return ours;
}

}  // namespace

View TopoView(const Inputs& in) {
  View v{"topo", json::object(), {}};
  auto hcas = sysfs::DiscoverHcas(in.root, sysfs::HcaDetail::kIdentity);
  auto gpus = internal::PodGpus(in);
  if (!hcas || hcas->empty() || gpus.empty()) {
    Add(v, "gpu-nic-pairing", Status::kWarn, "no GPUs or no HCAs visible under " + in.root.Sys(""),
        "");
    return v;
  }
  std::vector<std::string> ours = PodHcas(in, *hcas);
  v.doc["hcaNames"] = Names(*hcas);
  v.doc["ours"] = ours;
  json matrix = json::array();
  for (const auto& g : gpus) {
    std::vector<std::string> nearest;
    matrix.push_back(MatrixRow(g, *hcas, &nearest));
    bool paired = std::any_of(nearest.begin(), nearest.end(), [&](const std::string& n) {
      return std::find(ours.begin(), ours.end(), n) != ours.end();
    });
    if (!ours.empty() && !paired) {
      Add(v, "gpu-nic-pairing", Status::kWarn,
          "GPU " + g.address + "'s nearest HCA (" + Join(nearest) + ") is not in this pod (" +
              Join(ours) + ")",
          "request per-HCA resources (rdma/hca) so the kubelet's topology manager pairs NUMA-local "
          "HCAs; a mismatched pair loses 30%+ bandwidth");
    }
  }
  v.doc["matrix"] = matrix;
  if (v.findings.empty())
    Add(v, "gpu-nic-pairing", Status::kOk, "every GPU's nearest HCA is available");
  return v;
}

}  // namespace kuberdma::doctor
