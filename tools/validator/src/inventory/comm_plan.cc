// SPDX-License-Identifier: Apache-2.0
// The pod's plan for its communication libraries: contract/comm_env.h fed with what the pod knows.
#include "kuberdma/validator/comm_plan.h"

#include <algorithm>

namespace kuberdma::validator {
namespace {

bool OneChoiceForAll(contract::Library l) {
  return l == contract::Library::kNccl || l == contract::Library::kRccl ||
         l == contract::Library::kNvshmem || l == contract::Library::kMooncake;
}

}  // namespace

PodCommPlan PlanPodComm(const std::vector<contract::Library>& libraries, const PodCommInputs& in) {
  PodCommPlan plan;
  contract::CommTopology t{.control_netdev = in.control_netdev,
                           .control_address = in.control_address,
                           .layout = in.layout,
                           .local_rank = in.local_rank};
  if (in.allocated) {
    contract::CommTopology at = t;
    at.hcas = contract::CommHcasOf(*in.allocated);
    at.control_address.clear();
    at.local_rank.reset();
    if (auto all = contract::PlanForAll(libraries, at)) {
      for (const auto& e : *all) plan.at_allocate.insert(e.vars.begin(), e.vars.end());
    }
  }
  if (!in.tables.empty()) {
    PodGids gids = OwnGids(in.tables, in.own_ipv4);
    plan.notes = gids.notes;
    bool strict = std::any_of(libraries.begin(), libraries.end(), OneChoiceForAll);
    if (gids.hcas.empty() || (!gids.why_not.empty() && strict)) {
      plan.why_not = gids.why_not;
      return plan;
    }
    t.hcas = gids.hcas;
    t.roce_range = gids.roce_range;
  } else if (in.allocated) {
    t.hcas = contract::CommHcasOf(*in.allocated);
  } else {
    plan.why_not =
        "no HCA to tell the libraries about: no RoCE port has a GID of this pod's addresses and "
        "KUBERDMA_HCAS is not set (rdma-device-plugin gives it with the HCAs)";
    return plan;
  }
  for (auto& h : t.hcas) {
    if (auto it = in.nearest_gpu.find(h.name); it != in.nearest_gpu.end())
      h.nearest_gpu = it->second;
  }
  auto all = contract::PlanForAll(libraries, t);
  if (!all) {
    plan.why_not = all.error().message();
    return plan;
  }
  plan.libraries = std::move(*all);
  return plan;
}

std::string FormatCommExports(const PodCommPlan& plan,
                              const std::function<const char*(const char*)>& getenv,
                              std::vector<std::string>* kept) {
  std::string out;
  for (const auto& lib : plan.libraries) {
    for (const auto& [name, value] : lib.vars) {
      const char* now = getenv(name.c_str());
      auto ours = plan.at_allocate.find(name);
      bool pod_spec =
          now != nullptr && *now != '\0' && (ours == plan.at_allocate.end() || ours->second != now);
      if (pod_spec && std::string(now) != value) {
        if (kept != nullptr) kept->push_back(name + "=" + now + ": set by the pod spec, kept");
        continue;
      }
      out += "export " + name + "=" + ShellQuote(value) + "\n";
    }
  }
  return out;
}

}  // namespace kuberdma::validator
