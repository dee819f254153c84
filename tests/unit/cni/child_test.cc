// SPDX-License-Identifier: Apache-2.0
// Child-interface attachments (mode macvlan / ipvlan) over FakeWorld and the roce8 fixture: many
// pods on one HCA, the HCA and its netdev never leaving the host, and every undo path deleting the
// child and releasing its address (each call of ADD made to fail in turn, namespace gone, record
// gone, repeated, a crash after IPAM ADD, GC).
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "fake_world.h"
#include "kuberdma/base/files.h"
#include "kuberdma/cni/plugin.h"

namespace kuberdma::cni {
namespace {

using fakes::FakeIpam;
using fakes::FakeWorld;
using fakes::kHostPath;
using fakes::TestPolicy;
using nlohmann::json;

constexpr const char* kPodA = "/var/run/netns/pod-a";
constexpr const char* kPodB = "/var/run/netns/pod-b";

struct Node {
  explicit Node(const std::string& fixture = "roce8")
      : root(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + fixture), ipam(world) {
    char tmpl[] = "/tmp/kuberdma-child-XXXXXX";
    state_dir = mkdtemp(tmpl);
    for (int i = 0; i < 8; ++i) {
      std::string name = "ens" + std::to_string(i + 1) + "f0np0";
      if (fixture != "roce8") {
        name = sysfs::ReadHca(root, "mlx5_" + std::to_string(i), sysfs::HcaDetail::kIdentity)
                   ->netdevs.front();
      }
      world.AddLink(kHostPath, name, "b8:3f:d2:00:0" + std::to_string(i) + ":01", 9000, true);
      world.AddRdma(kHostPath, "mlx5_" + std::to_string(i), static_cast<uint32_t>(i + 1));
    }
    world.SetMode(rdma::NetnsMode::kShared);
    world.AddNamespace(kPodA);
    world.AddNamespace(kPodB);
  }
  ~Node() { std::filesystem::remove_all(state_dir); }

