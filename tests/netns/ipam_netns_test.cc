// SPDX-License-Identifier: Apache-2.0
// IPAM delegation for real: the `rdma` binary runs Debian's host-local and static plugins
// (containernetworking-plugins) on veths in private namespaces. Addresses must really be on net1
// and routes in the pod's table; every DEL, failure and crash must leave host-local's store empty.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kuberdma/cni/ipam.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/sim/sim_node.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kPlugins = KUBERDMA_CNI_PLUGINS_DIR;

// A scratch directory for host-local's store and test IPAM scripts, removed at the end.
struct Scratch {
  Scratch() {
    char tmpl[] = "/tmp/krt-ipam-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~Scratch() { fs::remove_all(dir); }
  // Writes an executable script named `name`; returns the CNI_PATH that finds it first.
  std::string Script(const std::string& name, const std::string& body) const {
    std::string path = dir + "/bin/" + name;
    fs::create_directories(dir + "/bin");
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return dir + "/bin:" + kPlugins;
  }
  // The addresses host-local holds for `network` (its store has one file per address).
  std::set<std::string> Allocated(const std::string& network) const {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir + "/hl/" + network, ec)) {
      std::string n = e.path().filename();
      if (link::ParseAddress(n)) out.insert(n);
    }
    return out;
  }
  std::string dir;
};

