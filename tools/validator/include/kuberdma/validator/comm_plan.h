// SPDX-License-Identifier: Apache-2.0
// `rdma-validate --env LIBS`: in the pod, once the CNI has given it its addresses, what each
// communication library is told (contract/comm_env.h), with what only the pod knows: its own RoCE
// GIDs (gid_env.h), its control interface's address (NIXL's side channel), the GPU each HCA sits
// beside (one process per GPU). Printed as `export` lines for eval; a variable the pod spec set is
// left as it is.
//
//   PodCommPlan plan = PlanPodComm({Library::kUcx}, inputs);
//   std::fputs(FormatCommExports(plan, getenv, &kept).c_str(), stdout);
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/contract/comm_env.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/validator/gid_env.h"

namespace kuberdma::validator {

struct PodCommInputs {
  std::vector<GidTable> tables;  // each RoCE port's GID table as the pod sees it (none on IB)
  std::vector<std::string> own_ipv4;
  std::optional<std::vector<contract::HcaInfo>> allocated;  // KUBERDMA_HCAS, when set
  std::string control_netdev = "eth0";
  std::string control_address;
  contract::ProcessLayout layout = contract::ProcessLayout::kOnePerGpu;
  std::optional<int> local_rank;
  std::map<std::string, int> nearest_gpu;  // HCA name -> the CUDA index of the GPU beside it
};

struct PodCommPlan {
  std::vector<contract::LibraryEnv> libraries;
  std::vector<std::string> notes;
  // Why the libraries cannot be told the pod's HCAs and GIDs: no HCA has a GID of the pod's
  // addresses, or one GID choice for every HCA (NCCL, NVSHMEM, Mooncake) cannot be its own.
  std::string why_not;
  // The variables the allocation alone gives (rdma-device-plugin's Allocate), to tell them from
  // the pod spec's.
  std::map<std::string, std::string> at_allocate;
};

PodCommPlan PlanPodComm(const std::vector<contract::Library>& libraries, const PodCommInputs& in);

// `plan`'s variables as `export NAME='value'` lines for eval (values quoted as ShellQuote does),
// except each one `getenv` already has a value for that is not the allocation's: the pod spec set
// it, and that stands (said in `kept`, "UCX_TLS=tcp: set by the pod spec, kept").
std::string FormatCommExports(const PodCommPlan& plan,
                              const std::function<const char*(const char*)>& getenv,
                              std::vector<std::string>* kept);

}  // namespace kuberdma::validator
