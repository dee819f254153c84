// SPDX-License-Identifier: Apache-2.0
// The real `rdma` binary on real namespaces: veths stand in for HCA netdevs (the roce8 fixture maps
// them to mlx5_0..7), a private namespace stands in for the node. Every namespace and link is
// removed by SimNode's destructor, also when an assertion fails.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/doctor/doctor.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/kubelet.h"
#include "kuberdma/sysfs/sysfs.h"
#include "node_device_plugin.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;

std::string RdmaNetConf(const SimNode& node, const std::string& version = "0.3.1",
                        const std::string& extra = "") {
  return R"({"cniVersion":")" + version + R"(","name":"rdma-net","type":"rdma","pkey":"0xffff",
    "linkState":"up","mtu":9000,"stateDir":")" +
         node.state_dir() + "\"" + extra + "}";
}

link::LinkInfo MustGet(SimNode& node, const netns::NetNs& ns, const std::string& name) {
  auto l = node.links().GetByName(ns, name);
  if (!l) FAIL("link " << name << ": " << l.error().message());
  return *l;
}

TEST_CASE(
    "ADD of the InfiniBand NAD moves a veth into the pod as net1 with MTU 9000, up, DEL restores "
    "it") {
  SimNode node(kRoce8, Roce8Netdevs());
  auto host_before = MustGet(node, node.node(), "ens1f0np0");
  std::string pod = node.AddPod("pod");
  auto add = node.Run(kBin, {"ADD", "c0ffee", pod, "net1", RdmaNetConf(node)});
  INFO(add.err);
  REQUIRE(add.exit_code == 0);
  json result = json::parse(add.out);  // stdout holds exactly the result document
  CHECK(result["cniVersion"] == "0.3.1");
  CHECK(result["interfaces"][0]["name"] == "net1");
  CHECK(result["interfaces"][0]["mac"] == host_before.mac);
  CHECK(result["interfaces"][0]["sandbox"] == pod);
  auto in_pod = MustGet(node, node.Pod(pod), "net1");
  CHECK(in_pod.mtu == 9000);
  CHECK(in_pod.admin_up);
  CHECK(in_pod.mac == host_before.mac);
  CHECK_FALSE(node.links().GetByName(node.node(), "ens1f0np0"));

  auto del = node.Run(kBin, {"DEL", "c0ffee", pod, "net1", RdmaNetConf(node)});
  INFO(del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(del.out.empty());
  auto back = MustGet(node, node.node(), "ens1f0np0");
  CHECK(back.mtu == host_before.mtu);
  CHECK(back.admin_up == host_before.admin_up);
  CHECK(back.mac == host_before.mac);
  CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
}

TEST_CASE("Eight attachments of rdma-net, as a training StatefulSet asks, take all eight netdevs") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("trainer-0");
  for (int i = 1; i <= 8; ++i) {
    auto add =
        node.Run(kBin, {"ADD", "trainer0", pod, "net" + std::to_string(i), RdmaNetConf(node)});
    INFO(add.err);
    REQUIRE(add.exit_code == 0);
  }
  auto pod_ns = node.Pod(pod);
  for (int i = 1; i <= 8; ++i) CHECK(MustGet(node, pod_ns, "net" + std::to_string(i)).mtu == 9000);
  auto extra = node.Run(kBin, {"ADD", "trainer0", pod, "net9", RdmaNetConf(node)});
  CHECK(extra.exit_code != 0);
  CHECK(json::parse(extra.out)["code"] == 7);
  for (int i = 8; i >= 1; --i) {
    REQUIRE(node.Run(kBin, {"DEL", "trainer0", pod, "net" + std::to_string(i), RdmaNetConf(node)})
                .exit_code == 0);
  }
  for (const auto& n : Roce8Netdevs()) CHECK(node.links().GetByName(node.node(), n));
}

TEST_CASE("An MTU the device refuses after the kernel moved it is rolled back for real") {
  // A macvlan (here on a veth, 1500) cannot exceed its lower device's MTU: the kernel moves and
  // renames it, then rejects IFLA_MTU, exactly the partial failure the plugin must undo.
  SimNode node(kRoce8, {"ens1f0np0"});
  REQUIRE(node.net().CreateVeth(node.node(), "lower0", node.node(), "lower0p"));
  REQUIRE(node.net().DeleteLink(node.node(), "ens1f0np0"));
  REQUIRE(node.net().CreateLink(node.node(), "ens1f0np0", "macvlan", "lower0"));
  auto before = MustGet(node, node.node(), "ens1f0np0");
  std::string pod = node.AddPod("pod");
  auto add = node.Run(
      kBin, {"ADD", "c1", pod, "net1", RdmaNetConf(node, "1.0.0", R"(,"device":"ens1f0np0")")});
  REQUIRE(add.exit_code != 0);
  json err = json::parse(add.out);
  CHECK(err["code"] == 7);
  CHECK_THAT(err["msg"].get<std::string>(), Catch::Contains("mlx5_0") && Catch::Contains("net1"));
  auto after = MustGet(node, node.node(), "ens1f0np0");
  CHECK(after.ifindex == before.ifindex);
  CHECK(after.mtu == before.mtu);
  CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  CHECK(std::filesystem::is_empty(node.state_dir() + "/rdma-net"));
}

