// SPDX-License-Identifier: Apache-2.0
// IPAM delegation over the fakes: addresses and routes applied and reported in every version,
// every undo path releasing the address (each failing call of ADD, DEL without state, after the
// namespace died, repeated, after a crash), CHECK, GC, version negotiation, errors passed through.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "fake_world.h"
#include "kuberdma/cni/plugin.h"

namespace kuberdma::cni {
namespace {

using fakes::FakeIpam;
using fakes::FakeWorld;
using fakes::kHostPath;
using fakes::TestPolicy;
using nlohmann::json;

constexpr const char* kPod = "/var/run/netns/pod-a";

struct Node {
  Node() : root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8"), ipam(world) {
    char tmpl[] = "/tmp/kuberdma-ipam-XXXXXX";
    state_dir = mkdtemp(tmpl);
    for (int i = 0; i < 8; ++i) {
      world.AddLink(kHostPath, "ens" + std::to_string(i + 1) + "f0np0",
                    "b8:3f:d2:00:0" + std::to_string(i) + ":01", 1500, true);
      world.AddRdma(kHostPath, "mlx5_" + std::to_string(i), static_cast<uint32_t>(i + 1));
    }
    world.AddNamespace(kPod);
  }
  ~Node() { std::filesystem::remove_all(state_dir); }

  NetConf Conf(const std::string& version = "1.1.0", const std::string& extra = "") const {
    auto c = ParseConfig(R"({"cniVersion":")" + version +
                             R"(","name":"roce-rail1","type":"rdma","mtu":9000,"linkState":"up",
        "ipam":{"type":"fake","range":"10.9.0.0/24"},"stateDir":")" +
                             state_dir + "\"" + extra + "}",
                         Command::kAdd, TestPolicy());
    REQUIRE(c);
    return *c;
  }
  Plugin MakePlugin() {
    return Plugin({world.links(), world.rdma(), world.namespaces(), root, &world.addrs(), &ipam});
  }
  std::vector<AttachmentRecord> Records() const { return *StateStore(state_dir).List(); }

  sysfs::SysfsRoot root;
  std::string state_dir;
  FakeWorld world;
  FakeIpam ipam;
};

Request Req(const std::string& ifname = "net1", const std::string& cid = "c1",
            const char* ns = kPod) {
  return Request{.command = Command::kAdd, .container_id = cid, .netns = ns, .ifname = ifname};
}

TEST_CASE(
    "ADD applies IPAM's address and routes to the pod interface and reports them in every "
    "version") {
  for (const auto& v : SupportedVersions()) {
    INFO(v);
    Node n;
    std::string before = n.world.Snapshot();
    Plugin p = n.MakePlugin();
    auto r = p.Add(Req(), n.Conf(v));
    REQUIRE(r);
    const json& ip = (*r)["ips"][0];
    CHECK(ip["address"] == "10.9.0.2/24");
    CHECK(ip["gateway"] == "10.9.0.1");
    CHECK(ip["interface"] == 0);
    CHECK((*r)["interfaces"][0]["name"] == "net1");
    CHECK(ip.contains("version") == (CompareVersions(v, "1.0.0") < 0));
    CHECK((*r)["routes"][0]["dst"] == "0.0.0.0/0");
    CHECK((*r)["dns"]["nameservers"][0] == "10.9.0.53");
    auto net1 = n.world.FindLink(kPod, "net1");
    REQUIRE(net1);
    CHECK(net1->admin_up);
    CHECK(n.world.Addresses() ==
          std::vector<std::string>{std::string(kPod) + " #" + std::to_string(net1->ifindex) +
                                   " 10.9.0.2/24"});
    CHECK(n.world.Routes() ==
          std::vector<std::string>{std::string(kPod) + " 0.0.0.0/0 via 10.9.0.1 #" +
                                   std::to_string(net1->ifindex)});
    REQUIRE(p.Del(Req(), n.Conf(v)));
    CHECK(n.ipam.allocated.empty());
    CHECK(n.world.Addresses().empty());
    CHECK(n.world.Snapshot() == before);
  }
}

TEST_CASE("A repeated ADD answers the same addresses without a second allocation") {
  Node n;
  Plugin p = n.MakePlugin();
  auto first = p.Add(Req(), n.Conf("1.0.0"));
  REQUIRE(first);
  auto second = p.Add(Req(), n.Conf("1.0.0"));
  REQUIRE(second);
  CHECK(*first == *second);
  CHECK(n.ipam.calls == std::vector<std::string>{"ADD c1/net1"});
}

