// SPDX-License-Identifier: Apache-2.0
// SimFleet: node namespaces cabled per rail to bridges in a fabric namespace.
#include "kuberdma/sim/sim_fleet.h"

#include <unistd.h>

#include <cstdlib>

namespace kuberdma::sim {

namespace {

constexpr uint32_t kPodMtu = 9000;     // what the NADs set
constexpr uint32_t kSwitchMtu = 9216;  // a switch takes jumbo frames

}  // namespace

Result<std::unique_ptr<SimFleet>> SimFleet::Create(int nodes, int rails) {
  if (nodes < 1 || nodes > 250 || rails < 1 || rails > 16) {
    return Fail(ErrorCode::kInvalidArgument, "a simulated fleet has 1-250 nodes and 1-16 rails");
  }
  // "krt-<pid>-" marks it for RemoveStaleNamespaces should this process be killed.
  std::string prefix =
      "krt-" + std::to_string(::getpid()) + "-f" + std::to_string(std::rand() % 100000);
  std::unique_ptr<SimFleet> fleet(new SimFleet(prefix, rails));
  KUBERDMA_TRY(fleet->Build(nodes));  // on failure the destructor removes what was made
  return fleet;
}

Result<void> SimFleet::Build(int nodes) {
  names_.push_back(prefix_ + "-fab");
  KUBERDMA_ASSIGN_OR_RETURN(netns::NetNs fab, testing::CreateNamed(names_.back()));
  fabric_ = std::move(fab);
  for (int r = 1; r <= rails_; ++r) {
    KUBERDMA_TRY(net_.CreateLink(*fabric_, "rail" + std::to_string(r), "bridge"));
    KUBERDMA_TRY(Up(*fabric_, "rail" + std::to_string(r), kSwitchMtu));
  }
  for (int n = 1; n <= nodes; ++n) {
    names_.push_back(prefix_ + "-n" + std::to_string(n));
    KUBERDMA_ASSIGN_OR_RETURN(netns::NetNs ns, testing::CreateNamed(names_.back()));
    nodes_.push_back(std::move(ns));
    KUBERDMA_TRY(Up(nodes_.back(), "lo", 0));
    for (int r = 1; r <= rails_; ++r) KUBERDMA_TRY(Cable(n, r));
  }
  return {};
}

Result<void> SimFleet::Cable(int node, int rail) {
  const netns::NetNs& ns = Node(node);
  std::string port = SwitchPort(node, rail);
  KUBERDMA_TRY(net_.CreateVeth(ns, Ifname(rail), *fabric_, port));
  KUBERDMA_TRY(net_.SetMaster(*fabric_, port, "rail" + std::to_string(rail)));
  KUBERDMA_TRY(Up(*fabric_, port, kSwitchMtu));
  KUBERDMA_TRY(Up(ns, Ifname(rail), kPodMtu));
  KUBERDMA_ASSIGN_OR_RETURN(link::LinkInfo l, links_.GetByName(ns, Ifname(rail)));
  KUBERDMA_ASSIGN_OR_RETURN(link::IpPrefix ip, link::ParsePrefix(Address(node, rail) + "/24"));
  return addrs_.AddAddress(ns, l.ifindex, ip);
}

Result<void> SimFleet::Up(const netns::NetNs& ns, const std::string& name, uint32_t mtu) {
  KUBERDMA_ASSIGN_OR_RETURN(link::LinkInfo l, links_.GetByName(ns, name));
  link::LinkChange c{.up = true};
  if (mtu > 0) c.mtu = mtu;
  return links_.Change(ns, l.ifindex, c);
}

SimFleet::~SimFleet() {
  nodes_.clear();
  fabric_.reset();
  for (auto it = names_.rbegin(); it != names_.rend(); ++it) (void)testing::DeleteNamed(*it);
}

std::string SimFleet::Ifname(int rail) { return "net" + std::to_string(rail); }

std::string SimFleet::Address(int node, int rail) {
  return "10.10." + std::to_string(rail) + "." + std::to_string(node);
}

std::string SimFleet::Expect() const {
  std::string s;
  for (int r = 1; r <= rails_; ++r) s += (r > 1 ? "," : "") + Ifname(r);
  return s;
}

std::string SimFleet::SwitchPort(int node, int rail) const {
  return "n" + std::to_string(node) + "r" + std::to_string(rail);
}

Result<void> SimFleet::LimitRate(int node, int rail, uint64_t bits_per_second) {
  if (node < 1 || node > nodes() || rail < 1 || rail > rails_) {
    return Fail(ErrorCode::kInvalidArgument,
                "no node " + std::to_string(node) + " rail " + std::to_string(rail));
  }
  KUBERDMA_TRY(net_.SetRateLimit(Node(node), Ifname(rail), bits_per_second));
  return net_.SetRateLimit(*fabric_, SwitchPort(node, rail), bits_per_second);
}

Result<void> SimFleet::Lose(int node, int rail, double percent) {
  if (node < 1 || node > nodes() || rail < 1 || rail > rails_) {
    return Fail(ErrorCode::kInvalidArgument,
                "no node " + std::to_string(node) + " rail " + std::to_string(rail));
  }
  KUBERDMA_TRY(net_.SetLoss(Node(node), Ifname(rail), percent));
  return net_.SetLoss(*fabric_, SwitchPort(node, rail), percent);
}

}  // namespace kuberdma::sim