TEST_CASE("DEL after the pod namespace died restores the device the kernel handed back") {
  SimNode node(kRoce8, Roce8Netdevs());
  auto before = MustGet(node, node.node(), "ens3f0np0");
  std::string pod = node.AddPod("pod");
  REQUIRE(
      node.Run(kBin, {"ADD", "c2", pod, "net1", RdmaNetConf(node, "1.0.0", R"(,"hca":"mlx5_2")")})
          .exit_code == 0);
  // A physical netdev is returned to init_net when its namespace dies, keeping the pod's name or
  // becoming devN. veths are destroyed instead, so play the kernel's part: move it back as devN.
  auto pod_ns = node.Pod(pod);
  auto in_pod = MustGet(node, pod_ns, "net1");
  REQUIRE(node.links().MoveTo(pod_ns, in_pod.ifindex, node.node(),
                              {.name = "dev" + std::to_string(in_pod.ifindex)}));
  node.DeletePod(pod);
  auto del = node.Run(kBin, {"DEL", "c2", pod, "net1", RdmaNetConf(node, "1.0.0")});
  INFO(del.err);
  REQUIRE(del.exit_code == 0);
  auto back = MustGet(node, node.node(), "ens3f0np0");
  CHECK(back.mac == before.mac);
  CHECK(back.mtu == before.mtu);
  CHECK(back.admin_up == before.admin_up);
}

TEST_CASE("DEL without state, without CNI_NETNS, or repeated succeeds with empty output") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  REQUIRE(node.Run(kBin, {"ADD", "c3", pod, "net1", RdmaNetConf(node)}).exit_code == 0);
  auto first = node.Run(kBin, {"DEL", "c3", "", "net1", RdmaNetConf(node)});
  INFO(first.err);
  CHECK(first.exit_code == 0);
  CHECK(first.out.empty());
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  CHECK(node.Run(kBin, {"DEL", "c3", pod, "net1", RdmaNetConf(node)}).exit_code == 0);
  CHECK(node.Run(kBin, {"DEL", "never", pod, "net1", RdmaNetConf(node)}).exit_code == 0);
}

TEST_CASE("A repeated ADD is answered from state without moving anything") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  auto first = node.Run(kBin, {"ADD", "c4", pod, "net1", RdmaNetConf(node, "1.1.0")});
  REQUIRE(first.exit_code == 0);
  auto second = node.Run(kBin, {"ADD", "c4", pod, "net1", RdmaNetConf(node, "1.1.0")});
  REQUIRE(second.exit_code == 0);
  CHECK(json::parse(first.out) == json::parse(second.out));
  CHECK(node.links().GetByName(node.node(), "ens2f0np0"));  // the retry took no second device
}

TEST_CASE("CHECK passes after ADD and fails with code 105 once the MTU drifts") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string conf = RdmaNetConf(node, "1.0.0");
  auto add = node.Run(kBin, {"ADD", "c5", pod, "net1", conf});
  REQUIRE(add.exit_code == 0);
  std::string with_prev = conf.substr(0, conf.size() - 1) + R"(,"prevResult":)" + add.out + "}";
  CHECK(node.Run(kBin, {"CHECK", "c5", pod, "net1", with_prev}).exit_code == 0);
  auto pod_ns = node.Pod(pod);
  REQUIRE(node.links().Change(pod_ns, MustGet(node, pod_ns, "net1").ifindex, {.mtu = 1400}));
  auto check = node.Run(kBin, {"CHECK", "c5", pod, "net1", with_prev});
  CHECK(check.exit_code != 0);
  CHECK(json::parse(check.out)["code"] == 105);
}