TEST_CASE(
    "Every failing call of an ADD with IPAM is undone: device home, address released, no "
    "state") {
  int total = 0;
  {
    Node n;
    Plugin p = n.MakePlugin();
    REQUIRE(p.Add(Req(), n.Conf()));
    total = n.world.calls;
  }
  for (int fail_at = 1; fail_at <= total; ++fail_at) {
    Node n;
    std::string before = n.world.Snapshot();
    Plugin p = n.MakePlugin();
    n.world.fail_at = fail_at;
    auto r = p.Add(Req(), n.Conf());
    INFO("failed call " << fail_at << " (" << n.world.trace.at(static_cast<size_t>(fail_at - 1))
                        << ") of " << total << (r ? "" : ": " + r.error().msg));
    n.world.fail_at = 0;
    if (r) REQUIRE(p.Del(Req(), n.Conf()));  // a failed lookup only skipped a candidate HCA
    CHECK(n.world.Snapshot() == before);
    CHECK(n.world.Addresses().empty());
    CHECK(n.ipam.allocated.empty());
    CHECK(n.Records().empty());
  }
}

TEST_CASE(
    "An IPAM failure is passed through with its code, naming the plugin, and nothing is "
    "left") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  Node counting;
  {
    Plugin c = counting.MakePlugin();
    REQUIRE(c.Add(Req(), counting.Conf()));
  }
  size_t ipam_add = 0;
  while (counting.world.trace[ipam_add].rfind("ipam ADD", 0) != 0) ++ipam_add;
  n.world.fail_at = static_cast<int>(ipam_add + 1);
  auto r = p.Add(Req(), n.Conf());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kTryAgainLater);  // the IPAM plugin's own code
  CHECK_THAT(r.error().msg, Catch::Contains("IPAM fake") && Catch::Contains("attach mlx5_0"));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.Records().empty());
  CHECK(n.ipam.calls.back() == "DEL c1/net1");  // released although ADD failed
}

TEST_CASE("DEL releases the address without state, after the namespace died, and when repeated") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req("net1", "c1"), n.Conf()));
  REQUIRE(p.Add(Req("net2", "c1"), n.Conf()));
  n.world.KillNamespace(kPod);
  REQUIRE(p.Del(Req("net1", "c1"), n.Conf()));
  CHECK_FALSE(n.ipam.allocated.contains("c1/net1"));
  REQUIRE(p.Del(Req("net1", "c1"), n.Conf()));  // repeated: IPAM DEL again, still fine
  // An address IPAM handed out for an attachment this plugin never recorded.
  n.ipam.allocated["ghost/net1"] = "10.9.0.99/24";
  REQUIRE(p.Del(Req("net1", "ghost"), n.Conf()));
  CHECK_FALSE(n.ipam.allocated.contains("ghost/net1"));
  n.world.AddNamespace(kPod);
  REQUIRE(p.Del(Req("net2", "c1"), n.Conf()));
  CHECK(n.ipam.allocated.empty());
  CHECK(n.Records().empty());
}

TEST_CASE("A crash after IPAM ADD leaves a record that DEL finishes, releasing the address") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(), n.Conf()));
  StateStore store(n.state_dir);
  auto rec = **store.Load("roce-rail1", "c1", "net1");
  rec.done = false;
  rec.ipam->result = nullptr;  // died between IPAM ADD and recording its answer
  REQUIRE(store.Save(rec));
  REQUIRE(p.Del(Req(), n.Conf("1.1.0", R"(,"ipam":{})")));  // the runtime's config lost the section
  CHECK(n.ipam.allocated.empty());                          // the record's own section released it
  CHECK(n.world.Snapshot() == before);
}

TEST_CASE("CHECK verifies IPAM's address is on the interface and asks IPAM") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(), n.Conf()));
  REQUIRE(p.Check(Req(), n.Conf()));
  CHECK(n.ipam.calls.back() == "CHECK c1/net1");
  auto pod = n.world.namespaces().Open(kPod);
  auto l = n.world.links().GetByName(*pod, "net1");
  REQUIRE(n.world.addrs().DeleteAddress(*pod, l->ifindex, *link::ParsePrefix("10.9.0.2/24")));
  auto drift = p.Check(Req(), n.Conf());
  REQUIRE_FALSE(drift);
  CHECK(drift.error().code == kCheckFailed);
  CHECK_THAT(drift.error().msg, Catch::Contains("10.9.0.2/24") && Catch::Contains("fake"));
}

TEST_CASE("GC releases the addresses of stale attachments, and calls IPAM GC where it exists") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req("net1", "keep"), n.Conf()));
  REQUIRE(p.Add(Req("net2", "stale"), n.Conf()));
  auto gc =
      n.Conf("1.1.0", R"(,"cni.dev/valid-attachments":[{"containerID":"keep","ifname":"net1"}])");
  REQUIRE(p.Gc(gc));
  CHECK(n.ipam.allocated.size() == 1);
  CHECK(n.ipam.allocated.contains("keep/net1"));
  CHECK(std::find(n.ipam.calls.begin(), n.ipam.calls.end(), "GC /") == n.ipam.calls.end());
  n.ipam.versions.push_back("1.1.0");
  REQUIRE(p.Gc(gc));
  CHECK(n.ipam.calls.back() == "GC /");
  CHECK(n.ipam.configs.back().contains("cni.dev/valid-attachments"));
}