std::string HostLocal(const SimNode& node, const Scratch& s, const std::string& version,
                      const std::string& range_extra = "", const std::string& type = "host-local",
                      const std::string& routes = R"([{"dst":"10.20.0.0/16"}])") {
  return R"({"cniVersion":")" + version + R"(","name":"roce-rail1","type":"rdma","mtu":9000,
    "linkState":"up","stateDir":")" +
         node.state_dir() + R"(","ipam":{"type":")" + type + R"(","dataDir":")" + s.dir +
         R"(/hl","ranges":[[{"subnet":"10.10.1.0/24",
    "gateway":"10.10.1.1")" +
         range_extra + R"(}]],"routes":)" + routes + "}}";
}

CniCall Call(const std::string& cmd, const std::string& cid, const std::string& pod,
             const std::string& ifname, const std::string& conf,
             const std::string& path = kPlugins) {
  return {cmd, cid, pod, ifname, conf, path};
}

bool HasRoute(SimNode& node, const netns::NetNs& pod, int ifindex, const std::string& dst,
              const std::string& gw) {
  auto routes = node.addrs().ListRoutes(pod, ifindex);
  if (!routes) return false;
  return std::any_of(routes->begin(), routes->end(),
                     [&](const link::Route& r) { return r.dst.Cidr() == dst && r.gateway == gw; });
}

TEST_CASE("host-local's address is on net1 with its routes, in the result, and released on DEL") {
  for (const std::string version : {"0.3.1", "1.0.0", "1.1.0"}) {
    INFO(version);
    Scratch s;
    SimNode node(kRoce8, Roce8Netdevs());
    std::string pod = node.AddPod("pod");
    auto add = node.Run(kBin, Call("ADD", "c1", pod, "net1", HostLocal(node, s, version)));
    INFO(add.out << add.err);
    REQUIRE(add.exit_code == 0);
    json r = json::parse(add.out);
    CHECK(r["cniVersion"] == version);
    REQUIRE(r["ips"].size() == 1);
    CHECK(r["ips"][0]["address"] == "10.10.1.2/24");
    CHECK(r["ips"][0]["gateway"] == "10.10.1.1");
    CHECK(r["ips"][0]["interface"] == 0);
    CHECK(r["ips"][0].contains("version") == (version == "0.3.1"));
    CHECK(r["routes"][0]["dst"] == "10.20.0.0/16");
    auto ns = node.Pod(pod);
    auto net1 = node.links().GetByName(ns, "net1");
    REQUIRE(net1);
    CHECK(net1->admin_up);
    auto addrs = node.addrs().ListAddresses(ns, net1->ifindex);
    REQUIRE(addrs);
    CHECK(std::count(addrs->begin(), addrs->end(), *link::ParsePrefix("10.10.1.2/24")) == 1);
    CHECK(HasRoute(node, ns, net1->ifindex, "10.20.0.0/16", "10.10.1.1"));
    CHECK(s.Allocated("roce-rail1") == std::set<std::string>{"10.10.1.2"});
    auto check = node.Run(kBin, Call("CHECK", "c1", pod, "net1", HostLocal(node, s, version)));
    if (version != "0.3.1") CHECK(check.exit_code == 0);
    auto del = node.Run(kBin, Call("DEL", "c1", pod, "net1", HostLocal(node, s, version)));
    INFO(del.out << del.err);
    REQUIRE(del.exit_code == 0);
    CHECK(s.Allocated("roce-rail1").empty());
    CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  }
}

TEST_CASE("static IPAM gives net1 its address and a default route through the gateway") {
  Scratch s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string conf = R"({"cniVersion":"1.0.0","name":"roce-static","type":"rdma","linkState":"up",
    "stateDir":")" + node.state_dir() +
                     R"(","ipam":{"type":"static","addresses":[
    {"address":"10.30.0.5/24","gateway":"10.30.0.1"},{"address":"fd00:30::5/64"}],
    "routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["10.30.0.53"]}}})";
  auto add = node.Run(kBin, Call("ADD", "c2", pod, "net1", conf));
  INFO(add.out << add.err);
  REQUIRE(add.exit_code == 0);
  json r = json::parse(add.out);
  CHECK(r["ips"].size() == 2);
  CHECK(r["dns"]["nameservers"][0] == "10.30.0.53");
  auto ns = node.Pod(pod);
  auto net1 = *node.links().GetByName(ns, "net1");
  auto addrs = *node.addrs().ListAddresses(ns, net1.ifindex);
  CHECK(std::count(addrs.begin(), addrs.end(), *link::ParsePrefix("10.30.0.5/24")) == 1);
  CHECK(std::count(addrs.begin(), addrs.end(), *link::ParsePrefix("fd00:30::5/64")) == 1);
  CHECK(HasRoute(node, ns, net1.ifindex, "0.0.0.0/0", "10.30.0.1"));
  REQUIRE(node.Run(kBin, Call("DEL", "c2", pod, "net1", conf)).exit_code == 0);
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
}

TEST_CASE("A failing IPAM fails ADD with its own code, and the device is home again") {
  Scratch s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  // Refuses ADD as a busy pool would; DEL (of nothing) succeeds.
  std::string path =
      s.Script("busy-ipam",
               "cat >/dev/null\n[ \"$CNI_COMMAND\" = DEL ] && exit 0\n"
               "echo '{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"pool busy\"}'\n"
               "exit 1\n");
  auto add = node.Run(
      kBin, Call("ADD", "c3", pod, "net1", HostLocal(node, s, "1.0.0", "", "busy-ipam"), path));
  REQUIRE(add.exit_code != 0);
  json err = json::parse(add.out);
  CHECK(err["code"] == 11);
  CHECK_THAT(err["msg"].get<std::string>(),
             Catch::Contains("IPAM busy-ipam: pool busy") && Catch::Contains("mlx5_0"));
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  CHECK_FALSE(node.links().GetByName(node.Pod(pod), "net1"));
  CHECK(fs::is_empty(node.state_dir() + "/roce-rail1"));
  auto missing = node.Run(
      kBin, Call("ADD", "c3", pod, "net1", HostLocal(node, s, "1.0.0", "", "no-such-ipam"), path));
  CHECK(json::parse(missing.out)["code"] == cni::kIpamFailed);
  CHECK_THAT(json::parse(missing.out)["msg"].get<std::string>(),
             Catch::Contains("failed to find plugin \"no-such-ipam\""));
}

TEST_CASE(
    "An exhausted range, and a route the kernel refuses, undo the ADD and release the "
    "address") {
  Scratch s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string one = R"(,"rangeStart":"10.10.1.7","rangeEnd":"10.10.1.7")";
  REQUIRE(
      node.Run(kBin, Call("ADD", "c4", pod, "net1", HostLocal(node, s, "1.0.0", one))).exit_code ==
      0);
  auto full = node.Run(kBin, Call("ADD", "c4", pod, "net2", HostLocal(node, s, "1.0.0", one)));
  REQUIRE(full.exit_code != 0);
  CHECK_THAT(json::parse(full.out)["msg"].get<std::string>(), Catch::Contains("IPAM host-local"));
  CHECK(node.links().GetByName(node.node(), "ens2f0np0"));
  CHECK(s.Allocated("roce-rail1") == std::set<std::string>{"10.10.1.7"});
  // A gateway outside every subnet of the pod: IPAM ADD succeeds, the kernel refuses the route.
  auto bad = node.Run(kBin, Call("ADD", "c5", pod, "net3",
                                 HostLocal(node, s, "1.0.0", "", "host-local",
                                           R"([{"dst":"10.40.0.0/16","gw":"192.168.99.1"}])")));
  REQUIRE(bad.exit_code != 0);
  CHECK_THAT(json::parse(bad.out)["msg"].get<std::string>(), Catch::Contains("route"));
  CHECK(node.links().GetByName(node.node(), "ens3f0np0"));
  CHECK(s.Allocated("roce-rail1") == std::set<std::string>{"10.10.1.7"});  // only c4/net1's
  REQUIRE(
      node.Run(kBin, Call("DEL", "c4", pod, "net1", HostLocal(node, s, "1.0.0", one))).exit_code ==
      0);
  CHECK(s.Allocated("roce-rail1").empty());
}

TEST_CASE("A plugin killed right after IPAM ADD leaves state that DEL undoes, address and all") {
  Scratch s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string path = s.Script("crash-ipam", "out=$(" + kPlugins +
                                                "/host-local); rc=$?\n"
                                                "[ \"$CNI_COMMAND\" = ADD ] && kill -9 $PPID\n"
                                                "printf '%s' \"$out\"; exit $rc\n");
  std::string conf = HostLocal(node, s, "1.0.0", "", "crash-ipam");
  auto add = node.Run(kBin, Call("ADD", "c6", pod, "net1", conf, path));
  CHECK(add.exit_code == 128 + SIGKILL);
  CHECK(s.Allocated("roce-rail1") == std::set<std::string>{"10.10.1.2"});
  auto del = node.Run(kBin, Call("DEL", "c6", pod, "net1", conf, path));
  INFO(del.out << del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(s.Allocated("roce-rail1").empty());
  CHECK(node.links().GetByName(node.node(), "ens1f0np0"));
  CHECK(fs::is_empty(node.state_dir() + "/roce-rail1"));
}

TEST_CASE("DEL releases the address without state and after the pod's namespace died") {
  Scratch s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string conf = HostLocal(node, s, "1.0.0");
  REQUIRE(node.Run(kBin, Call("ADD", "c7", pod, "net1", conf)).exit_code == 0);
  node.DeletePod(pod);  // the veth dies with it; its address must not
  auto del = node.Run(kBin, Call("DEL", "c7", pod, "net1", conf));
  INFO(del.out << del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(s.Allocated("roce-rail1").empty());
  // host-local allocated through the same exec helper the plugin uses, never recorded by rdma.
  auto hl = cni::RunPlugin(kPlugins + "/host-local",
                           cni::CniEnvironment({.command = cni::Command::kAdd,
                                                .container_id = "ghost",
                                                .netns = "/proc/self/ns/net",
                                                .ifname = "net1",
                                                .path = kPlugins}),
                           conf, 10000);
  REQUIRE(hl.exit_code == 0);
  CHECK(s.Allocated("roce-rail1").size() == 1);
  REQUIRE(node.Run(kBin, Call("DEL", "ghost", "", "net1", conf)).exit_code == 0);
  CHECK(s.Allocated("roce-rail1").empty());
}

TEST_CASE("GC releases the address of every attachment that is no longer valid") {
  Scratch s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string pod = node.AddPod("pod");
  std::string conf = HostLocal(node, s, "1.0.0");
  REQUIRE(node.Run(kBin, Call("ADD", "live", pod, "net1", conf)).exit_code == 0);
  REQUIRE(node.Run(kBin, Call("ADD", "gone", pod, "net2", conf)).exit_code == 0);
  CHECK(s.Allocated("roce-rail1").size() == 2);
  std::string gc = conf.substr(0, conf.size() - 1) +
                   R"(,"cni.dev/valid-attachments":[{"containerID":"live","ifname":"net1"}]})";
  gc.replace(gc.find("\"1.0.0\""), 7, "\"1.1.0\"");
  auto r = node.Run(kBin, Call("GC", "", "", "", gc));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(s.Allocated("roce-rail1") == std::set<std::string>{"10.10.1.2"});
  CHECK(node.links().GetByName(node.node(), "ens2f0np0"));
}

TEST_CASE("Sixteen pods drawing from one range at once get sixteen different addresses") {
  Scratch s;
  std::string dir = s.dir + "/mini";
  std::vector<std::string> netdevs;
  for (int i = 0; i < 16; ++i) netdevs.push_back("hca" + std::to_string(i));
  WriteMiniNode(dir, 16, "hca");
  SimNode node(dir, netdevs);
  std::string conf = HostLocal(node, s, "1.0.0");
  std::vector<CniCall> adds;
  std::vector<std::string> pods;
  for (int i = 0; i < 16; ++i) {
    pods.push_back(node.AddPod("p" + std::to_string(i)));
    adds.push_back(Call("ADD", "pod" + std::to_string(i), pods.back(), "net1", conf));
  }
  auto runs = node.RunAll(kBin, adds);
  std::set<std::string> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    INFO("pod " << i << ": " << runs[i].out << runs[i].err);
    REQUIRE(runs[i].exit_code == 0);
    std::string ip = json::parse(runs[i].out)["ips"][0]["address"];
    seen.insert(ip);
    auto ns = node.Pod(pods[i]);
    auto l = *node.links().GetByName(ns, "net1");
    auto have = *node.addrs().ListAddresses(ns, l.ifindex);
    CHECK(std::count(have.begin(), have.end(), *link::ParsePrefix(ip)) == 1);
  }
  CHECK(seen.size() == 16);
  CHECK(s.Allocated("roce-rail1").size() == 16);
  for (auto& c : adds) c.command = "DEL";
  for (const auto& r : node.RunAll(kBin, adds)) CHECK(r.exit_code == 0);
  CHECK(s.Allocated("roce-rail1").empty());
}

}  // namespace
}  // namespace kuberdma::sim
