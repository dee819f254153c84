// SPDX-License-Identifier: Apache-2.0
// The NCCL variables that make NCCL pick this pod's own GID on HCAs shared with other pods
// (`rdma-validate --nccl-env`). On a shared RoCE HCA every pod's addresses are entries of one
// GID table; NCCL's automatic choice takes the first RoCE v2 entry of the address family, which
// can be another pod's. NCCL can be told in two ways, each valid only under a condition:
//   - NCCL_IB_GID_INDEX=N: one index for every HCA, so only when the pod's entry has index N on
//     every HCA it uses;
//   - NCCL_IB_ADDR_RANGE=CIDR: the first entry inside the range, so only when a prefix holds all
//     the pod's addresses and none of another pod's entries on those HCAs.
// When neither holds nothing NCCL reads can choose the pod's entries: the plan says so and why.
//
//   auto plan = PlanNcclGidEnv(tables, netns::NamespaceIpv4());
//   if (plan.ok) for (auto& [k, v] : plan.vars) printf("export %s=%s\n", k.c_str(), v.c_str());
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kuberdma/contract/comm_env.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::validator {

// One RoCE HCA port's GID table as this pod sees it.
struct GidTable {
  std::string hca;
  uint32_t port = 1;
  std::vector<sysfs::Gid> gids;
};

// The pod's own RoCE v2 GIDs: each HCA with an entry of the pod's addresses (its index and
// address), and the range that holds them and no other pod's entry when the indices differ.
struct PodGids {
  std::vector<contract::CommHca> hcas;
  std::string roce_range;          // "" when the indices agree, or when no prefix can
  std::vector<std::string> notes;  // each HCA's own index, HCAs without one
  // Why no variable of a library that takes one index or one range can pick the pod's GIDs (none
  // has an entry of the pod's, or the indices differ and every prefix holds another pod's).
  std::string why_not;
};
PodGids OwnGids(const std::vector<GidTable>& tables, const std::vector<std::string>& own_ipv4);

struct GidEnvPlan {
  bool ok = false;
  std::vector<std::pair<std::string, std::string>> vars;  // in the order to set them
  std::vector<std::string> notes;  // what was found: each HCA's own index, skipped HCAs
  std::string why_not;             // !ok: why no variable can make NCCL choose right
};

// The plan for a pod whose addresses are `own_ipv4`: NCCL's GID variables (contract/comm_env.h)
// for OwnGids'. HCAs without an entry of the pod's are not its (they are left out of NCCL_IB_HCA).
GidEnvPlan PlanNcclGidEnv(const std::vector<GidTable>& tables,
                          const std::vector<std::string>& own_ipv4);

// `value` as one word for a POSIX shell, whatever it contains: single quotes, each ' written as
// '\'' ("a'b" -> 'a'\''b'), so `eval` of the output never runs what a name holds.
std::string ShellQuote(std::string_view value);

// The plan's variables as `export NAME='value'` lines, for `eval`.
std::string FormatExports(const GidEnvPlan& plan);

// The smallest IPv4 prefix holding every address of `ipv4` ("10.9.16.0/23"); "" for none or one
// that does not parse.
std::string CoveringPrefix(const std::vector<std::string>& ipv4);

}  // namespace kuberdma::validator