TEST_CASE("An IPAM plugin older than the config's cniVersion is spoken to in its newest one") {
  Node n;
  n.ipam.versions = {"0.3.0", "0.3.1"};
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(), n.Conf("1.1.0"));
  REQUIRE(r);
  CHECK((*r)["cniVersion"] == "1.1.0");
  CHECK(n.ipam.configs.back()["cniVersion"] == "0.3.1");
  CHECK((*r)["ips"][0]["address"] == "10.9.0.2/24");
}

TEST_CASE("linkState down with IPAM: addresses applied, a gateway route refused, all undone") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto conf = n.Conf();
  conf.link_state = LinkState::kDown;
  auto r = p.Add(Req(), conf);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().msg, Catch::Contains("unreachable"));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.ipam.allocated.empty());
}

TEST_CASE("An ipam section without a type is error 7 naming ipam.type") {
  auto c = ParseConfig(R"({"cniVersion":"1.0.0","name":"n","type":"rdma","ipam":{"range":"x"}})",
                       Command::kAdd, TestPolicy());
  REQUIRE_FALSE(c);
  CHECK(c.error().code == kInvalidConfig);
  CHECK_THAT(c.error().msg, Catch::Contains("ipam.type"));
  CHECK(ParseConfig(R"({"cniVersion":"1.0.0","name":"n","type":"rdma","ipam":"host-local"})",
                    Command::kAdd, TestPolicy())
            .error()
            .code == kInvalidConfig);
  CHECK_FALSE(ParseConfig(R"({"cniVersion":"1.0.0","name":"n","type":"rdma","ipam":{}})",
                          Command::kAdd, TestPolicy())
                  ->ipam);
}

// ---- Routed rails: "addresses": "node" ----

// ens1f0np0 is rail 1 with the node's rail address, its connected route and a route to the other
// rails' subnets through the leaf, as a routed rail-optimised fabric configures the host.
struct RoutedNode : Node {
  RoutedNode() {
    auto host = *world.namespaces().Host();
    int ens1 = world.FindLink(kHostPath, "ens1f0np0")->ifindex;
    auto& a = world.addrs();
    REQUIRE(a.AddAddress(host, ens1, {.family = 4, .address = "10.10.1.7", .prefix_len = 24}));
    REQUIRE(a.AddRoute(
        host, {.dst = {.family = 4, .address = "10.10.1.0", .prefix_len = 24}, .ifindex = ens1}));
    REQUIRE(a.AddRoute(host, {.dst = {.family = 4, .address = "10.10.0.0", .prefix_len = 16},
                              .gateway = "10.10.1.1",
                              .ifindex = ens1}));
  }
  NetConf Routed(const std::string& extra = "") const {
    auto c = ParseConfig(R"({"cniVersion":"1.1.0","name":"rail1","type":"rdma","mtu":9000,
        "linkState":"up","rail":1,"addresses":"node","stateDir":")" +
                             state_dir + "\"" + extra + "}",
                         Command::kAdd, TestPolicy());
    REQUIRE(c);
    return *c;
  }
  Plugin MakeRouted() {
    return Plugin({world.links(), world.rdma(), world.namespaces(), root, &world.addrs(), &ipam,
                   rails::NodeConfig{.rails = {"ens1f0np0", "ens2f0np0"}}});
  }
};

TEST_CASE("Routed rails: the node's rail address and routes go into the pod and come back on DEL") {
  RoutedNode n;
  std::vector<std::string> addrs = n.world.Addresses(), routes = n.world.Routes();
  std::string before = n.world.Snapshot();
  Plugin p = n.MakeRouted();
  auto r = p.Add(Req(), n.Routed());
  REQUIRE(r);
  CHECK((*r)["ips"][0]["address"] == "10.10.1.7/24");
  CHECK(n.ipam.calls.empty());  // no IPAM plugin is run
  int net1 = n.world.FindLink(kPod, "net1")->ifindex;
  CHECK_THAT(n.world.Routes(), Catch::VectorContains(std::string(kPod) + " 10.10.0.0/16 via " +
                                                     "10.10.1.1 #" + std::to_string(net1)));
  CHECK_THAT(n.world.Addresses(), Catch::VectorContains(std::string(kPod) + " #" +
                                                        std::to_string(net1) + " 10.10.1.7/24"));
  CHECK(p.Check(Req(), n.Routed()));
  REQUIRE(p.Del(Req(), n.Routed()));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.world.Addresses() == addrs);
  int ens1 = n.world.FindLink(kHostPath, "ens1f0np0")->ifindex;
  CHECK_THAT(n.world.Routes(), Catch::VectorContains(std::string(kHostPath) + " 10.10.0.0/16 via " +
                                                     "10.10.1.1 #" + std::to_string(ens1)));
}

