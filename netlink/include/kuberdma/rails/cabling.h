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

#include <optional>
#include <string>
#include <vector>

#include "kuberdma/lldp/lldp.h"

namespace kuberdma::rails {

struct RailNeighbor {
  int rail = 0;  // 1-based
  std::string hca;
  std::string netdev;
  std::optional<lldp::Neighbor> neighbor;  // nothing heard
};

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

}  // namespace kuberdma::rails
