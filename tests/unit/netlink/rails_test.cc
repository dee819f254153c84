// SPDX-License-Identifier: Apache-2.0
// The node config, rail numbering and the node's own NICs, judged on synthetic HCAs and host
// networks (the judging is pure; ReadHostNet is proven on real namespaces in netns/).
#include "kuberdma/rails/rails.h"

#include <catch2/catch.hpp>

#include "kuberdma/rails/node_config.h"

using namespace kuberdma;
using namespace kuberdma::rails;

namespace {

sysfs::Hca Pf(const std::string& name, const std::string& addr, const std::string& netdev) {
  sysfs::Hca h;
  h.name = name;
  h.bus = sysfs::BusKind::kPci;
  h.address = h.pci_address = addr;
  if (!netdev.empty()) h.netdevs = {netdev};
  return h;
}

// Four PFs whose names are not in PCI order (mlx5_0 is the highest address), and the netdevs.
struct Node {
  std::vector<sysfs::Hca> hcas = {
      Pf("mlx5_0", "0000:d1:00.0", "ens4np0"), Pf("mlx5_1", "0000:1a:00.0", "ens1np0"),
      Pf("mlx5_2", "0000:9a:00.0", "ens3np0"), Pf("mlx5_3", "0000:3b:00.0", "ens2np0")};
  HostNet net;
  Node() {
    int i = 10;
    for (const auto& h : hcas) net.links.push_back({.ifindex = i++, .name = h.netdevs[0]});
    net.links.push_back({.ifindex = 99, .name = "bond0", .kind = "bond"});
  }
  int Index(const std::string& netdev) const {
    for (const auto& l : net.links) {
      if (l.name == netdev) return l.ifindex;
    }
    return 0;
  }
  void Address(const std::string& netdev, const std::string& ip, int len = 24) {
    net.addresses.emplace_back(Index(netdev),
                               link::IpPrefix{.family = 4, .address = ip, .prefix_len = len});
  }
};

}  // namespace

TEST_CASE("Without a declaration rails follow the PCI-address order, not the HCA names") {
  Node n;
  NodeRoles roles = JudgeHcas(n.hcas, n.net, NodeConfig{});
  CHECK(roles.Find("mlx5_1")->rail == 1);  // 1a
  CHECK(roles.Find("mlx5_3")->rail == 2);  // 3b
  CHECK(roles.Find("mlx5_2")->rail == 3);  // 9a
  CHECK(roles.Find("mlx5_0")->rail == 4);  // d1
  CHECK(roles.HcaOnRail(3) == "mlx5_2");
  CHECK(roles.HcaOnRail(5).empty());
}

TEST_CASE("The NIC with the node's default route is the node's own and takes no rail number") {
  Node n;
  n.net.routes.push_back({.dst = {.family = 4, .address = "0.0.0.0", .prefix_len = 0},
                          .gateway = "10.0.0.1",
                          .ifindex = n.Index("ens1np0")});
  NodeRoles roles = JudgeHcas(n.hcas, n.net, NodeConfig{});
  CHECK_THAT(roles.Find("mlx5_1")->node_own,
             Catch::Contains("ens1np0 carries the node's default route (via 10.0.0.1)"));
  CHECK(roles.Find("mlx5_1")->rail == 0);
  CHECK_THAT(roles.Find("mlx5_1")->no_rail, Catch::Contains("the node's own NIC"));
  // The others close ranks: the rails are the PFs kube-rdma may take.
  CHECK(roles.Find("mlx5_3")->rail == 1);
  CHECK(roles.Find("mlx5_0")->rail == 3);
}

