// SPDX-License-Identifier: Apache-2.0
// Child-interface attachments for real: the `rdma` binary creates macvlan children of a veth that
// stands in for mlx5_0's netdev (roce8 fixture) inside private pod namespaces, with Debian's
// host-local for addresses. The parent never leaves the node; every undo path (DEL, namespace gone,
// record gone, repeated, crash after IPAM ADD, GC) deletes the child and releases its address.
// ipvlan needs a kernel module this machine lacks: the VM tier runs it (tests/vm).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kuberdma/cni/plan.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/sim/host_local.h"
#include "kuberdma/sim/sim_node.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kPlugins = KUBERDMA_CNI_PLUGINS_DIR;

struct Store {
  Store() {
    char tmpl[] = "/tmp/krt-child-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~Store() { fs::remove_all(dir); }
  size_t Held() const { return HostLocalHeld(dir + "/hl"); }
  std::string Script(const std::string& name, const std::string& body) const {
    std::string path = dir + "/bin/" + name;
    fs::create_directories(dir + "/bin");
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return dir + "/bin:" + kPlugins;
  }
  std::string dir;
};

// rail 1's NAD in shared mode: a macvlan child of mlx5_0's netdev per pod, host-local addresses.
std::string RailConf(const SimNode& node, const Store& s, const std::string& extra = "",
                     const std::string& ipam_type = "host-local",
                     const std::string& version = "1.0.0") {
  return R"({"cniVersion":")" + version + R"(","name":"rail1","type":"rdma","mode":"macvlan",
    "device":"ens1f0np0","linkState":"up","stateDir":")" +
         node.state_dir() + R"(","ipam":{"type":")" + ipam_type + R"(","dataDir":")" + s.dir +
         R"(/hl","ranges":[[{"subnet":"10.10.1.0/24"}]]})" + extra + "}";
}

CniCall Call(const std::string& cmd, const std::string& cid, const std::string& pod,
             const std::string& conf, const std::string& path = kPlugins) {
  return {cmd, cid, pod, "net1", conf, path};
}

// The IPv4 addresses of a link (IPAM's; the kernel's IPv6 link-local one comes with carrier).
std::vector<link::IpPrefix> AddressesOf(SimNode& node, const netns::NetNs& ns, int ifindex) {
  auto a = node.addrs().ListAddresses(ns, ifindex);
  std::vector<link::IpPrefix> v4;
  for (const auto& p : a ? *a : std::vector<link::IpPrefix>{}) {
    if (p.family == 4) v4.push_back(p);
  }
  return v4;
}

TEST_CASE("Two pods get macvlan children of one HCA netdev, each with its own address") {
  Store s;
  SimNode node(kRoce8, Roce8Netdevs());
  auto parent = *node.links().GetByName(node.node(), "ens1f0np0");
  std::string a = node.AddPod("pod-a");
  std::string b = node.AddPod("pod-b");
  auto add_a = node.Run(kBin, Call("ADD", "ca", a, RailConf(node, s)));
  auto add_b = node.Run(kBin, Call("ADD", "cb", b, RailConf(node, s)));
  INFO(add_a.out << add_a.err << add_b.out << add_b.err);
  REQUIRE(add_a.exit_code == 0);
  REQUIRE(add_b.exit_code == 0);
  for (const auto& [pod, cid] : {std::pair{a, "ca"}, std::pair{b, "cb"}}) {
    auto net1 = node.links().GetByName(node.Pod(pod), "net1");
    REQUIRE(net1);
    CHECK(net1->kind == "macvlan");
    CHECK(net1->mac == cni::ChildMac("rail1", cid, "net1"));
    CHECK(net1->mtu == parent.mtu);
    CHECK(net1->admin_up);
    CHECK(AddressesOf(node, node.Pod(pod), net1->ifindex).size() == 1);
  }
  CHECK(s.Held() == 2);
  // The parent is where it was, unrenamed, unchanged.
  auto still = node.links().GetByName(node.node(), "ens1f0np0");
  REQUIRE(still);
  CHECK(still->ifindex == parent.ifindex);
  CHECK(json::parse(add_a.out)["interfaces"][0]["mac"] == cni::ChildMac("rail1", "ca", "net1"));

  // Moving the shared HCA into a third pod is refused, naming its children.
  std::string c = node.AddPod("pod-c");
  auto move = node.Run(kBin, {"ADD", "cc", c, "net1",
                              R"({"cniVersion":"1.0.0","name":"rdma-net","type":"rdma",
    "hca":"mlx5_0","stateDir":")" +
                                  node.state_dir() + "\"}"});
  REQUIRE(move.exit_code != 0);
  CHECK(json::parse(move.out)["code"] == 100);
  CHECK_THAT(json::parse(move.out)["msg"].get<std::string>(), Catch::Contains("shared by 2"));

  for (const auto& [pod, cid] : {std::pair{a, "ca"}, std::pair{b, "cb"}}) {
    auto del = node.Run(kBin, Call("DEL", cid, pod, RailConf(node, s)));
    INFO(del.err);
    REQUIRE(del.exit_code == 0);
    CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  }
  CHECK(s.Held() == 0);
  CHECK(node.links().GetByName(node.node(), "ens1f0np0")->ifindex == parent.ifindex);
}

