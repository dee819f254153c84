// SPDX-License-Identifier: Apache-2.0
// Cabling judgements: each rail's LLDP neighbour against the config or the fleet's majority.
#include "kuberdma/rails/cabling.h"

#include <algorithm>
#include <map>

namespace kuberdma::rails {
namespace {

std::string SwitchOf(const RailNeighbor& r) { return r.neighbor ? r.neighbor->Switch() : ""; }

// The rail (1-based) whose expected switch is `sw`, or 0.
int RailOf(const std::map<int, std::string>& expected, const std::string& sw) {
  for (const auto& [rail, name] : expected) {
    if (name == sw) return rail;
  }
  return 0;
}

CablingFinding Finding(const std::string& node, const RailNeighbor& r, std::string expected,
                       const std::map<int, std::string>& by_rail, bool certain) {
  std::string seen = SwitchOf(r);
  return {.node = node,
          .rail = r.rail,
          .hca = r.hca,
          .netdev = r.netdev,
          .seen = seen,
          .expected = std::move(expected),
          .seen_rail = RailOf(by_rail, seen),
          .certain = certain};
}

// Two or more rails on one switch while the others are each on their own: the odd ones out.
std::vector<CablingFinding> SharedSwitches(const std::vector<RailNeighbor>& rails) {
  std::map<std::string, std::vector<const RailNeighbor*>> by_switch;
  for (const auto& r : rails) {
    if (r.neighbor) by_switch[SwitchOf(r)].push_back(&r);
  }
  std::vector<CablingFinding> out;
  if (by_switch.size() < 2) return out;  // one leaf for every rail: not a rail-optimised fabric
  for (const auto& [sw, on] : by_switch) {
    if (on.size() < 2) continue;
    for (const RailNeighbor* r : on) {
      out.push_back(Finding("", *r, "a switch of its own", {}, false));
    }
  }
  return out;
}

}  // namespace

std::string CablingFinding::Message() const {
  std::string who = (node.empty() ? "" : node + " ") + "rail " + std::to_string(rail) + " (" + hca +
                    (netdev.empty() ? "" : ", " + netdev) + ")";
  if (seen.empty()) return who + ": no LLDP neighbour heard; expected " + expected;
  std::string where = seen_rail > 0 ? " (rail " + std::to_string(seen_rail) + "'s switch)" : "";
  return who + " is cabled to " + seen + where + ", not " + expected +
         (certain ? "" : " (uncertain)");
}

std::vector<CablingFinding> JudgeNodeCabling(const std::vector<RailNeighbor>& rails,
                                             const std::vector<std::string>& expected) {
  if (expected.empty()) return SharedSwitches(rails);
  std::map<int, std::string> by_rail;
  for (size_t i = 0; i < expected.size(); ++i) by_rail[static_cast<int>(i) + 1] = expected[i];
  std::vector<CablingFinding> out;
  for (const auto& r : rails) {
    auto want = by_rail.find(r.rail);
    if (want == by_rail.end() || !r.neighbor || SwitchOf(r) == want->second) continue;
    out.push_back(Finding("", r, want->second, by_rail, true));
  }
  return out;
}

std::vector<CablingFinding> JudgeFleetCabling(const std::vector<NodeCabling>& fleet) {
  // rail -> switch -> nodes that reach it
  std::map<int, std::map<std::string, int>> votes;
  std::map<int, int> heard;
  for (const auto& n : fleet) {
    for (const auto& r : n.rails) {
      if (!r.neighbor || r.rail <= 0) continue;
      ++votes[r.rail][SwitchOf(r)];
      ++heard[r.rail];
    }
  }
  std::map<int, std::string> majority;
  std::map<int, bool> strong;
  for (const auto& [rail, by_switch] : votes) {
    auto top = std::max_element(by_switch.begin(), by_switch.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
    majority[rail] = top->first;
    strong[rail] = 2 * top->second > heard[rail];
  }
  std::vector<CablingFinding> out;
  for (const auto& n : fleet) {
    for (const auto& r : n.rails) {
      if (!r.neighbor || r.rail <= 0 || SwitchOf(r) == majority[r.rail]) continue;
      out.push_back(Finding(n.node, r, majority[r.rail], majority, strong[r.rail]));
    }
  }
  return out;
}

}  // namespace kuberdma::rails
