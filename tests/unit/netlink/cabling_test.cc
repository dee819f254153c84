// SPDX-License-Identifier: Apache-2.0
// Cabling judgements: a node against its railSwitches, and a fleet against its majority.
#include "kuberdma/rails/cabling.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/lldp/lldp.h"

namespace kuberdma::rails {
namespace {

RailNeighbor On(int rail, const std::string& sw, const std::string& port = "swp1") {
  RailNeighbor r{.rail = rail,
                 .hca = "mlx5_" + std::to_string(rail - 1),
                 .netdev = "ens" + std::to_string(rail) + "f0np0"};
  if (!sw.empty())
    r.neighbor = lldp::Neighbor{.chassis_id = "c-" + sw, .port_id = port, .system_name = sw};
  return r;
}

NodeCabling Node(const std::string& name, const std::vector<std::string>& switches) {
  NodeCabling n{.node = name};
  for (size_t i = 0; i < switches.size(); ++i)
    n.rails.push_back(On(static_cast<int>(i) + 1, switches[i]));
  return n;
}

TEST_CASE("A node's rail on another rail's switch is named against railSwitches") {
  std::vector<RailNeighbor> rails = {On(1, "leaf-1"), On(2, "leaf-3"), On(3, "leaf-2"), On(4, "")};
  auto f = JudgeNodeCabling(rails, {"leaf-1", "leaf-2", "leaf-3", "leaf-4"});
  REQUIRE(f.size() ==
          2);  // rails 2 and 3 crossed; rail 4 heard nothing, which is not a cabling fault
  CHECK(f[0].Message() ==
        "rail 2 (mlx5_1, ens2f0np0) is cabled to leaf-3 (rail 3's switch), not leaf-2");
  CHECK(f[0].certain);
  CHECK(f[1].seen_rail == 2);
  CHECK(JudgeNodeCabling({On(1, "leaf-1"), On(2, "leaf-2")}, {"leaf-1", "leaf-2"}).empty());
}

TEST_CASE("Without railSwitches, two rails on one leaf among rails on their own are uncertain") {
  auto f = JudgeNodeCabling({On(1, "leaf-1"), On(2, "leaf-1"), On(3, "leaf-3")}, {});
  REQUIRE(f.size() == 2);
  CHECK_FALSE(f[0].certain);
  CHECK_THAT(f[0].Message(), Catch::Contains("(uncertain)"));
  // Every rail on one switch: a small fabric, not a miscabling.
  CHECK(JudgeNodeCabling({On(1, "tor"), On(2, "tor")}, {}).empty());
}

TEST_CASE("A fleet's majority names the miscabled rail and the rail whose leaf it reached") {
  std::vector<NodeCabling> fleet;
  for (int i = 1; i <= 16; ++i) {
    fleet.push_back(
        Node("gpu-" + std::to_string(i), {"leaf-1", "leaf-2", "leaf-3", "leaf-4", "leaf-5"}));
  }
  fleet[16 - 1 + 1 - 1].rails[2] = On(3, "leaf-5");  // gpu-16's rail 3 on rail 5's leaf
  fleet[3].rails[0] = On(1, "");                     // gpu-4's rail 1 heard nothing
  auto f = JudgeFleetCabling(fleet);
  REQUIRE(f.size() == 1);
  CHECK(f[0].node == "gpu-16");
  CHECK(f[0].certain);
  CHECK(f[0].Message() ==
        "gpu-16 rail 3 (mlx5_2, ens3f0np0) is cabled to leaf-5 (rail 5's switch), not leaf-3");
}

TEST_CASE("A fleet split in half is reported, uncertain") {
  std::vector<NodeCabling> fleet = {Node("a", {"leaf-1"}), Node("b", {"leaf-9"})};
  auto f = JudgeFleetCabling(fleet);
  REQUIRE(f.size() == 1);
  CHECK_FALSE(f[0].certain);
  CHECK(JudgeFleetCabling({}).empty());
}

TEST_CASE("Topology labels: a rail's leaf and the node's block, valid whatever LLDP said") {
  auto labels = TopologyLabels({On(1, "leaf-1"), On(2, "leaf-2"), On(3, "")});
  CHECK(labels.at("topology.kube-rdma.io/rail-1-leaf") == "leaf-1");
  CHECK(labels.at("topology.kube-rdma.io/rail-2-leaf") == "leaf-2");
  CHECK_FALSE(labels.contains("topology.kube-rdma.io/rail-3-leaf"));
  // Nodes on the same leaves share a block, whatever the order; others do not.
  CHECK(labels.at("topology.kube-rdma.io/block") ==
        TopologyLabels({On(1, "leaf-2"), On(2, "leaf-1")}).at("topology.kube-rdma.io/block"));
  CHECK(labels.at("topology.kube-rdma.io/block") !=
        TopologyLabels({On(1, "leaf-1"), On(2, "leaf-3")}).at("topology.kube-rdma.io/block"));
  CHECK(TopologyLabels({On(1, "tor-7")}).at("topology.kube-rdma.io/block") == "tor-7");
  CHECK(TopologyLabels({On(1, "")}).empty());
  for (const auto& [k, v] : labels) {
    CHECK(ValidLabelKey(k));
    CHECK(ValidLabelValue(v));
  }
}

TEST_CASE("Label values from hostile or long switch names are valid and stay distinct") {
  for (std::string name : {std::string("leaf 1\x1b[2J"), std::string("8a:b6:51:41:59:fe"),
                           std::string(300, 'x'), std::string("-.-"), std::string("\\x0a")}) {
    INFO(name);
    std::string v = LabelValue(name);
    CHECK(ValidLabelValue(v));
    CHECK_FALSE(v.empty());
  }
  CHECK(LabelValue("leaf-1") == "leaf-1");
  CHECK(LabelValue(std::string(300, 'x')) != LabelValue(std::string(301, 'x')));
  CHECK(LabelValue("a:b") != LabelValue("a;b"));
  // A switch named like another's changed value never takes that value.
  const std::string changed = LabelValue("leaf:1");
  CHECK(changed.starts_with("leaf-1-"));
  CHECK(LabelValue(changed) != changed);
  CHECK(ValidLabelValue(LabelValue(changed)));
  CHECK(LabelValue("leaf-1-4") == "leaf-1-4");                // not the changed form: kept
  CHECK(LabelValue("rack-7-deadbeef") != "rack-7-deadbeef");  // the changed form: hashed
  CHECK_FALSE(ValidLabelValue("-a"));
  CHECK_FALSE(ValidLabelValue(std::string(64, 'a')));
  CHECK(ValidLabelKey("topology.kube-rdma.io/block"));
  CHECK_FALSE(ValidLabelKey("Topology.kube-rdma.io/block"));
  CHECK_FALSE(ValidLabelKey("topology.kube-rdma.io/"));
}

// Says it heard everything it was asked to listen on, and remembers what that was.
struct EveryoneHeard final : lldp::LldpListener {
  std::vector<std::string> asked;
  Result<lldp::Heard> Listen(const std::vector<std::string>& netdevs, std::chrono::milliseconds,
                             lldp::ListenUntil, int) override {
    asked = netdevs;
    lldp::Heard h;
    for (const auto& n : netdevs) h.neighbors[n] = lldp::Neighbor{.chassis_id = "evil"};
    return h;
  }
};

TEST_CASE(
    "A rail whose PF has a VF away (in a pod, a VM) is not listened on, unbound VFs not counted") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/kuberdma-vfaway-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  fs::copy(std::string(KUBERDMA_FIXTURES) + "/sysfs/sriov", dir,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  sysfs::SysfsRoot root(dir);
  const std::string vfs = root.Sys("bus/pci/devices/");
  std::vector<RailNeighbor> rails = {
      {.rail = 1, .hca = "mlx5_0", .netdev = "ens1f0np0", .pci_address = "0000:1b:00.0"},
      {.rail = 2, .hca = "mlx5_5", .netdev = "ens2f0np0", .pci_address = "0000:3c:00.0"}};
  NoteVfTenants(root, rails);
  CHECK(rails[0].vf_away.empty());  // every VF's netdev is on the host
  CHECK(rails[1].vf_away.empty());
  fs::remove_all(vfs + "0000:1b:00.3/net");  // VF 1 of the first PF: its netdev in a pod
  fs::remove(vfs + "0000:3c:00.2/driver");   // the second PF's VF 0: unbound, it sends nothing
  fs::remove_all(vfs + "0000:3c:00.2/net");
  NoteVfTenants(root, rails);
  CHECK(rails[0].vf_away == "0000:1b:00.3");
  CHECK(rails[1].vf_away.empty());
  EveryoneHeard listener;
  REQUIRE(HearEthernet(listener, rails, std::chrono::seconds(1), lldp::ListenUntil::kWaitOver));
  CHECK(listener.asked == std::vector<std::string>{"ens2f0np0"});
  CHECK_FALSE(rails[0].neighbor);
  CHECK_FALSE(rails[0].listened);
  CHECK(rails[1].neighbor);
  CHECK(rails[1].listened);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kuberdma::rails