  // rail 1 as a per-rail NAD names it: the HCA's netdev, a child per pod, host-local-like IPAM.
  NetConf Conf(const std::string& extra = R"(,"mode":"macvlan","device":"ens1f0np0")") const {
    auto c = ParseConfig(R"({"cniVersion":"1.1.0","name":"rail1","type":"rdma","linkState":"up",
        "ipam":{"type":"fake","range":"10.9.0.0/24"},"stateDir":")" +
                             state_dir + "\"" + extra + "}",
                         Command::kAdd, TestPolicy(state_dir + "/devinfo"));
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

Request Req(const char* ns, const std::string& cid, const std::string& ifname = "net1") {
  return Request{.command = Command::kAdd, .container_id = cid, .netns = ns, .ifname = ifname};
}

TEST_CASE("Two pods get macvlan children of one HCA's netdev, which stays on the host") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto a = p.Add(Req(kPodA, "ca"), n.Conf());
  auto b = p.Add(Req(kPodB, "cb"), n.Conf());
  REQUIRE(a);
  REQUIRE(b);
  const auto* la = n.world.FindLink(kPodA, "net1");
  const auto* lb = n.world.FindLink(kPodB, "net1");
  REQUIRE(la);
  REQUIRE(lb);
  CHECK(la->kind == "macvlan");
  CHECK(la->mac == ChildMac("rail1", "ca", "net1"));
  CHECK(lb->mac == ChildMac("rail1", "cb", "net1"));
  CHECK(la->mac != lb->mac);
  CHECK(la->mac.starts_with("02:"));  // locally administered, unicast
  CHECK(la->mtu == 9000);             // the parent's
  CHECK(la->admin_up);
  // The parent and the RDMA device never leave the host.
  REQUIRE(n.world.FindLink(kHostPath, "ens1f0np0"));
  CHECK(n.world.HasRdma(kHostPath, "mlx5_0"));
  CHECK((*a)["interfaces"][0]["mac"] == la->mac);
  CHECK((*a)["interfaces"][0]["pciID"] == "0000:1a:00.0");
  CHECK((*a)["ips"][0]["address"] != (*b)["ips"][0]["address"]);
  for (const auto& r : n.Records()) {
    CHECK(r.mode == AttachMode::kMacvlan);
    CHECK(r.hca == "mlx5_0");
    CHECK(r.host_name == "ens1f0np0");
    CHECK_FALSE(r.netdev_moved);
    CHECK_FALSE(r.rdma_moved);
  }
  REQUIRE(p.Del(Req(kPodA, "ca"), n.Conf()));
  REQUIRE(p.Del(Req(kPodB, "cb"), n.Conf()));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.ipam.allocated.empty());
  CHECK(n.Records().empty());
}

TEST_CASE("An ipvlan child has its parent's MAC and is found by name, kind and MAC") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto conf = n.Conf(R"(,"mode":"ipvlan","hca":"mlx5_2","mtu":4200)");
  REQUIRE(p.Add(Req(kPodA, "ca"), conf));
  REQUIRE(p.Add(Req(kPodB, "cb"), conf));
  const auto* l = n.world.FindLink(kPodA, "net1");
  REQUIRE(l);
  CHECK(l->kind == "ipvlan");
  CHECK(l->mac == "b8:3f:d2:00:02:01");
  CHECK(l->mtu == 4200);
  CHECK(p.Check(Req(kPodA, "ca"), conf));
  REQUIRE(p.Del(Req(kPodA, "ca"), conf));
  REQUIRE(p.Del(Req(kPodB, "cb"), conf));
  CHECK(n.world.Snapshot() == before);
}

TEST_CASE("Without a named device, children go to the HCA with the fewest, skipping moved ones") {
  Node n;
  Plugin p = n.MakePlugin();
  // One pod has mlx5_0's netdev moved in (mode move); children then spread over the rest.
  auto move = n.Conf(R"(,"hca":"mlx5_0")");
  REQUIRE(p.Add(Req(kPodA, "mover", "net9"), move));
  auto child = n.Conf(R"(,"mode":"macvlan","runtimeConfig":{"deviceID":"pool-shared-003"})");
  std::vector<std::string> got;
  for (int i = 0; i < 8; ++i) {
    std::string cid = "c" + std::to_string(i);
    auto r = p.Add(Req(i % 2 == 0 ? kPodA : kPodB, cid, "net" + std::to_string(i / 2 + 1)), child);
    INFO((r ? "" : r.error().msg));
    REQUIRE(r);
  }
  std::map<std::string, int> per_hca;
  for (const auto& r : n.Records()) {
    if (r.mode == AttachMode::kMacvlan) ++per_hca[r.hca];
  }
  CHECK_FALSE(per_hca.contains("mlx5_0"));
  CHECK(per_hca.size() == 7);  // eight children over seven HCAs: one has two
  CHECK(per_hca["mlx5_1"] == 2);
  // A move of an HCA that serves children is refused, naming how many.
  auto steal = p.Add(Req(kPodB, "thief", "net9"), n.Conf(R"(,"hca":"mlx5_1")"));
  REQUIRE_FALSE(steal);
  CHECK(steal.error().code == kDeviceUnavailable);
  CHECK_THAT(steal.error().msg, Catch::Contains("mlx5_1") && Catch::Contains("shared by 2"));
  // And a child of the moved HCA is refused, naming who has it.
  auto onto = p.Add(Req(kPodB, "late", "net8"), n.Conf(R"(,"mode":"macvlan","hca":"mlx5_0")"));
  REQUIRE_FALSE(onto);
  CHECK(onto.error().code == kDeviceUnavailable);
  CHECK_THAT(onto.error().msg, Catch::Contains("mover/net9") && Catch::Contains("on the host"));
}

TEST_CASE("A rail's NAD names its HCA, the pool slot Multus passes with it names none") {
  Node n;
  Plugin p = n.MakePlugin();
  // As Multus sends it for a NAD with resourceName rdma/shared: deviceID and pciBusID both the
  // allocated pool slot, beside the NAD's own hca.
  auto conf = n.Conf(R"(,"mode":"macvlan","hca":"mlx5_4","pciBusID":"pool-shared-007",
      "runtimeConfig":{"deviceID":"pool-shared-007"})");
  REQUIRE(p.Add(Req(kPodA, "ca"), conf));
  REQUIRE(p.Add(Req(kPodB, "cb"), conf));
  for (const auto& r : n.Records()) CHECK(r.hca == "mlx5_4");
}

TEST_CASE("Child configs that cannot apply are error 7 and change nothing") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto too_big = p.Add(Req(kPodA, "ca"), n.Conf(R"(,"mode":"macvlan","device":"ens1f0np0",
      "mtu":9001)"));
  REQUIRE_FALSE(too_big);
  CHECK(too_big.error().code == kInvalidConfig);
  CHECK_THAT(too_big.error().msg, Catch::Contains("9001") && Catch::Contains("ens1f0np0 (9000"));
  auto strict = p.Add(Req(kPodA, "ca"), n.Conf(R"(,"mode":"macvlan","sharedNetnsPolicy":"error")"));
  REQUIRE_FALSE(strict);
  CHECK(strict.error().code == kInvalidConfig);
  n.world.SetMode(rdma::NetnsMode::kExclusive);
  auto exclusive = p.Add(Req(kPodA, "ca"), n.Conf());
  REQUIRE_FALSE(exclusive);
  CHECK(exclusive.error().code == kInvalidConfig);
  CHECK_THAT(exclusive.error().msg, Catch::Contains("shared netns mode"));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.ipam.allocated.empty());

