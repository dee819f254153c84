// SPDX-License-Identifier: Apache-2.0
// Which HCA is which physical rail, and which HCAs carry the node's own traffic and must never
// leave the host. Judged from one snapshot of the host namespace (links, addresses, routes: three
// netlink dumps) so that every HCA is judged alike and cheaply; the judging itself is pure.
//
//   KUBERDMA_ASSIGN_OR_RETURN(HostNet net, ReadHostNet(links, addrs, host));
//   NodeRoles roles = JudgeHcas(hcas, net, node_config);
//   if (const HcaRole* r = roles.Find(hca); r && !r->node_own.empty()) refuse(r->node_own);
//
// Rails: with a declaration (node_config.h), rail i is the i-th declared HCA and every other HCA
// is no rail. Without one, the physical functions that are not the node's own are numbered in
// PCI-address order (rail 1 the lowest address); an SR-IOV VF or a scalable function is on its
// PF's rail; a software HCA is on none.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/rails/node_config.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::rails {

// The host namespace as the judging needs it.
struct HostNet {
  std::vector<link::LinkInfo> links;
  std::vector<std::pair<int, link::IpPrefix>> addresses;  // (ifindex, address)
  std::vector<link::Route> routes;                        // the main table
};

// Three dumps of `host` (links, addresses, routes). Errors from the seams, wrapped.
Result<HostNet> ReadHostNet(link::LinkOps& links, link::AddrOps& addrs, const netns::NetNs& host);

struct HcaRole {
  int rail = 0;  // 1-based; 0: no rail
  // Why this HCA's netdev carries the node's own traffic ("carries the node's default route via
  // 10.0.0.1 on eno1np0"), or "" when it may leave the host.
  std::string node_own;
  // Why it has no rail, where it has none ("not one of the node's declared rails ...").
  std::string no_rail;
};

struct NodeRoles {
  std::map<std::string, HcaRole> by_hca;  // keyed by HCA name
  // Declared rails that matched no HCA ("rail 3: ens3f0np0 matches no HCA"), for the logs.
  std::vector<std::string> unmatched;
  const HcaRole* Find(const std::string& hca_name) const;
  // The HCA on `rail`, or "" when none is.
  std::string HcaOnRail(int rail) const;
};

// Judges every HCA of `hcas` (identity detail is enough) against the host's network and the
// node config. Pure.
NodeRoles JudgeHcas(const std::vector<sysfs::Hca>& hcas, const HostNet& net,
                    const NodeConfig& config);

// Whether `p` reaches beyond its link: not link-local, loopback or multicast. Only such addresses
// and routes say anything of the node's traffic, or travel with a routed rail.
bool IsRoutable(const link::IpPrefix& p);

// Whether `entry` (a declared rail: netdev, PCI address or HCA name) names `hca`.
bool NamesHca(const std::string& entry, const sysfs::Hca& hca);

}  // namespace kuberdma::rails
