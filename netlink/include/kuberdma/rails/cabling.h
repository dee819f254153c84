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
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::rails {

struct RailNeighbor {
  int rail = 0;  // 1-based
  std::string hca;
  std::string netdev;
  std::optional<lldp::Neighbor> neighbor;  // nothing heard (a TTL of 0: it said it is gone)
  // Its netdev was listened on (HearEthernet): without a neighbour, it heard nothing for the whole
  // wait. False when a pod holds the netdev (its frames go to the pod) or it was not asked.
  bool listened = false;
  // An InfiniBand rail: its neighbour is asked with an SMP out of `port` (smp.h), not heard by
  // LLDP on `netdev` (which it may lack).
  bool infiniband = false;
  int port = 1;
  std::string pci_address;  // the rail's PCI function (an SR-IOV PF's, where it is one)
  // A VF of the rail's PF that is away from the host (NoteVfTenants): its LLDPDUs reach the PF's
  // netdev as if the switch had sent them, so the rail is not listened on while it is away.
  std::string vf_away;
};

// The rails whose neighbour can be asked, in rail order: each rail's HCA (not the node's own NIC)
// with an Ethernet port and a netdev (LLDP on it), or an InfiniBand port (an SMP out of it).
std::vector<RailNeighbor> CablingRails(const std::vector<sysfs::Hca>& hcas, const NodeRoles& roles);

// Fills `vf_away` of each Ethernet rail whose PF (its `pci_address`) has a VF bound to a driver
// with no netdev on the host (in a pod, or given to a VM through vfio): the VF's frames to an
// LLDP group are switched to the PF inside the NIC (seen on igb: also with a forged source MAC
// and spoof-check on), so nothing on the PF's netdev can be told from the switch's word. Unbound
// VFs send nothing and do not count. Reads sysfs only; a PF it cannot read is left unmarked.
void NoteVfTenants(const sysfs::SysfsRoot& root, std::vector<RailNeighbor>& rails);

// Hears each Ethernet rail of `rails` (not `infiniband`) by LLDP on its netdev for up to `wait`
// (lldp.h's Listen, `until` and `stop_fd` as there), filling its neighbour and `listened`;
// InfiniBand rails are left for smp::HearInfiniband. The listener's error when it could not listen;
// no Ethernet rail is success.
Result<void> HearEthernet(lldp::LldpListener& listener, std::vector<RailNeighbor>& rails,
                          std::chrono::milliseconds wait, lldp::ListenUntil until,
                          int stop_fd = -1);

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
// ending alphanumeric. A name that is one already is kept, unless it ends like a changed one
// ("-" and 8 lower-case hex digits); any other has its other characters made '-', is cut to 54,
// and ends in "-" and a 32-bit FNV-1a hash of the original. So a kept value is never a changed
// one's, and two different names share a value only when both were changed to the same prefix
// and their hashes collide (docs/fabric.md#topology-labels-for-schedulers). "" for "".
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