TEST_CASE("Errors are CNI error documents on stdout with the specification's codes") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  auto code = [&](const CniCall& c) {
    auto r = node.Run(kBin, c);
    INFO(r.out << r.err);
    CHECK(r.exit_code != 0);
    return json::parse(r.out).at("code").get<int>();
  };
  CHECK(code({"ADD", "c6", pod, "net1", "{not json"}) == 6);
  CHECK(code({"ADD", "c6", pod, "net1", RdmaNetConf(node, "0.2.0")}) == 1);
  CHECK(code({"ADD", "c6", pod, "", RdmaNetConf(node)}) == 4);
  CHECK(code({"ADD", "c6", "/run/netns/krt-does-not-exist", "net1", RdmaNetConf(node)}) == 4);
  CHECK(code({"ADD", "c6", pod, "net1",
              RdmaNetConf(node, "1.0.0", R"(,"deviceID":"0000:99:00.0")")}) == 7);
  CHECK(code({"ADD", "c6", pod, "net1", RdmaNetConf(node, "1.0.0", R"(,"mtu":"9000")")}) == 7);
  CHECK(code({"FROB", "c6", pod, "net1", RdmaNetConf(node)}) == 4);
  auto version = node.Run(kBin, {"VERSION", "", "", "", R"({"cniVersion":"1.1.0"})"});
  CHECK(version.exit_code == 0);
  CHECK(json::parse(version.out)["supportedVersions"].size() == 5);
  CHECK(node.Run(kBin, {"STATUS", "", "", "", RdmaNetConf(node, "1.1.0")}).exit_code == 0);
}

TEST_CASE("The error for a config whose fields are wrong carries the config's cniVersion") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  auto r =
      node.Run(kBin, {"ADD", "c8", pod, "net1", RdmaNetConf(node, "0.3.1", R"(,"mtu":"9000")")});
  CHECK(r.exit_code != 0);
  json err = json::parse(r.out);
  CHECK(err["code"] == 7);
  CHECK(err["cniVersion"] == "0.3.1");
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));  // nothing moved
}

TEST_CASE("GC gives back attachments that are no longer valid") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  REQUIRE(node.Run(kBin, {"ADD", "live", pod, "net1", RdmaNetConf(node, "1.1.0")}).exit_code == 0);
  REQUIRE(node.Run(kBin, {"ADD", "gone", pod, "net2", RdmaNetConf(node, "1.1.0")}).exit_code == 0);
  auto gc = node.Run(
      kBin,
      {"GC", "", "", "",
       RdmaNetConf(node, "1.1.0",
                   R"(,"cni.dev/valid-attachments":[{"containerID":"live","ifname":"net1"}])")});
  INFO(gc.err);
  REQUIRE(gc.exit_code == 0);
  CHECK(node.links().GetByName(node.node(), "ens2f0np0"));
  CHECK(node.links().GetByName(node.Pod(pod), "net1"));
}

TEST_CASE("Logs go to stderr and the log file, tagged with the container ID") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string log = node.state_dir() + "/rdma.log";
  auto add = node.Run(
      kBin, {"ADD", "feedface1234", pod, "net1",
             RdmaNetConf(node, "1.0.0", R"(,"logFile":")" + log + R"(","logLevel":"debug")")});
  REQUIRE(add.exit_code == 0);
  CHECK_THAT(add.err, Catch::Contains("feedface1234/net1") && Catch::Contains("attached mlx5_0"));
  auto text = ReadFile(log);
  REQUIRE(text);
  CHECK_THAT(*text, Catch::Contains("attached mlx5_0"));
}

TEST_CASE("Links are found by alternative name and by bus address, also inside another namespace") {
  SimNode node(kRoce8, Roce8Netdevs());
  // Give ens4f0np0 an alternative name the way `ip link property add` does.
  std::string ns_name = node.node().path().substr(node.node().path().find_last_of('/') + 1);
  REQUIRE(std::system(("ip -n " + ns_name + " link property add dev ens4f0np0 altname rdma-slot-4")
                          .c_str()) == 0);
  auto by_alt = node.links().GetByName(node.node(), "rdma-slot-4");
  REQUIRE(by_alt);
  CHECK(by_alt->name == "ens4f0np0");
  auto by_bus =
      FindByBusAddress(node.links(), node.node(), sysfs::SysfsRoot(kRoce8), "0000:3d:00.0");
  REQUIRE(by_bus);
  CHECK(by_bus->name == "ens4f0np0");
  CHECK(by_bus->ifindex == by_alt->ifindex);
  std::string pod = node.AddPod("pod");
  auto add = node.Run(
      kBin, {"ADD", "c7", pod, "net1", RdmaNetConf(node, "1.0.0", R"(,"device":"rdma-slot-4")")});
  INFO(add.err);
  REQUIRE(add.exit_code == 0);
  auto in_pod = MustGet(node, node.Pod(pod), "net1");
  CHECK(in_pod.mac == by_alt->mac);
  CHECK(in_pod.oper_state.size() > 0);
  REQUIRE(node.Run(kBin, {"DEL", "c7", pod, "net1", RdmaNetConf(node, "1.0.0")}).exit_code == 0);
}