TEST_CASE("A bond member, the node's address and an undeclared global address make a node NIC") {
  Node n;
  n.net.links[1].master_ifindex = 99;  // ens1np0 in bond0
  n.Address("ens3np0", "192.168.7.5");
  n.Address("ens2np0", "10.50.0.9");
  n.Address("ens4np0", "169.254.3.3", 16);  // link-local: not the node's traffic
  NodeConfig config;
  config.node_addresses = {"192.168.7.5"};
  NodeRoles roles = JudgeHcas(n.hcas, n.net, config);
  CHECK_THAT(roles.Find("mlx5_1")->node_own, Catch::Contains("ens1np0 is a port of bond0 (bond)"));
  CHECK_THAT(roles.Find("mlx5_2")->node_own,
             Catch::Contains("holds 192.168.7.5, the address the node is known by"));
  CHECK_THAT(roles.Find("mlx5_3")->node_own,
             Catch::Contains("holds 10.50.0.9/24, a global address that no declared rail has"));
  CHECK(roles.Find("mlx5_0")->node_own.empty());
  CHECK(roles.Find("mlx5_0")->rail == 1);
}

TEST_CASE("Declared rails number the HCAs in declaration order and may hold their addresses") {
  Node n;
  n.Address("ens2np0", "10.10.2.7");  // the rail's own address (routed rails)
  NodeConfig config;
  config.rails = {"ens4np0", "0000:3b:00.0", "mlx5_2"};
  NodeRoles roles = JudgeHcas(n.hcas, n.net, config);
  CHECK(roles.Find("mlx5_0")->rail == 1);
  CHECK(roles.Find("mlx5_3")->rail == 2);
  CHECK(roles.Find("mlx5_3")->node_own.empty());
  CHECK(roles.Find("mlx5_2")->rail == 3);
  CHECK(roles.Find("mlx5_1")->rail == 0);
  CHECK_THAT(roles.Find("mlx5_1")->no_rail, Catch::Contains("not one of the node's declared"));
  CHECK(roles.unmatched.empty());
}

TEST_CASE("A declared rail with the default route or the node's address is still the node's own") {
  Node n;
  n.Address("ens4np0", "10.0.0.5");
  NodeConfig config;
  config.rails = {"ens4np0", "ens9np0"};
  config.node_addresses = {"10.0.0.5"};
  NodeRoles roles = JudgeHcas(n.hcas, n.net, config);
  CHECK_THAT(roles.Find("mlx5_0")->node_own, Catch::Contains("the address the node is known by"));
  CHECK(roles.Find("mlx5_0")->rail == 0);
  REQUIRE(roles.unmatched.size() == 1);
  CHECK_THAT(roles.unmatched[0], Catch::Contains("rail 2: ens9np0 names no HCA"));
}

TEST_CASE("A VF and a scalable function are on their PF's rail, a software HCA on none") {
  Node n;
  sysfs::Hca vf = Pf("mlx5_8", "0000:1a:00.2", "");
  vf.pf_address = "0000:1a:00.0";
  sysfs::Hca sf;
  sf.name = "mlx5_9";
  sf.bus = sysfs::BusKind::kAuxiliary;
  sf.address = "mlx5_core.sf.2";
  sf.pci_address = "0000:9a:00.0";
  sysfs::Hca rxe;
  rxe.name = "rxe0";
  rxe.bus = sysfs::BusKind::kVirtual;
  n.hcas.insert(n.hcas.end(), {vf, sf, rxe});
  NodeRoles roles = JudgeHcas(n.hcas, n.net, NodeConfig{});
  CHECK(roles.Find("mlx5_8")->rail == 1);
  CHECK(roles.Find("mlx5_9")->rail == 3);
  CHECK(roles.Find("rxe0")->rail == 0);
  CHECK_THAT(roles.Find("rxe0")->no_rail, Catch::Contains("software RDMA device"));
}

