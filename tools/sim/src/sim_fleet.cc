// SPDX-License-Identifier: Apache-2.0
// SimFleet: node namespaces cabled per rail to bridges in a fabric namespace.
#include "kuberdma/sim/sim_fleet.h"

#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/lldp/lldp.h"

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
  if (lldp_.joinable()) {
    lldp_.request_stop();
    lldp_.join();
  }
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

Result<std::pair<uint64_t, uint64_t>> SimFleet::Bytes(int node, int rail) {
  if (node < 1 || node > nodes() || rail < 1 || rail > rails_) {
    return Fail(ErrorCode::kInvalidArgument,
                "no node " + std::to_string(node) + " rail " + std::to_string(rail));
  }
  KUBERDMA_ASSIGN_OR_RETURN(link::LinkInfo l, links_.GetByName(Node(node), Ifname(rail)));
  return std::pair{l.tx_bytes, l.rx_bytes};
}

std::string SimFleet::Leaf(int rail) { return "leaf-" + std::to_string(rail); }

Result<void> SimFleet::AnnounceLldp(std::optional<std::pair<int, int>> miscabled) {
  if (lldp_.joinable()) return Fail(ErrorCode::kAlreadyExists, "the leaves already send LLDP");
  // Every port's frames, built once.
  std::vector<Announced> frames;
  for (int n = 1; n <= nodes(); ++n) {
    for (int r = 1; r <= rails_; ++r) {
      int leaf = miscabled == std::pair{n, r} ? r % rails_ + 1 : r;
      KUBERDMA_ASSIGN_OR_RETURN(link::LinkInfo port, links_.GetByName(*fabric_, SwitchPort(n, r)));
      lldp::Neighbor said{.chassis_id = Leaf(leaf),
                          .port_id = "swp" + std::to_string(n),
                          .system_name = Leaf(leaf),
                          .ttl_s = 120,
                          .max_frame_size = static_cast<int>(kSwitchMtu) + 18};
      const std::array<uint8_t, 6> mac = {0x02,
                                          0x4c,
                                          0x44,
                                          static_cast<uint8_t>(leaf),
                                          static_cast<uint8_t>(n),
                                          static_cast<uint8_t>(r)};
      lldp::Neighbor gone = said;
      gone.ttl_s = 0;
      frames.push_back({.ifindex = port.ifindex,
                        .frame = lldp::EncodeFrame(said, mac),
                        .shutdown = lldp::EncodeFrame(gone, mac)});
    }
  }
  UniqueFd fd;
  int err = 0;
  KUBERDMA_TRY(fabric_->RunIn([&] {
    fd.Reset(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
    err = errno;
  }));
  if (!fd.valid()) return FailErrno(err, "open an AF_PACKET socket in the fabric namespace");
  lldp_ = std::jthread([this, frames = std::move(frames), fd = std::move(fd)](std::stop_token st) {
    Announce(st, fd.get(), frames);
  });
  return {};
}

void SimFleet::Announce(const std::stop_token& stop, int fd,
                        const std::vector<Announced>& ports) const {
  auto send = [fd](int ifindex, const std::vector<uint8_t>& frame) {
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = ifindex;
    to.sll_halen = 6;
    std::copy(std::begin(lldp::kNearestBridge), std::end(lldp::kNearestBridge), to.sll_addr);
    (void)::sendto(fd, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  };
  while (!stop.stop_requested()) {
    for (const auto& p : ports) send(p.ifindex, p.frame);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (const auto& p : ports) send(p.ifindex, p.shutdown);  // the leaves go: they say so
}

}  // namespace kuberdma::sim