TEST_CASE(
    "Sixteen pods attaching and detaching at once each get their own device, and all come back") {
  std::string dir = SimNode(kRoce8, {}).state_dir() + "-mini";  // a unique path; the node is gone
  std::vector<std::string> netdevs;
  for (int i = 0; i < 16; ++i) netdevs.push_back("hca" + std::to_string(i));
  WriteMiniNode(dir, 16, "hca");
  struct RemoveDir {
    std::string d;
    ~RemoveDir() { std::filesystem::remove_all(d); }
  } cleanup{dir};
  SimNode node(dir, netdevs);
  std::vector<CniCall> adds;
  std::vector<std::string> pods;
  for (int i = 0; i < 16; ++i) {
    pods.push_back(node.AddPod("p" + std::to_string(i)));
    adds.push_back(
        {"ADD", "pod" + std::to_string(i), pods.back(), "net1", RdmaNetConf(node, "1.0.0")});
  }
  auto runs = node.RunAll(kBin, adds);
  std::set<std::string> macs;
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("pod " << i << ": " << runs[i].out << runs[i].err);
    REQUIRE(runs[i].exit_code == 0);
    macs.insert(MustGet(node, node.Pod(pods[i]), "net1").mac);
  }
  CHECK(macs.size() == 16);
  for (auto& c : adds) c.command = "DEL";
  for (const auto& r : node.RunAll(kBin, adds)) CHECK(r.exit_code == 0);
  for (const auto& n : netdevs) CHECK(node.links().GetByName(node.node(), n));
}

// The error document a failed call printed: its code and message.
std::pair<int, std::string> ErrorOf(const CniRun& r) {
  json e = json::parse(r.out, nullptr, false);
  if (!e.is_object()) return {-1, r.out};
  return {e.value("code", -1), e.value("msg", "")};
}

TEST_CASE("CNI_NETNS naming the plugin's own namespace, or a mount namespace, is code 4") {
  SimNode node(kRoce8, Roce8Netdevs());
  for (const std::string& ns : {node.node().path(), std::string("/proc/self/ns/net")}) {
    auto add = node.Run(kBin, {"ADD", "c0ffee", ns, "net1", RdmaNetConf(node)});
    INFO(ns << ": " << add.out << add.err);
    CHECK(add.exit_code == 1);
    CHECK(ErrorOf(add).first == 4);
    CHECK_THAT(ErrorOf(add).second, Catch::Contains("namespace rdma runs in"));
    // The node's HCA netdev kept its name: nothing was renamed net1 on the node.
    CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
    CHECK_FALSE(node.links().GetByName(node.node(), "net1"));
  }
  auto mnt = node.Run(kBin, {"ADD", "c0ffee", "/proc/self/ns/mnt", "net1", RdmaNetConf(node)});
  CHECK(ErrorOf(mnt).first == 4);
  CHECK_THAT(ErrorOf(mnt).second, Catch::Contains("not a network namespace"));
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
}

TEST_CASE("Hostile CNI_IFNAME and CNI_CONTAINERID are refused before anything changes") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  for (const std::string& ifname : {std::string("net%d"), std::string("net\xa0")}) {
    auto add = node.Run(kBin, {"ADD", "c0ffee", pod, ifname, RdmaNetConf(node)});
    INFO(add.out << add.err);
    CHECK(ErrorOf(add).first == 4);  // was: 101 after the kernel made it net0, and 199
    CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net0"));
    CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  }
  std::string long_id(300, 'a');
  auto add = node.Run(kBin, {"ADD", long_id, pod, "net1", RdmaNetConf(node)});
  CHECK(ErrorOf(add).first == 4);
  // DEL of what ADD refused succeeds (the runtime would retry a failing DEL forever).
  auto del = node.Run(kBin, {"DEL", long_id, pod, "net1", RdmaNetConf(node)});
  INFO(del.out << del.err);
  CHECK(del.exit_code == 0);
  CHECK(del.out.empty());
  CHECK(node.Run(kBin, {"DEL", "c0ffee", pod, "net%d", RdmaNetConf(node)}).exit_code == 0);
}

TEST_CASE("A NAD cannot put state, logs or device-info outside kube-rdma's roots") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string victim = node.state_dir() + "-victim";
  struct Cleanup {
    std::string p;
    ~Cleanup() { std::filesystem::remove_all(p); }
  } cleanup{victim};
  REQUIRE(WriteFileAtomic(victim + "/file", "precious\n"));
  for (const std::string& extra :
       {std::string(R"(,"stateDir":"/etc")"), R"(,"stateDir":")" + victim + "\"",
        R"(,"logFile":")" + victim + R"(/file")",
        R"(,"runtimeConfig":{"CNIDeviceInfoFile":")" + victim + R"(/file"})"}) {
    auto add = node.Run(kBin, {"ADD", "c0ffee", pod, "net1", RdmaNetConf(node, "1.0.0", extra)});
    INFO(extra << ": " << add.out << add.err);
    CHECK(ErrorOf(add).first == 7);
    CHECK(*ReadFile(victim + "/file") == "precious\n");
    CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  }
}