TEST_CASE("The node config resolves per node and refuses unknown keys, duplicates and types") {
  const char* text = R"({"rails":["a","b"],"nodeAddresses":["10.0.0.5"],
                         "nodes":{"gpu-7":{"rails":["c"]}}})";
  auto top = ParseNodeConfig(text, "gpu-1");
  REQUIRE(top);
  CHECK(top->rails == std::vector<std::string>{"a", "b"});
  auto seven = ParseNodeConfig(text, "gpu-7");
  REQUIRE(seven);
  CHECK(seven->rails == std::vector<std::string>{"c"});
  CHECK(seven->node_addresses == std::vector<std::string>{"10.0.0.5"});
  CHECK(ParseNodeConfig(FormatNodeConfig(*seven), "")->rails == seven->rails);

  auto typo = ParseNodeConfig(R"({"rail":["a"]})", "");
  REQUIRE_FALSE(typo);
  CHECK_THAT(typo.error().message(), Catch::Contains("rail: unknown field"));
  auto nested = ParseNodeConfig(R"({"nodes":{"x":{"nodeAddress":[]}}})", "y");
  REQUIRE_FALSE(nested);
  CHECK_THAT(nested.error().message(), Catch::Contains("nodes.x.nodeAddress: unknown field"));
  CHECK_FALSE(ParseNodeConfig(R"({"rails":["a","a"]})", ""));
  CHECK_FALSE(ParseNodeConfig(R"({"rails":"a"})", ""));
  CHECK_FALSE(ParseNodeConfig(R"({"rails":[""]})", ""));
  CHECK_FALSE(ParseNodeConfig("[1]", ""));
  CHECK(LoadNodeConfig("/nonexistent/node.json", "")->rails.empty());
}

TEST_CASE("Only addresses beyond their link count: link-local, loopback and multicast do not") {
  for (const char* ip : {"10.0.0.5", "192.168.7.5", "fd00::5", "2001:db8::1"}) {
    CHECK(IsRoutable({.family = ip[0] == '1' ? 4 : 6, .address = ip, .prefix_len = 24}));
  }
  for (const char* ip : {"169.254.3.3", "127.0.0.1", "224.0.0.1", "239.1.1.1"}) {
    CHECK_FALSE(IsRoutable({.family = 4, .address = ip, .prefix_len = 32}));
  }
  for (const char* ip : {"fe80::1", "ff02::1", "::1"}) {
    CHECK_FALSE(IsRoutable({.family = 6, .address = ip, .prefix_len = 64}));
  }
}

TEST_CASE("The node config's partitionHook is an absolute, clean path, per node like the rest") {
  auto ok = ParseNodeConfig(R"({"partitionHook":"/opt/kube-rdma/sm-hook",
      "nodes":{"gpu-2":{"partitionHook":"/usr/local/bin/ufm-hook"}}})",
                            "gpu-1");
  REQUIRE(ok);
  CHECK(ok->partition_hook == "/opt/kube-rdma/sm-hook");
  CHECK(ParseNodeConfig(FormatNodeConfig(*ok), "")->partition_hook == "/opt/kube-rdma/sm-hook");
  CHECK(
      ParseNodeConfig(R"({"partitionHook":"/a","nodes":{"gpu-2":{"partitionHook":"/b"}}})", "gpu-2")
          ->partition_hook == "/b");
  CHECK(ParseNodeConfig("{}", "")->partition_hook.empty());
  for (const char* bad : {R"({"partitionHook":"sm-hook"})", R"({"partitionHook":"/opt/../bin/x"})",
                          R"({"partitionHook":"/opt//x"})", R"({"partitionHook":7})"}) {
    INFO(bad);
    auto r = ParseNodeConfig(bad, "");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains("partitionHook"));
  }
}

TEST_CASE("The node config's railSwitches are per node like the rest, and survive the CNI's file") {
  auto ok = ParseNodeConfig(R"({"railSwitches":["leaf-1","leaf-2"],
      "nodes":{"gpu-9":{"railSwitches":["leaf-9a","leaf-9b"]}}})",
                            "gpu-9");
  REQUIRE(ok);
  CHECK(ok->rail_switches == std::vector<std::string>{"leaf-9a", "leaf-9b"});
  CHECK(ParseNodeConfig(FormatNodeConfig(*ok), "")->rail_switches == ok->rail_switches);
  CHECK(ParseNodeConfig(R"({"railSwitches":["leaf-1"]})", "gpu-1")->rail_switches.size() == 1);
  for (const char* bad : {R"({"railSwitches":"leaf-1"})", R"({"railSwitches":["leaf-1","leaf-1"]})",
                          R"({"railSwitches":[""]})"}) {
    INFO(bad);
    auto r = ParseNodeConfig(bad, "");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains("railSwitches"));
  }
}

