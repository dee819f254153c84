// SPDX-License-Identifier: Apache-2.0
// Cabling judgements: each rail's LLDP neighbour against the config or the fleet's majority.
#include "kuberdma/rails/cabling.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "kuberdma/base/hash.h"
#include "kuberdma/sysfs/sriov.h"

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
                    (netdev.empty() || netdev == hca ? "" : ", " + netdev) + ")";
  if (seen.empty()) return who + ": no LLDP neighbour heard; expected " + expected;
  std::string where = seen_rail > 0 ? " (rail " + std::to_string(seen_rail) + "'s switch)" : "";
  return who + " is cabled to " + seen + where + ", not " + expected +
         (certain ? "" : " (uncertain)");
}

std::vector<RailNeighbor> CablingRails(const std::vector<sysfs::Hca>& hcas,
                                       const NodeRoles& roles) {
  std::vector<RailNeighbor> out;
  for (const auto& h : hcas) {
    const HcaRole* r = roles.Find(h.name);
    if (r == nullptr || r->rail == 0 || !r->node_own.empty() || h.ports.empty()) continue;
    const sysfs::Port& p = h.ports.front();
    if (p.link_layer == sysfs::LinkLayer::kEthernet && !h.netdevs.empty()) {
      out.push_back({.rail = r->rail,
                     .hca = h.name,
                     .netdev = h.netdevs.front(),
                     .pci_address = h.pci_address});
    } else if (p.link_layer == sysfs::LinkLayer::kInfiniBand) {
      out.push_back({.rail = r->rail,
                     .hca = h.name,
                     .netdev = h.netdevs.empty() ? "" : h.netdevs.front(),
                     .infiniband = true,
                     .port = static_cast<int>(p.number)});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rail < b.rail; });
  return out;
}

void NoteVfTenants(const sysfs::SysfsRoot& root, std::vector<RailNeighbor>& rails) {
  for (auto& r : rails) {
    r.vf_away.clear();
    if (r.infiniband || r.pci_address.empty()) continue;
    auto pf = sysfs::ReadSriovPf(root, r.pci_address);
    if (!pf || !*pf) continue;
    for (const auto& vf : (*pf)->vfs) {
      const std::string dir = "bus/pci/devices/" + vf;
      auto netdevs = root.ListDir(dir + "/net");
      if (root.Exists(dir + "/driver") && (!netdevs || netdevs->empty())) {
        r.vf_away = vf;
        break;
      }
    }
  }
}

Result<void> HearEthernet(lldp::LldpListener& listener, std::vector<RailNeighbor>& rails,
                          std::chrono::milliseconds wait, lldp::ListenUntil until, int stop_fd) {
  std::vector<std::string> netdevs;
  for (const auto& r : rails) {
    if (!r.infiniband && r.vf_away.empty()) netdevs.push_back(r.netdev);
  }
  if (netdevs.empty()) return {};
  KUBERDMA_ASSIGN_OR_RETURN(lldp::Heard heard, listener.Listen(netdevs, wait, until, stop_fd));
  for (auto& r : rails) {
    if (r.infiniband || !r.vf_away.empty()) continue;
    r.listened = !heard.absent.contains(r.netdev);
    if (auto it = heard.neighbors.find(r.netdev); it != heard.neighbors.end()) {
      r.neighbor = it->second;
    }
  }
  return {};
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

namespace {

bool LabelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}
bool Alnum(char c) { return LabelChar(c) && c != '-' && c != '_' && c != '.'; }

bool DnsSubdomain(std::string_view p) {
  if (p.empty() || p.size() > 253) return false;
  size_t start = 0;
  for (;;) {
    size_t dot = p.find('.', start);
    std::string_view part = p.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (part.empty() || part.size() > 63 || !Alnum(part.front()) || !Alnum(part.back()))
      return false;
    for (char c : part) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

bool ValidDnsSubdomain(std::string_view name) { return DnsSubdomain(name); }

bool ValidLabelValue(std::string_view v) {
  if (v.empty()) return true;
  return v.size() <= 63 && Alnum(v.front()) && Alnum(v.back()) &&
         std::all_of(v.begin(), v.end(), LabelChar);
}

bool ValidLabelKey(std::string_view k) {
  size_t slash = k.find('/');
  std::string_view name = slash == std::string_view::npos ? k : k.substr(slash + 1);
  if (slash != std::string_view::npos && !DnsSubdomain(k.substr(0, slash))) return false;
  return !name.empty() && ValidLabelValue(name);
}

namespace {

// Ends in "-" and 8 lower-case hex digits: the form LabelValue gives a name it had to change.
bool HashedForm(std::string_view v) {
  if (v.size() < 9 || v[v.size() - 9] != '-') return false;
  return std::all_of(v.end() - 8, v.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::string LabelValue(std::string_view name) {
  // A name already in the hashed form is hashed too, so that a switch named "leaf-1-49a0db64"
  // never takes the value "leaf:1" was given.
  if (ValidLabelValue(name) && !HashedForm(name)) return std::string(name);
  std::string v;
  for (char c : name) v += LabelChar(c) ? c : '-';
  while (!v.empty() && !Alnum(v.front())) v.erase(0, 1);
  v = v.substr(0, 63 - 9);  // room for "-" and the hash
  while (!v.empty() && !Alnum(v.back())) v.pop_back();
  return (v.empty() ? "" : v + "-") + ShortHash(name);
}

std::map<std::string, std::string> TopologyLabels(const std::vector<RailNeighbor>& rails) {
  std::map<std::string, std::string> out;
  std::set<std::string> leaves;
  for (const auto& r : rails) {
    if (!r.neighbor || r.rail <= 0) continue;
    std::string leaf = r.neighbor->Switch();
    out[std::string(kTopologyLabelPrefix) + "rail-" + std::to_string(r.rail) + "-leaf"] =
        LabelValue(leaf);
    leaves.insert(leaf);
  }
  if (leaves.empty()) return out;
  std::string joined;
  for (const auto& l : leaves) joined += l + "\n";
  out[std::string(kTopologyLabelPrefix) + "block"] =
      leaves.size() == 1 ? LabelValue(*leaves.begin()) : "b-" + ShortHash(joined);
  return out;
}

}  // namespace kuberdma::rails