TEST_CASE("A NAD's name with % flags is logged literally, never read as a log pattern") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string conf = R"({"cniVersion":"1.0.0","name":"n%d%v%Y","type":"rdma","stateDir":")" +
                     node.state_dir() + "\"}";
  auto add = node.Run(kBin, {"ADD", "c0ffee", pod, "net1", conf});
  INFO(add.err);
  REQUIRE(add.exit_code == 0);
  CHECK_THAT(add.err, Catch::Contains("c0ffee/net1 n%d%v%Y: attached"));
  CHECK(node.Run(kBin, {"DEL", "c0ffee", pod, "net1", conf}).exit_code == 0);
}

TEST_CASE("DEL with a config that does not parse succeeds with no record, and undoes one") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string broken = RdmaNetConf(node, "1.0.0", R"(,"mtu":"abc")");
  // Multus's order: ADD fails on the config, then the runtime's DEL re-sends the same config.
  auto add = node.Run(kBin, {"ADD", "c0ffee", pod, "net1", broken});
  CHECK(ErrorOf(add).first == 7);
  auto del = node.Run(kBin, {"DEL", "c0ffee", pod, "net1", broken});
  INFO(del.out << del.err);
  CHECK(del.exit_code == 0);  // was: error 7 on every DEL, so the sandbox could not be removed
  // A NAD edited after a good ADD: DEL finds the record by name and restores the device.
  REQUIRE(node.Run(kBin, {"ADD", "c0ffee", pod, "net1", RdmaNetConf(node, "1.0.0")}).exit_code ==
          0);
  REQUIRE(node.links().GetByName(node.Pod(pod), "net1"));
  CHECK(node.Run(kBin, {"DEL", "c0ffee", pod, "net1", broken}).exit_code == 0);
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  CHECK(node.Run(kBin, {"DEL", "c0ffee", pod, "net1", "not json at all"}).exit_code == 0);
}

}  // namespace
}  // namespace kuberdma::sim