  Node ib("ib8");
  Plugin q = ib.MakePlugin();
  auto on_ib = q.Add(Req(kPodA, "ca"), ib.Conf(R"(,"mode":"macvlan","hca":"mlx5_0")"));
  REQUIRE_FALSE(on_ib);
  CHECK_THAT(on_ib.error().msg, Catch::Contains("InfiniBand") && Catch::Contains("RoCE"));

  auto typo = ParseConfig(R"({"cniVersion":"1.0.0","name":"x","type":"rdma","mode":"macvtap"})",
                          Command::kAdd);
  REQUIRE_FALSE(typo);
  CHECK_THAT(typo.error().msg, Catch::Contains("macvtap") && Catch::Contains("ipvlan"));
}

TEST_CASE("Every failing call of a child ADD is undone: no child, no state, no address held") {
  for (const char* mode : {"macvlan", "ipvlan"}) {
    std::string extra = std::string(R"(,"mode":")") + mode + R"(","device":"ens1f0np0")";
    int total = 0;
    {
      Node n;
      Plugin p = n.MakePlugin();
      REQUIRE(p.Add(Req(kPodA, "ca"), n.Conf(extra)));
      total = n.world.calls;
    }
    for (int fail_at = 1; fail_at <= total; ++fail_at) {
      Node n;
      std::string before = n.world.Snapshot();
      Plugin p = n.MakePlugin();
      n.world.fail_at = fail_at;
      auto r = p.Add(Req(kPodA, "ca"), n.Conf(extra));
      INFO(mode << ": failed call " << fail_at << " ("
                << n.world.trace.at(static_cast<size_t>(fail_at - 1)) << ") of " << total
                << (r ? "" : ": " + r.error().msg));
      n.world.fail_at = 0;
      if (!r && r.error().code == kRollbackIncomplete) {
        // The undo's own call failed: the record is kept, and DEL finishes.
        REQUIRE(p.Del(Req(kPodA, "ca"), n.Conf(extra)));
      } else if (r) {
        REQUIRE(p.Del(Req(kPodA, "ca"), n.Conf(extra)));
      }
      CHECK(n.world.Snapshot() == before);
      CHECK(n.Records().empty());
      CHECK(n.ipam.allocated.empty());
    }
  }
}

TEST_CASE("DEL of a child: namespace gone, record gone, repeated, crash after IPAM ADD") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto conf = n.Conf();
  SECTION("the pod's namespace died: the kernel deleted the child, DEL releases the address") {
    REQUIRE(p.Add(Req(kPodA, "ca"), conf));
    n.world.KillNamespace(kPodA);
    REQUIRE(p.Del(Req(kPodA, "ca"), conf));
    n.world.AddNamespace(kPodA);  // the snapshot lists namespaces by path
  }
  SECTION("the record is gone: DEL deletes the child it would have made, and releases") {
    REQUIRE(p.Add(Req(kPodA, "ca"), conf));
    REQUIRE(StateStore(n.state_dir).Remove("rail1", "ca", "net1"));
    REQUIRE(p.Del(Req(kPodA, "ca"), conf));
  }
  SECTION("repeated DELs succeed and change nothing more") {
    REQUIRE(p.Add(Req(kPodA, "ca"), conf));
    REQUIRE(p.Del(Req(kPodA, "ca"), conf));
    REQUIRE(p.Del(Req(kPodA, "ca"), conf));
    REQUIRE(p.Del(Req(kPodA, "never"), conf));
  }
  SECTION("a crash after IPAM ADD: the record says asked, DEL deletes the child and releases") {
    REQUIRE(p.Add(Req(kPodA, "ca"), conf));
    StateStore store(n.state_dir);
    auto rec = **store.Load("rail1", "ca", "net1");
    rec.done = false;
    REQUIRE(store.Save(rec));
    REQUIRE(p.Del(Req(kPodA, "ca"), conf));
  }
  SECTION("an interface of that name that is not the recorded child is left alone") {
    REQUIRE(p.Add(Req(kPodA, "ca"), conf));
    REQUIRE(p.Del(Req(kPodA, "ca"), conf));
    n.world.AddLink(kPodA, "net1", "52:54:00:12:34:56", 1500, true);  // someone else's, later
    REQUIRE(p.Del(Req(kPodA, "ca"), conf));
    REQUIRE(n.world.FindLink(kPodA, "net1"));
    return;
  }
  CHECK(n.world.Snapshot() == before);
  CHECK(n.ipam.allocated.empty());
  CHECK(n.Records().empty());
}

