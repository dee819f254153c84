// SPDX-License-Identifier: Apache-2.0
// Is each rail cabled to its switch? A rail-optimised fabric puts rail i of every node on leaf i;
// one swapped or misplugged cable costs a job a third of its bandwidth and looks healthy
// everywhere else. Judged from each rail's LLDP neighbour (lldp.h) against what the node config
// says (railSwitches) or, across a fleet, against the switch most nodes' rail i reaches.
//
//   std::vector<RailNeighbor> mine = ...;  // rail, HCA, netdev, what LLDP heard
//   for (const auto& f : JudgeNodeCabling(mine, config.rail_switches)) ...
//   for (const auto& f : JudgeFleetCabling(fleet)) ...   // "rail 3 of gpu-17 is on rail 5's leaf"
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/lldp/lldp.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::rails {

struct RailNeighbor {
  int rail = 0;  // 1-based
  std::string hca;
  std::string netdev;
  std::optional<lldp::Neighbor> neighbor;  // nothing heard
  // An InfiniBand rail: its neighbour is asked with an SMP out of `port` (smp.h), not heard by
  // LLDP on `netdev` (which it may lack).
  bool infiniband = false;
  int port = 1;
};

// The rails whose neighbour can be asked, in rail order: each rail's HCA (not the node's own NIC)
// with an Ethernet port and a netdev (LLDP on it), or an InfiniBand port (an SMP out of it).
std::vector<RailNeighbor> CablingRails(const std::vector<sysfs::Hca>& hcas, const NodeRoles& roles);

// Hears each Ethernet rail of `rails` (not `infiniband`) by LLDP on its netdev for up to `wait`
// (lldp.h's Listen, `stop_fd` as there), filling its neighbour; InfiniBand rails are left for
// smp::HearInfiniband. The listener's error when it could not listen; no Ethernet rail is success.
Result<void> HearEthernet(lldp::LldpListener& listener, std::vector<RailNeighbor>& rails,
                          std::chrono::milliseconds wait, int stop_fd = -1);

struct CablingFinding {
  std::string node;  // "" for one node's own judgement
  int rail = 0;
  std::string hca;
  std::string netdev;
  std::string seen;      // the switch it reaches ("" when nothing was heard)
  std::string expected;  // the switch it should reach
  int seen_rail = 0;     // the rail whose switch `seen` is, when it is another rail's; else 0
  bool certain = true;   // false: a weak majority, or a guess from duplicates
  std::string Message() const;
};

// One node: each rail against `expected` (railSwitches, rail order). Without an expectation, two
// rails on one switch while the node's other rails each have their own is reported, uncertain.
std::vector<CablingFinding> JudgeNodeCabling(const std::vector<RailNeighbor>& rails,
                                             const std::vector<std::string>& expected);

struct NodeCabling {
  std::string node;
  std::vector<RailNeighbor> rails;
};

// A fleet: rail i's switch is the one most nodes' rail i reaches (certain when more than half of
// the nodes that heard one agree); each node whose rail i reaches another switch is a finding,
// naming the rail whose switch it reached. Nodes that heard nothing on a rail are not counted.
std::vector<CablingFinding> JudgeFleetCabling(const std::vector<NodeCabling>& fleet);

// ---- Topology labels for schedulers (Kueue's Topology levels, Volcano's network topology) ----

inline constexpr char kTopologyLabelPrefix[] = "topology.kube-rdma.io/";

// A Kubernetes label value naming `name`: at most 63 characters of [A-Za-z0-9._-], starting and
// ending alphanumeric. A name that is one already is kept; otherwise other characters become '-'
// and a name too long (or changed) ends in a hash of the original, so that two switches never
// share a value. "" for "".
std::string LabelValue(std::string_view name);
// Kubernetes' label syntax: a value as above (or empty); a key an optional DNS-subdomain prefix
// (at most 253) and '/', then a name of at most 63.
bool ValidLabelValue(std::string_view v);
bool ValidLabelKey(std::string_view k);
// A DNS subdomain (RFC 1123, lower case, at most 253): what a node's name is.
bool ValidDnsSubdomain(std::string_view name);

// A node's labels from its rails' neighbours: "<prefix>rail-<n>-leaf" for each rail heard, and
// "<prefix>block": the set of switches its rails reach (the switch itself when one; else "b-" and
// a hash of the sorted names), so that nodes cabled to the same leaves share a block. Empty when
// no rail was heard.
std::map<std::string, std::string> TopologyLabels(const std::vector<RailNeighbor>& rails);

}  // namespace kuberdma::rails