namespace kuberdma::sim {
namespace {

TEST_CASE(
    "The real binary never moves the node's own NICs: default route, a bridge port, an "
    "undeclared address, a declared rail moves, and a rail's network takes its rail's HCA") {
  SimNode node(kRoce8, Roce8Netdevs());
  auto ens1 = MustGet(node, node.node(), "ens1f0np0");
  auto ens3 = MustGet(node, node.node(), "ens3f0np0");
  link::IpPrefix node_ip{.family = 4, .address = "10.0.0.5", .prefix_len = 24};
  REQUIRE(node.addrs().AddAddress(node.node(), ens1.ifindex, node_ip));
  REQUIRE(node.addrs().AddRoute(node.node(),
                                {.dst = {.family = 4, .address = "0.0.0.0", .prefix_len = 0},
                                 .gateway = "10.0.0.1",
                                 .ifindex = ens1.ifindex}));
  REQUIRE(node.net().CreateLink(node.node(), "br0", "bridge"));
  REQUIRE(node.net().SetMaster(node.node(), "ens2f0np0", "br0"));
  REQUIRE(node.addrs().AddAddress(node.node(), ens3.ifindex,
                                  {.family = 4, .address = "10.60.0.3", .prefix_len = 24}));
  std::string pod = node.AddPod("pod");
  struct Case {
    std::string extra, says;
  };
  for (const Case& c : {Case{R"(,"hca":"mlx5_0")", "carries the node's default route"},
                        Case{R"(,"deviceID":"0000:1b:00.0")", "ens2f0np0 is a port of br0"},
                        Case{R"(,"device":"ens3f0np0")", "holds 10.60.0.3/24"}}) {
    auto add = node.Run(kBin, {"ADD", "c1", pod, "net1", RdmaNetConf(node, "1.0.0", c.extra)});
    INFO(add.out << add.err);
    REQUIRE(add.exit_code != 0);
    json err = json::parse(add.out);
    CHECK(err["code"] == 107);
    CHECK_THAT(err["msg"].get<std::string>(), Catch::Contains(c.says));
  }
  // Every refusal changed nothing: the node keeps its address, its route and its NICs.
  CHECK(MustGet(node, node.node(), "ens1f0np0").ifindex == ens1.ifindex);
  auto routes = node.addrs().ListRoutes(node.node(), ens1.ifindex);
  REQUIRE(routes);
  CHECK(std::any_of(routes->begin(), routes->end(),
                    [](const link::Route& r) { return r.dst.prefix_len == 0; }));
  std::string records = node.state_dir() + "/rdma-net";
  CHECK((!std::filesystem::exists(records) || std::filesystem::is_empty(records)));
  // The first free HCA skips all three.
  auto first = node.Run(kBin, {"ADD", "c1", pod, "net1", RdmaNetConf(node, "1.0.0")});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK(json::parse(first.out)["interfaces"][0]["mac"] == MustGet(node, node.Pod(pod), "net1").mac);
  CHECK_FALSE(node.links().GetByName(node.node(), "ens4f0np0"));

  // Declared rails: ens3f0np0's address is rail 1's own, so it moves; rail 2 is ens6f0np0.
  REQUIRE(WriteFileAtomic(node.node_config_path(),
                          R"({"rails":["ens3f0np0","ens6f0np0"],"nodeAddresses":["10.0.0.5"],
                              "allowUnallocated":true})"));
  auto rail2 =
      node.Run(kBin, {"ADD", "c1", pod, "net2", RdmaNetConf(node, "1.0.0", R"(,"rail":2)")});
  INFO(rail2.err);
  REQUIRE(rail2.exit_code == 0);
  CHECK_FALSE(node.links().GetByName(node.node(), "ens6f0np0"));
  auto rail1 = node.Run(
      kBin, {"ADD", "c1", pod, "net3", RdmaNetConf(node, "1.0.0", R"(,"rail":1,"hca":"mlx5_2")")});
  INFO(rail1.err);
  CHECK(rail1.exit_code == 0);
  auto wrong = node.Run(
      kBin, {"ADD", "c1", pod, "net4", RdmaNetConf(node, "1.0.0", R"(,"rail":1,"hca":"mlx5_7")")});
  REQUIRE(wrong.exit_code != 0);
  CHECK_THAT(json::parse(wrong.out)["msg"].get<std::string>(),
             Catch::Contains("is rail 1") && Catch::Contains("mlx5_7, on no rail"));
  REQUIRE(WriteFileAtomic(node.node_config_path(), R"({"rail":["ens3f0np0"]})"));
  auto typo = node.Run(kBin, {"ADD", "c1", pod, "net4", RdmaNetConf(node, "1.0.0")});
  REQUIRE(typo.exit_code != 0);
  CHECK(json::parse(typo.out)["code"] == 7);
  CHECK_THAT(json::parse(typo.out)["msg"].get<std::string>(),
             Catch::Contains("rail: unknown field"));
  for (const char* ifname : {"net3", "net2", "net1"}) {
    REQUIRE(node.Run(kBin, {"DEL", "c1", pod, ifname, RdmaNetConf(node, "1.0.0")}).exit_code == 0);
  }
  // DEL gave rail 1 back with its address (IPv4 addresses go with a namespace move: this one was
  // never re-added by rdma, which is what routed rails will do).
  CHECK(node.links().GetByName(node.node(), "ens3f0np0"));
}

TEST_CASE("rdma-doctor node marks the node's own NIC and numbers the rails, on a real namespace") {
  SimNode node(kRoce8, Roce8Netdevs());
  auto ens2 = MustGet(node, node.node(), "ens2f0np0");
  REQUIRE(node.addrs().AddAddress(node.node(), ens2.ifindex,
                                  {.family = 4, .address = "10.0.0.5", .prefix_len = 24}));
  REQUIRE(node.addrs().AddRoute(node.node(),
                                {.dst = {.family = 4, .address = "0.0.0.0", .prefix_len = 0},
                                 .gateway = "10.0.0.1",
                                 .ifindex = ens2.ifindex}));
  doctor::Inputs in{.root = sysfs::SysfsRoot(kRoce8)};
  in.links = &node.links();
  in.addrs = &node.addrs();
  in.state_dir = node.state_dir();
  in.plugin_dir = node.state_dir();
  in.node_config = node.node_config_path();
  in.pod_resources = node.state_dir() + "/absent.sock";
  doctor::View v;
  REQUIRE(node.node().RunIn([&] { v = doctor::NodeView(in); }));
  const auto& hcas = v.doc["hcas"];
  REQUIRE(hcas.size() == 8);
  CHECK_THAT(hcas[1].value("nodeNic", ""), Catch::Contains("carries the node's default route"));
  CHECK(hcas[1].value("rail", -1) == 0);
  CHECK(hcas[0].value("rail", -1) == 1);
  CHECK(hcas[2].value("rail", -1) == 2);  // the node's own NIC takes no rail number
  std::string text = doctor::Render(v);
  CHECK_THAT(text, Catch::Contains("NODE'S OWN NIC: ens2f0np0 carries the node's default route") &&
                       Catch::Contains("never offered or moved: mlx5_1"));
  REQUIRE(WriteFileAtomic(node.node_config_path(), R"({"rails":["ens9f0np0"]})"));
  REQUIRE(node.node().RunIn([&] { v = doctor::NodeView(in); }));
  CHECK_THAT(doctor::Render(v), Catch::Contains("rail 1: ens9f0np0 names no HCA on this node"));
}

TEST_CASE("Routed rails on the real kernel: the rail's address and routes follow the netdev") {
  SimNode node(kRoce8, Roce8Netdevs());
  auto ens1 = MustGet(node, node.node(), "ens1f0np0");
  REQUIRE(node.addrs().AddAddress(node.node(), ens1.ifindex,
                                  {.family = 4, .address = "10.10.1.7", .prefix_len = 24}));
  REQUIRE(node.addrs().AddRoute(node.node(),
                                {.dst = {.family = 4, .address = "10.10.0.0", .prefix_len = 16},
                                 .gateway = "10.10.1.1",
                                 .ifindex = ens1.ifindex}));
  REQUIRE(WriteFileAtomic(node.node_config_path(),
                          R"({"rails":["ens1f0np0"],"allowUnallocated":true})"));
  std::string pod = node.AddPod("pod");
  std::string conf = R"({"cniVersion":"1.0.0","name":"rail1","type":"rdma","rail":1,
      "addresses":"node","linkState":"up","stateDir":")" +
                     node.state_dir() + R"("})";
  auto add = node.Run(kBin, {"ADD", "c1", pod, "net1", conf});
  INFO(add.out << add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(json::parse(add.out)["ips"][0]["address"] == "10.10.1.7/24");
  auto net1 = MustGet(node, node.Pod(pod), "net1");
  auto in_pod = node.addrs().ListAddresses(node.Pod(pod), net1.ifindex);
  REQUIRE(in_pod);
  CHECK(std::any_of(in_pod->begin(), in_pod->end(),
                    [](const link::IpPrefix& p) { return p.Cidr() == "10.10.1.7/24"; }));
  auto pod_routes = node.addrs().ListRoutes(node.Pod(pod), net1.ifindex);
  REQUIRE(pod_routes);
  CHECK(std::any_of(pod_routes->begin(), pod_routes->end(), [](const link::Route& r) {
    return r.dst.Cidr() == "10.10.0.0/16" && r.gateway == "10.10.1.1";
  }));
  auto check = node.Run(kBin, {"CHECK", "c1", pod, "net1", conf});
  CHECK(check.exit_code == 0);
  REQUIRE(node.Run(kBin, {"DEL", "c1", pod, "net1", conf}).exit_code == 0);
  auto back = MustGet(node, node.node(), "ens1f0np0");
  auto host_addrs = node.addrs().ListAddresses(node.node(), back.ifindex);
  auto host_routes = node.addrs().ListRoutes(node.node(), back.ifindex);
  REQUIRE(host_addrs);
  REQUIRE(host_routes);
  CHECK(std::any_of(host_addrs->begin(), host_addrs->end(),
                    [](const link::IpPrefix& p) { return p.Cidr() == "10.10.1.7/24"; }));
  CHECK(std::any_of(host_routes->begin(), host_routes->end(), [](const link::Route& r) {
    return r.dst.Cidr() == "10.10.0.0/16" && r.gateway == "10.10.1.1";
  }));
}

TEST_CASE(
    "An HCA goes only to the pod it was allocated to: the real device plugin answers from the "
    "kubelet's pod-resources, without it ADD fails in bounded time, DEL always works") {
  SimNode node(kRoce8, Roce8Netdevs());
  std::string dir = node.state_dir() + "/kubelet";
  REQUIRE(MakeDirs(dir));
  standins::KubeletStandIn kubelet(dir);
  REQUIRE(WriteFileAtomic(node.node_config_path(), "{}"));  // the check on, as on a cluster
  std::string pod_a = node.AddPod("pod-a");
  std::string pod_b = node.AddPod("pod-b");
  auto args = [](const std::string& pod) {
    return "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-x;K8S_POD_NAME=" + pod;
  };
  auto add = [&](const std::string& pod, const std::string& path, const std::string& ifname,
                 const std::string& extra) {
    CniCall call{"ADD", pod + "-sandbox", path, ifname, RdmaNetConf(node, "1.0.0", extra)};
    call.args = args(pod);
    return node.Run(kBin, call);
  };
  {
    // No device plugin: a clear error, bounded, nothing moved.
    auto t0 = std::chrono::steady_clock::now();
    auto r = add("pod-a", pod_a, "net1", R"(,"hca":"mlx5_0")");
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    REQUIRE(r.exit_code != 0);
    CHECK(json::parse(r.out)["code"] == 11);
    CHECK_THAT(json::parse(r.out)["msg"].get<std::string>(),
               Catch::Contains("is rdma-device-plugin running"));
    CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  }
  NodeDevicePlugin dp(node, dir, kubelet);
  REQUIRE(dp.started());
  REQUIRE(kubelet.WaitFor([&] { return !kubelet.Lists("rdma/hca").empty(); },
                          std::chrono::seconds(10)));
  kubelet.AssignPod("team-x", "pod-a", "rdma/hca", {"mlx5_0-0", "mlx5_1-0"});
  kubelet.AssignPod("team-x", "pod-b", "rdma/hca", {"mlx5_2-0"});
  auto own = add("pod-a", pod_a, "net1", R"(,"deviceID":"mlx5_1-0")");
  INFO(own.out << own.err);
  CHECK(own.exit_code == 0);
  // Pod B's NAD names pod A's HCA, by deviceID or by hca: refused, nothing moved.
  for (const char* extra : {R"(,"deviceID":"mlx5_0-0")", R"(,"hca":"mlx5_0")"}) {
    auto taken = add("pod-b", pod_b, "net1", extra);
    REQUIRE(taken.exit_code != 0);
    CHECK(json::parse(taken.out)["code"] == 108);
    CHECK_THAT(json::parse(taken.out)["msg"].get<std::string>(),
               Catch::Contains("mlx5_0 (0000:1a:00.0) was not allocated to pod team-x/pod-b") &&
                   Catch::Contains("mlx5_2-0"));
  }
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  // A pod with no allocation at all holds nothing.
  auto none = add("pod-c", pod_b, "net2", R"(,"hca":"mlx5_5")");
  CHECK(json::parse(none.out)["code"] == 108);
  CHECK_THAT(json::parse(none.out)["msg"].get<std::string>(),
             Catch::Contains("which has no kube-rdma allocation"));
  auto mine = add("pod-b", pod_b, "net1", R"(,"deviceID":"mlx5_2-0")");
  CHECK(mine.exit_code == 0);
  // A DRA claim of pod B holding mlx5_3, as the driver records it when it prepares the claim.
  // Released Multus passes each CDI device's name after '=' as deviceID: "<claim uid>_<PCI>".
  const std::string uid = "8c1f0000-0000-4000-8000-00000000000b";
  REQUIRE(contract::RecordClaim(
      node.allocations_dir(),
      {.claim = "team-x/pod-b-nics", .uid = uid, .pods = {"team-x/pod-b"}, .hcas = {"mlx5_3"}}));
  {
    // Another HCA under the claim's uid, or the HCA under a claim the pod does not hold: refused.
    auto not_in_claim = add("pod-b", pod_b, "net2", R"(,"deviceID":")" + uid + R"(_0000:9f:00.0")");
    CHECK(json::parse(not_in_claim.out)["code"] == 108);
    CHECK_THAT(json::parse(not_in_claim.out)["msg"].get<std::string>(),
               Catch::Contains("mlx5_4 (0000:9f:00.0) is not a device of DRA claim " + uid));
    std::string other = "8c1f0000-0000-4000-8000-00000000000c";
    auto not_held = add("pod-b", pod_b, "net2", R"(,"deviceID":")" + other + R"(_0000:3d:00.0")");
    CHECK(json::parse(not_held.out)["code"] == 108);
    CHECK_THAT(json::parse(not_held.out)["msg"].get<std::string>(),
               Catch::Contains("no prepared claim of pod team-x/pod-b"));
    // Pod A holds no such claim either, whatever HCA it names.
    auto not_a = add("pod-a", pod_a, "net2", R"(,"deviceID":")" + uid + R"(_0000:3d:00.0")");
    CHECK(json::parse(not_a.out)["code"] == 108);
  }
  auto claimed = add("pod-b", pod_b, "net2", R"(,"deviceID":")" + uid + R"(_0000:3d:00.0")");
  INFO(claimed.out << claimed.err);
  CHECK(claimed.exit_code == 0);
  CHECK_FALSE(node.links().GetByName(node.node(), "ens4f0np0"));  // mlx5_3's, now pod B's
  // DEL works whatever the device plugin says.
  dp.Stop();
  for (auto [pod, path, ifname] : {std::tuple{std::string("pod-a"), pod_a, "net1"},
                                   std::tuple{std::string("pod-b"), pod_b, "net1"},
                                   std::tuple{std::string("pod-b"), pod_b, "net2"}}) {
    CniCall del{"DEL", pod + "-sandbox", path, ifname, RdmaNetConf(node, "1.0.0")};
    del.args = args(pod);
    CHECK(node.Run(kBin, del).exit_code == 0);
  }
  for (const auto& n : Roce8Netdevs()) CHECK(node.links().GetByName(node.node(), n));
}

}  // namespace
}  // namespace kuberdma::sim