TEST_CASE("The node config's sriov names each PF once, by name or by rail, with a bounded count") {
  auto ok = ParseNodeConfig(R"({"sriov":[{"rail":1,"numVfs":8},{"pf":"ens2np0","numVfs":0}],
      "nodes":{"gpu-2":{"sriov":[{"pf":"0000:1a:00.0","numVfs":4}]}}})",
                            "gpu-1");
  REQUIRE(ok);
  REQUIRE(ok->sriov.size() == 2);
  CHECK(ok->sriov[0].rail == 1);
  CHECK(ok->sriov[0].num_vfs == 8);
  CHECK(ok->sriov[1].Target() == "ens2np0");
  auto other = ParseNodeConfig(R"({"sriov":[{"rail":1,"numVfs":8}],
      "nodes":{"gpu-2":{"sriov":[{"pf":"0000:1a:00.0","numVfs":4}]}}})",
                               "gpu-2");
  REQUIRE(other);
  REQUIRE(other->sriov.size() == 1);  // a node's entry replaces the list
  CHECK(other->sriov[0].pf == "0000:1a:00.0");
  // The resolved file keeps it, and reads back the same.
  auto again = ParseNodeConfig(FormatNodeConfig(*ok), "");
  REQUIRE(again);
  CHECK(again->sriov.size() == 2);
  CHECK(again->sriov[0].rail == 1);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"sriov":{"rail":1}})", "sriov: must be an array"},
      {R"({"sriov":[{"rail":1}]})", "numVfs"},
      {R"({"sriov":[{"rail":1,"numVfs":257}]})", "0..256"},
      {R"({"sriov":[{"rail":1,"numVfs":-1}]})", "0..256"},
      {R"({"sriov":[{"numVfs":2}]})", "by \"pf\" or by \"rail\""},
      {R"({"sriov":[{"pf":"a","rail":2,"numVfs":2}]})", "by \"pf\" or by \"rail\""},
      {R"({"sriov":[{"rail":0,"numVfs":2}]})", "rail number"},
      {R"({"sriov":[{"pf":"a","numVfs":2},{"pf":"a","numVfs":3}]})", "listed twice"},
      {R"({"sriov":[{"pf":"a","numvfs":2}]})", "unknown field"},
      {R"({"nodes":{"x":{"sriov":[{"pf":"","numVfs":2}]}}})", "nodes.x.sriov[0].pf"},
  };
  for (const auto& [text, why] : bad) {
    INFO(text);
    auto r = ParseNodeConfig(text, "");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains(why));
  }
}

TEST_CASE("The node config carries the CNI's extra roots, a node's entry replacing the top's") {
  auto nc = ParseNodeConfig(R"({"stateRoots": ["/srv/kube-rdma"], "logRoots": ["/srv/log"],
                                "deviceInfoDirs": ["/srv/devinfo"],
                                "nodes": {"gpu-2": {"stateRoots": ["/data/rdma"]}}})",
                            "gpu-1");
  REQUIRE(nc);
  CHECK(nc->state_roots == std::vector<std::string>{"/srv/kube-rdma"});
  CHECK(nc->log_roots == std::vector<std::string>{"/srv/log"});
  CHECK(nc->device_info_dirs == std::vector<std::string>{"/srv/devinfo"});
  auto two = ParseNodeConfig(R"({"stateRoots": ["/srv/kube-rdma"],
                                 "nodes": {"gpu-2": {"stateRoots": ["/data/rdma"]}}})",
                             "gpu-2");
  REQUIRE(two);
  CHECK(two->state_roots == std::vector<std::string>{"/data/rdma"});
  // What the DaemonSet writes for the CNI keeps them.
  auto again = ParseNodeConfig(FormatNodeConfig(*nc), "");
  REQUIRE(again);
  CHECK(again->log_roots == nc->log_roots);
  for (const char* bad :
       {R"({"stateRoots": "/srv"})", R"({"logRoots": ["relative"]})", R"({"stateRoots": ["/"]})",
        R"({"deviceInfoDirs": ["/a/../b"]})", R"({"stateRoots": [5]})"}) {
    auto b = ParseNodeConfig(bad, "");
    REQUIRE_FALSE(b);
    CHECK(b.error().code() == ErrorCode::kInvalidArgument);
  }
}