TEST_CASE("A child MTU above its parent's is error 7 and nothing is created or held") {
  Store s;
  SimNode node(kRoce8, Roce8Netdevs());
  auto parent = *node.links().GetByName(node.node(), "ens1f0np0");
  std::string pod = node.AddPod("pod");
  std::string conf = RailConf(node, s, ",\"mtu\":" + std::to_string(parent.mtu + 1));
  auto add = node.Run(kBin, Call("ADD", "c1", pod, conf));
  REQUIRE(add.exit_code != 0);
  json err = json::parse(add.out);
  CHECK(err["code"] == 7);
  CHECK_THAT(err["msg"].get<std::string>(), Catch::Contains("ens1f0np0"));
  CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  CHECK(s.Held() == 0);
}

TEST_CASE("Every undo path deletes the child and releases its address, for real") {
  Store s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string conf = RailConf(node, s);
  std::string path = kPlugins;
  SECTION("the pod's namespace is gone") {
    REQUIRE(node.Run(kBin, Call("ADD", "c1", pod, conf)).exit_code == 0);
    node.DeletePod(pod);  // the kernel deletes the child with it
    REQUIRE(node.Run(kBin, Call("DEL", "c1", pod, conf)).exit_code == 0);
  }
  SECTION("the record is gone") {
    REQUIRE(node.Run(kBin, Call("ADD", "c1", pod, conf)).exit_code == 0);
    fs::remove(node.state_dir() + "/rail1/c1:net1.json");
    auto del = node.Run(kBin, Call("DEL", "c1", pod, conf));
    INFO(del.err);
    REQUIRE(del.exit_code == 0);
    CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  }
  SECTION("DEL repeated") {
    REQUIRE(node.Run(kBin, Call("ADD", "c1", pod, conf)).exit_code == 0);
    REQUIRE(node.Run(kBin, Call("DEL", "c1", pod, conf)).exit_code == 0);
    REQUIRE(node.Run(kBin, Call("DEL", "c1", pod, conf)).exit_code == 0);
    CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  }
  SECTION("the plugin is killed right after IPAM ADD") {
    path = s.Script("crash-ipam", "out=$(" + kPlugins +
                                      "/host-local); rc=$?\n"
                                      "[ \"$CNI_COMMAND\" = ADD ] && kill -9 $PPID\n"
                                      "printf '%s' \"$out\"; exit $rc\n");
    conf = RailConf(node, s, "", "crash-ipam");
    auto add = node.Run(kBin, Call("ADD", "c1", pod, conf, path));
    CHECK(add.exit_code == 128 + SIGKILL);
    CHECK(s.Held() == 1);
    CHECK(node.links().GetByName(node.Pod(pod), "net1"));  // created, then the crash
    auto del = node.Run(kBin, Call("DEL", "c1", pod, conf, path));
    INFO(del.err);
    REQUIRE(del.exit_code == 0);
    CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  }
  SECTION("GC of an attachment the runtime no longer lists") {
    REQUIRE(node.Run(kBin, Call("ADD", "c1", pod, conf)).exit_code == 0);
    std::string gc = RailConf(node, s, R"(,"cni.dev/valid-attachments":[])", "host-local", "1.1.0");
    auto r = node.Run(kBin, {"GC", "", "", "", gc, path});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  }
  CHECK(s.Held() == 0);
  CHECK(fs::is_empty(node.state_dir() + "/rail1"));
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
}

}  // namespace
}  // namespace kuberdma::sim