TEST_CASE("CHECK, GC and the device-info file for children") {
  Node n;
  Plugin p = n.MakePlugin();
  std::filesystem::create_directories(n.state_dir + "/devinfo");
  std::string devinfo = n.state_dir + "/devinfo/rail1-net1.json";
  auto conf = n.Conf(R"(,"mode":"macvlan","device":"ens3f0np0","runtimeConfig":
      {"CNIDeviceInfoFile":")" +
                     devinfo + "\"}");
  REQUIRE(p.Add(Req(kPodA, "ca"), conf));
  REQUIRE(p.Add(Req(kPodB, "cb"), conf));
  json info = json::parse(*ReadFile(devinfo));
  CHECK(info["pci"]["rdma-device"] == "mlx5_2");
  CHECK(info["pci"]["parent-netdev"] == "ens3f0np0");
  CHECK(info["pci"]["interface-mode"] == "macvlan");
  CHECK(p.Check(Req(kPodA, "ca"), conf));

  auto gc = conf;
  gc.valid_attachments = std::vector<Attachment>{{"cb", "net1"}};
  REQUIRE(p.Gc(gc));
  CHECK(n.world.FindLink(kPodA, "net1") == nullptr);
  CHECK(n.world.FindLink(kPodB, "net1") != nullptr);
  CHECK(n.ipam.allocated.size() == 1);
  CHECK(n.Records().size() == 1);
  CHECK(p.Status(conf));  // children never exhaust a node
}

TEST_CASE("A child of a parent without carrier or administratively down is refused, nothing made") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  n.world.SetOperState(kHostPath, "ens1f0np0", "down");
  auto no_carrier = p.Add(Req(kPodA, "ca"), n.Conf());
  REQUIRE_FALSE(no_carrier);
  CHECK(no_carrier.error().code == kDeviceUnavailable);
  CHECK_THAT(no_carrier.error().msg,
             Catch::Contains("parent ens1f0np0 (mlx5_0) is up without carrier (operstate down)"));
  n.world.SetOperState(kHostPath, "ens1f0np0", "up");
  auto host = n.world.namespaces().Host();
  REQUIRE(n.world.links().Change(*host, n.world.FindLink(kHostPath, "ens1f0np0")->ifindex,
                                 {.up = false}));
  auto admin_down = p.Add(Req(kPodA, "ca"), n.Conf());
  REQUIRE_FALSE(admin_down);
  CHECK_THAT(admin_down.error().msg, Catch::Contains("administratively down"));
  CHECK(n.ipam.allocated.empty());
  CHECK(n.Records().empty());
  REQUIRE(n.world.links().Change(*host, n.world.FindLink(kHostPath, "ens1f0np0")->ifindex,
                                 {.up = true}));
  CHECK(n.world.Snapshot() == before);
  REQUIRE(p.Add(Req(kPodA, "ca"), n.Conf()));
}

}  // namespace
}  // namespace kuberdma::cni
