// SPDX-License-Identifier: Apache-2.0
// A simulated fleet for the acceptance demo and tests: K node namespaces, each holding the M rail
// interfaces a pod on that node gets from the rdma CNI (net1..netM, jumbo MTU, up, addressed
// 10.10.<rail>.<node>/24 as per-rail host-local IPAM would), cabled rail by rail to one bridge per
// rail in a fabric namespace, the way a rail-optimised fabric wires HCA i of every node to leaf i.
// One (node, rail) can be made slow or lossy on both directions of its cable. Everything it creates
// is removed by its destructor.
//
//   KUBERDMA_ASSIGN_OR_RETURN(auto fleet, sim::SimFleet::Create(4, 2));
//   KUBERDMA_TRY(fleet->LimitRate(3, 2, 1'000'000'000));   // node 3's rail 2 at 1 Gbit/s
//   testing::SpawnIn(fleet->Node(1), {"rdma-validate", ...}, ...);
//   KUBERDMA_TRY(fleet->AnnounceLldp(std::pair{3, 2}));    // node 3's rail 2 on rail 3's leaf
//
// Each rail's bridge is a leaf switch, "leaf-<rail>"; AnnounceLldp has the leaves send LLDP on
// every port, as a switch's agent does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/testing/test_net.h"

namespace kuberdma::sim {

class SimFleet {
 public:
  // Nodes and rails are 1-based everywhere, as an admin counts them.
  static Result<std::unique_ptr<SimFleet>> Create(int nodes, int rails);
  ~SimFleet();
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;

  int nodes() const { return static_cast<int>(nodes_.size()); }
  int rails() const { return rails_; }
  const netns::NetNs& Node(int node) const { return nodes_.at(static_cast<size_t>(node - 1)); }
  // "net<rail>": the pod's name for its rail interface.
  static std::string Ifname(int rail);
  // "10.10.<rail>.<node>".
  static std::string Address(int node, int rail);
  // "net1,net2,...": every rail, as rdma-validate --expect takes them.
  std::string Expect() const;

  // Makes node `node`'s cable on rail `rail` carry at most `bits_per_second` each way.
  Result<void> LimitRate(int node, int rail, uint64_t bits_per_second);
  // Makes it drop `percent` of the packets each way. kUnsupported without sch_netem.
  Result<void> Lose(int node, int rail, double percent);

  // Bytes node `node`'s rail interface has sent and received (its IFLA_STATS64 counters).
  Result<std::pair<uint64_t, uint64_t>> Bytes(int node, int rail);

  // "leaf-<rail>": the switch a rail's bridge stands for.
  static std::string Leaf(int rail);
  // Starts the leaves' LLDP: every half second, on every port, a frame naming the leaf (system
  // name and chassis ID) and the port ("swp<node>"), MTU 9216. `miscabled` (node, rail) is a
  // cable plugged into the next rail's leaf instead: its frames name that leaf, while its traffic
  // still reaches its own rail's peers (as a spine would route it). Stopped by the destructor,
  // which has every port send a shutdown LLDPDU (TTL 0) last, as a switch's agent (lldpd) does.
  Result<void> AnnounceLldp(std::optional<std::pair<int, int>> miscabled = std::nullopt);

 private:
  SimFleet(std::string prefix, int rails) : prefix_(std::move(prefix)), rails_(rails) {}
  Result<void> Build(int nodes);
  Result<void> Cable(int node, int rail);
  Result<void> Up(const netns::NetNs& ns, const std::string& name, uint32_t mtu);
  std::string SwitchPort(int node, int rail) const;

  // A port and the frame it sends: the leaf's word, and its shutdown LLDPDU.
  struct Announced {
    int ifindex = 0;
    std::vector<uint8_t> frame, shutdown;
  };
  void Announce(const std::stop_token& stop, int fd, const std::vector<Announced>& ports) const;

  std::string prefix_;
  int rails_;
  std::jthread lldp_;  // the leaves' LLDP (AnnounceLldp); stopped before the namespaces go
  std::vector<std::string> names_;  // named namespaces, deleted by the destructor
  std::optional<netns::NetNs> fabric_;
  std::vector<netns::NetNs> nodes_;
  link::NetlinkLinkOps links_;
  link::NetlinkAddrOps addrs_;
  testing::TestNet net_{links_};
};

}  // namespace kuberdma::sim