TEST_CASE("Routed rails: every failing call of ADD leaves the rail on the node with its address") {
  int total = 0;
  {
    RoutedNode n;
    Plugin p = n.MakeRouted();
    REQUIRE(p.Add(Req(), n.Routed()));
    total = n.world.calls;
  }
  for (int fail_at = 1; fail_at <= total; ++fail_at) {
    RoutedNode n;
    std::string before = n.world.Snapshot();
    std::vector<std::string> addrs = n.world.Addresses();
    Plugin p = n.MakeRouted();
    n.world.fail_at = fail_at;
    auto r = p.Add(Req(), n.Routed());
    INFO("failed call " << fail_at << " (" << n.world.trace.at(static_cast<size_t>(fail_at - 1))
                        << ") of " << total << (r ? "" : ": " + r.error().msg));
    n.world.fail_at = 0;
    if (r) REQUIRE(p.Del(Req(), n.Routed()));
    if (!r && r.error().code == kRollbackIncomplete) REQUIRE(p.Del(Req(), n.Routed()));
    CHECK(n.world.Snapshot() == before);
    CHECK(n.world.Addresses() == addrs);
    CHECK(n.Records().empty());
  }
}

TEST_CASE("Routed rails: refused with ipam, in child modes, without an address or a declaration") {
  RoutedNode n;
  auto both = ParseConfig(R"({"cniVersion":"1.1.0","name":"x","type":"rdma","addresses":"node",
      "ipam":{"type":"host-local"}})",
                          Command::kAdd, TestPolicy());
  REQUIRE_FALSE(both);
  CHECK_THAT(both.error().msg, Catch::Contains("keep one"));
  CHECK_FALSE(ParseConfig(R"({"cniVersion":"1.1.0","name":"x","type":"rdma","addresses":"node",
      "mode":"macvlan"})",
                          Command::kAdd, TestPolicy()));
  CHECK_FALSE(ParseConfig(R"({"cniVersion":"1.1.0","name":"x","type":"rdma","addresses":"pod"})",
                          Command::kAdd, TestPolicy()));
  CHECK_FALSE(ParseConfig(R"({"cniVersion":"1.1.0","name":"x","type":"rdma",
      "ipam":{"type":"rdma:node-addresses"}})",
                          Command::kAdd, TestPolicy()));
  Plugin p = n.MakeRouted();
  auto bare = p.Add(Req(), n.Routed(R"(,"rail":2)"));  // ens2f0np0 has no address
  REQUIRE_FALSE(bare);
  CHECK_THAT(bare.error().msg, Catch::Contains("ens2f0np0 (mlx5_1) has no address on the node"));
  Plugin undeclared = n.MakePlugin();
  NetConf named = n.Routed();
  named.rail.reset();
  named.selector = {SelectorKind::kHca, "mlx5_0"};
  auto own = undeclared.Add(Req(), named);
  REQUIRE_FALSE(own);
  CHECK(own.error().code == kNodeOwnNic);  // an address no declared rail has: the node's
}

TEST_CASE("{rail} in the ipam section becomes the rail of the HCA the attachment got") {
  Node n;
  Plugin p({n.world.links(), n.world.rdma(), n.world.namespaces(), n.root, &n.world.addrs(),
            &n.ipam, rails::NodeConfig{.rails = {"ens3f0np0", "ens1f0np0"}}});
  auto conf = ParseConfig(R"({"cniVersion":"1.1.0","name":"net-a","type":"rdma","hca":"mlx5_0",
      "ipam":{"type":"fake","range":"10.10.{rail}.0/24","routes":[{"dst":"10.{rail}.0.0/16"}]},
      "stateDir":")" + n.state_dir +
                              "\"}",
                          Command::kAdd, TestPolicy());
  REQUIRE(conf);
  REQUIRE(p.Add(Req(), *conf));
  REQUIRE_FALSE(n.ipam.configs.empty());
  CHECK(n.ipam.configs[0]["ipam"]["range"] == "10.10.2.0/24");  // mlx5_0 is declared rail 2
  CHECK(n.ipam.configs[0]["ipam"]["routes"][0]["dst"] == "10.2.0.0/16");
  REQUIRE(p.Del(Req(), *conf));
  CHECK(n.ipam.configs.back()["ipam"]["range"] == "10.10.2.0/24");  // DEL releases from the same
  conf->selector = {SelectorKind::kHca, "mlx5_5"};
  auto none = p.Add(Req(), *conf);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().msg, Catch::Contains("mlx5_5 is on no rail"));
}

}  // namespace
}  // namespace kuberdma::cni
