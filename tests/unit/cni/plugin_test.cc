// SPDX-License-Identifier: Apache-2.0
// The plugin's verbs over FakeWorld and the sysfs fixtures: selection, modes, pkeys, chaining,
// idempotency, and every rollback path (each call of ADD made to fail in turn).
#include "kuberdma/cni/plugin.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "fake_world.h"
#include "kuberdma/base/files.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/deviceplugin/config.h"
#include "kuberdma/deviceplugin/resource.h"
#include "manifests.h"

namespace kuberdma::cni {
namespace {

using fakes::FakeWorld;
using fakes::kHostPath;
using fakes::TestPolicy;
using nlohmann::json;

constexpr const char* kPod = "/var/run/netns/pod-a";
constexpr const char* kPod2 = "/var/run/netns/pod-b";

struct Node {
  explicit Node(const std::string& fixture = "roce8", bool ib = false)
      : root(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + fixture), infiniband(ib) {
    char tmpl[] = "/tmp/kuberdma-plugin-XXXXXX";
    state_dir = mkdtemp(tmpl);
    for (int i = 0; i < 8; ++i) {
      std::string name = ib ? "" : "ens" + std::to_string(i + 1) + "f0np0";
      if (ib) {
        auto h = sysfs::ReadHca(root, "mlx5_" + std::to_string(i), sysfs::HcaDetail::kIdentity);
        name = h->netdevs.front();
      }
      world.AddLink(kHostPath, name, "b8:3f:d2:00:0" + std::to_string(i) + ":01", 1500, i % 2 == 0);
      world.AddRdma(kHostPath, "mlx5_" + std::to_string(i), static_cast<uint32_t>(i + 1));
    }
    world.AddNamespace(kPod);
    world.AddNamespace(kPod2);
  }
  ~Node() { std::filesystem::remove_all(state_dir); }

  NetConf Conf(const std::string& extra = "") const {
    // IPoIB (datagram mode) takes at most 4092, RoCE jumbo frames.
    std::string text = R"({"cniVersion":"1.1.0","name":"rdma-net","type":"rdma","pkey":"0xffff",
        "linkState":"up","mtu":)" +
                       std::string(infiniband ? "4092" : "9000") + R"(,"stateDir":")" + state_dir +
                       "\"" + extra + "}";
    auto c = ParseConfig(text, Command::kAdd, TestPolicy(state_dir + "/devinfo"));
    REQUIRE(c);
    return *c;
  }
  Plugin MakePlugin() {
    return Plugin({world.links(), world.rdma(), world.namespaces(), root, &world.addrs()});
  }

  sysfs::SysfsRoot root;
  bool infiniband = false;
  std::string state_dir;
  FakeWorld world;
};

Request Req(const char* ns, const std::string& ifname, const std::string& cid = "c1") {
  return Request{.command = Command::kAdd, .container_id = cid, .netns = ns, .ifname = ifname};
}

TEST_CASE(
    "ADD with the InfiniBand rdma-net config moves the first free HCA into the pod, renamed and "
    "configured") {
  Node n;
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(kPod, "net1"), n.Conf());
  REQUIRE(r);
  const auto* l = n.world.FindLink(kPod, "net1");
  REQUIRE(l);
  CHECK(l->mac == "b8:3f:d2:00:00:01");
  CHECK(l->mtu == 9000);
  CHECK(l->admin_up);
  CHECK(n.world.FindLink(kHostPath, "ens1f0np0") == nullptr);
  CHECK(n.world.HasRdma(kPod, "mlx5_0"));  // exclusive mode: the RDMA device moved too
  json& iface = (*r)["interfaces"][0];
  CHECK(iface["name"] == "net1");
  CHECK(iface["sandbox"] == kPod);
  CHECK(iface["mtu"] == 9000);
  CHECK(iface["pciID"] == "0000:1a:00.0");
}

TEST_CASE("Eight attachments take the eight HCAs in order, the ninth names every HCA it tried") {
  Node n;
  Plugin p = n.MakePlugin();
  for (int i = 1; i <= 8; ++i) REQUIRE(p.Add(Req(kPod, "net" + std::to_string(i)), n.Conf()));
  for (int i = 0; i < 8; ++i) CHECK(n.world.HasRdma(kPod, "mlx5_" + std::to_string(i)));
  CHECK(n.world.FindLink(kPod, "net8")->mac == "b8:3f:d2:00:07:01");
  auto ninth = p.Add(Req(kPod2, "net1", "c2"), n.Conf());
  REQUIRE_FALSE(ninth);
  CHECK(ninth.error().code == kInvalidConfig);
  CHECK_THAT(ninth.error().msg, Catch::Contains("mlx5_0: already attached to c1/net1") &&
                                    Catch::Contains("mlx5_7: already attached to c1/net8"));
}

TEST_CASE("DEL restores name, MTU, admin state and the RDMA device, and is idempotent") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  REQUIRE(p.Add(Req(kPod, "net2"), n.Conf()));
  CHECK(n.world.Snapshot() != before);
  REQUIRE(p.Del(Req(kPod, "net1"), n.Conf()));
  REQUIRE(p.Del(Req(kPod, "net2"), n.Conf()));
  CHECK(n.world.Snapshot() == before);
  CHECK(p.Del(Req(kPod, "net1"), n.Conf()));        // repeated
  CHECK(p.Del(Req(kPod, "net9", "zz"), n.Conf()));  // never added: no state
}

TEST_CASE("DEL after the pod namespace is gone finishes what the kernel started (devN names)") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  REQUIRE(p.Add(Req(kPod, "net2"), n.Conf()));
  n.world.AddLink(kHostPath, "net2", "02:00:00:00:00:99", 1500, false);  // forces a devN name
  n.world.KillNamespace(kPod);
  CHECK(n.world.FindLink(kHostPath, "net1") != nullptr);
  REQUIRE(p.Del(Req(kPod, "net1"), n.Conf()));
  REQUIRE(p.Del(Req(kPod, "net2"), n.Conf()));
  CHECK(n.world.FindLink(kHostPath, "ens1f0np0")->mtu == 1500);
  CHECK(n.world.FindLink(kHostPath, "ens2f0np0") != nullptr);
  CHECK(n.world.HasRdma(kHostPath, "mlx5_0"));
  n.world.AddNamespace(kPod);  // the snapshot lists namespaces by path
  auto after = n.world.Snapshot();
  CHECK(after.find("ens1f0np0 b8:3f:d2:00:00:01 1500 up") != std::string::npos);
  CHECK(after.find("ens2f0np0 b8:3f:d2:00:01:01 1500 down") != std::string::npos);
}

TEST_CASE("Every failing call of ADD is undone completely and leaves no state") {
  for (const char* mode : {"exclusive", "shared"}) {
    int total = 0;
    {
      Node n;  // a clean run counts the calls ADD makes
      if (std::string(mode) == "shared") n.world.SetMode(rdma::NetnsMode::kShared);
      Plugin p = n.MakePlugin();
      REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
      total = n.world.calls;
    }
    for (int fail_at = 1; fail_at <= total; ++fail_at) {
      Node n;
      if (std::string(mode) == "shared") n.world.SetMode(rdma::NetnsMode::kShared);
      std::string before = n.world.Snapshot();
      Plugin p = n.MakePlugin();
      n.world.fail_at = fail_at;
      auto r = p.Add(Req(kPod, "net1"), n.Conf());
      INFO(mode << ": failed call " << fail_at << " ("
                << n.world.trace.at(static_cast<size_t>(fail_at - 1)) << ") of " << total
                << (r ? "" : ": " + r.error().msg));
      if (r) {
        // A failed lookup during selection only skips that HCA; the attachment must still be
        // complete and fully reversible.
        n.world.fail_at = 0;
        REQUIRE(p.Del(Req(kPod, "net1"), n.Conf()));
      }
      CHECK(n.world.Snapshot() == before);
      CHECK(StateStore(n.state_dir).List()->empty());
    }
  }
}

TEST_CASE("An MTU the device refuses fails ADD after the kernel moved it, and the move is undone") {
  Node n;
  n.world.report_max_mtu = false;  // else the plan refuses it before the move
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto conf = n.Conf();
  conf.mtu = 10000;  // above the device's maximum (9978 in the fake, as on mlx5)
  auto r = p.Add(Req(kPod, "net1"), conf);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().msg, Catch::Contains("mlx5_0") && Catch::Contains("net1"));
  CHECK(n.world.Snapshot() == before);
}

TEST_CASE("A retried ADD of a completed attachment returns the same result and changes nothing") {
  Node n;
  Plugin p = n.MakePlugin();
  auto first = p.Add(Req(kPod, "net1"), n.Conf());
  REQUIRE(first);
  std::string after = n.world.Snapshot();
  auto second = p.Add(Req(kPod, "net1"), n.Conf());
  REQUIRE(second);
  CHECK(*first == *second);
  CHECK(n.world.Snapshot() == after);
}

TEST_CASE("A half-done ADD left by a crash is undone before the retry attaches again") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  StateStore store(n.state_dir);
  auto rec = **store.Load("rdma-net", "c1", "net1");
  rec.done = false;  // as if the process died before marking it done
  REQUIRE(store.Save(rec));
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  CHECK(n.world.FindLink(kPod, "net1")->mac == "b8:3f:d2:00:00:01");
  CHECK((**store.Load("rdma-net", "c1", "net1")).done);
}

TEST_CASE("Shared RDMA netns mode continues by default and is rejected with policy error") {
  Node n;
  n.world.SetMode(rdma::NetnsMode::kShared);
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  CHECK(n.world.HasRdma(kHostPath, "mlx5_0"));  // not moved
  auto rec = **StateStore(n.state_dir).Load("rdma-net", "c1", "net1");
  CHECK(rec.netns_mode == rdma::NetnsMode::kShared);
  CHECK_FALSE(rec.rdma_moved);
  auto strict = p.Add(Req(kPod, "net2"), n.Conf(R"(,"sharedNetnsPolicy":"error")"));
  REQUIRE_FALSE(strict);
  CHECK(strict.error().code == kSharedModeRejected);
  n.world.SetMode(std::nullopt);  // no RDMA subsystem at all
  auto none = p.Add(Req(kPod, "net2"), n.Conf());
  REQUIRE(none);
  CHECK((**StateStore(n.state_dir).Load("rdma-net", "c1", "net2")).netns_mode == RdmaNetnsMode{});
}

TEST_CASE(
    "Devices are selected by deviceID, slot ID, HCA name, netdev and MAC, misses name the tries") {
  Node n;
  Plugin p = n.MakePlugin();
  auto pick = [&](const std::string& extra, const std::string& ifname) {
    auto r = p.Add(Req(kPod, ifname), n.Conf(extra));
    REQUIRE(r);
    auto rec = **StateStore(n.state_dir).Load("rdma-net", "c1", ifname);
    return rec.hca;
  };
  CHECK(pick(R"(,"deviceID":"0000:3d:00.0")", "net1") == "mlx5_3");
  CHECK(pick(R"(,"runtimeConfig":{"deviceID":"mlx5_5-017"})", "net2") == "mlx5_5");
  CHECK(pick(R"(,"hca":"mlx5_6")", "net3") == "mlx5_6");
  CHECK(pick(R"(,"device":"ens2f0np0")", "net4") == "mlx5_1");
  CHECK(pick(R"(,"mac":"B8:3F:D2:00:07:01")", "net5") == "mlx5_7");
  CHECK(pick(R"(,"pciBusID":"0000:3c:00.0")", "net6") == "mlx5_2");
  auto miss = p.Add(Req(kPod, "net7"), n.Conf(R"(,"deviceID":"0000:ee:00.0")"));
  REQUIRE_FALSE(miss);
  CHECK(miss.error().code == kInvalidConfig);
  CHECK_THAT(miss.error().msg, Catch::Contains("deviceID") && Catch::Contains("0000:ee:00.0") &&
                                   Catch::Contains("slot ID"));
  auto taken = p.Add(Req(kPod2, "net1", "c2"), n.Conf(R"(,"hca":"mlx5_3")"));
  REQUIRE_FALSE(taken);
  CHECK(taken.error().code == kDeviceUnavailable);
  CHECK_THAT(taken.error().msg, Catch::Contains("c1/net1"));
}

TEST_CASE("Pkeys: default everywhere, non-default on RoCE is error 7, on InfiniBand looked up") {
  Node roce;
  Plugin p = roce.MakePlugin();
  auto bad = p.Add(Req(kPod, "net1"), roce.Conf(R"(,"pkey":"0x8001")"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == kInvalidConfig);
  CHECK_THAT(bad.error().msg, Catch::Contains("RoCE"));

  Node ib("ib8", true);
  Plugin q = ib.MakePlugin();
  auto c = ib.Conf();
  c.pkey = 0x8001;
  REQUIRE(q.Add(Req(kPod, "net1"), c));
  CHECK((**StateStore(ib.state_dir).Load("rdma-net", "c1", "net1")).pkey_index == 1);
  c.pkey = 0x8005;
  auto missing = q.Add(Req(kPod, "net2"), c);
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().msg,
             Catch::Contains("0x8005") && Catch::Contains("[0xffff, 0x8001, 0x0002]"));
}

TEST_CASE("On InfiniBand the RDMA device moves before its IPoIB netdev") {
  Node ib("ib8", true);
  Plugin q = ib.MakePlugin();
  REQUIRE(q.Add(Req(kPod, "net1"), ib.Conf()));
  size_t rdma_move = 0;
  size_t link_move = 0;
  for (size_t i = 0; i < ib.world.trace.size(); ++i) {
    if (ib.world.trace[i].rfind("rdma move", 0) == 0) rdma_move = i;
    if (ib.world.trace[i].rfind("link move", 0) == 0) link_move = i;
  }
  CHECK(rdma_move > 0);
  CHECK(rdma_move < link_move);
}

TEST_CASE(
    "Chained after another plugin, only the RDMA device moves and prevResult passes through") {
  Node n;
  n.world.AddLink(kPod, "net1", "02:11:22:33:44:55", 1500, true);
  Plugin p = n.MakePlugin();
  std::string prev = R"(,"deviceID":"0000:1a:00.0","prevResult":{"cniVersion":"1.1.0",
      "interfaces":[{"name":"net1","sandbox":")" +
                     std::string(kPod) + R"("}],
      "ips":[{"address":"10.1.0.5/24","interface":0}]})";
  auto conf = n.Conf(prev);
  conf.mtu.reset();
  conf.link_state = LinkState::kLeave;
  auto r = p.Add(Req(kPod, "net1"), conf);
  REQUIRE(r);
  CHECK((*r)["ips"][0]["address"] == "10.1.0.5/24");
  CHECK((*r)["interfaces"].size() == 1);
  CHECK(n.world.HasRdma(kPod, "mlx5_0"));
  CHECK(n.world.FindLink(kHostPath, "ens1f0np0") != nullptr);  // the host netdev is untouched
  REQUIRE(p.Del(Req(kPod, "net1"), conf));
  CHECK(n.world.HasRdma(kHostPath, "mlx5_0"));
  CHECK(n.world.FindLink(kPod, "net1") != nullptr);  // the other plugin's to give back
  auto auto_chained = p.Add(Req(kPod, "net1"), n.Conf(prev.substr(prev.find(",\"prevResult"))));
  REQUIRE_FALSE(auto_chained);
  CHECK_THAT(auto_chained.error().msg, Catch::Contains("deviceID"));
}

TEST_CASE("CHECK passes after ADD and fails, naming the difference, when the pod drifts") {
  Node n;
  Plugin p = n.MakePlugin();
  auto conf = n.Conf();
  CHECK(p.Check(Req(kPod, "net1"), conf).error().code == kCheckFailed);  // nothing added yet
  REQUIRE(p.Add(Req(kPod, "net1"), conf));
  CHECK(p.Check(Req(kPod, "net1"), conf));
  auto pod = n.world.namespaces().Open(kPod);
  auto l = n.world.links().GetByName(*pod, "net1");
  REQUIRE(n.world.links().Change(*pod, l->ifindex, {.mtu = 1500}));
  auto drift = p.Check(Req(kPod, "net1"), conf);
  REQUIRE_FALSE(drift);
  CHECK(drift.error().code == kCheckFailed);
  CHECK_THAT(drift.error().msg, Catch::Contains("MTU 1500"));
}

TEST_CASE("STATUS says whether ADDs can be served") {
  Node n;
  Plugin p = n.MakePlugin();
  CHECK(p.Status(n.Conf()));
  for (int i = 1; i <= 8; ++i) REQUIRE(p.Add(Req(kPod, "net" + std::to_string(i)), n.Conf()));
  CHECK(p.Status(n.Conf()).error().code == kPluginLimited);
  Node empty;
  Plugin none({empty.world.links(), empty.world.rdma(), empty.world.namespaces(),
               sysfs::SysfsRoot("/nonexistent-kuberdma")});
  auto s = none.Status(empty.Conf());
  REQUIRE_FALSE(s);
  CHECK(s.error().code == kPluginNotAvailable);
}

TEST_CASE("GC restores only the attachments missing from cni.dev/valid-attachments") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1", "keep"), n.Conf()));
  REQUIRE(p.Add(Req(kPod2, "net1", "stale"), n.Conf()));
  n.world.KillNamespace(kPod2);
  auto gc = n.Conf(R"(,"cni.dev/valid-attachments":[{"containerID":"keep","ifname":"net1"}])");
  REQUIRE(p.Gc(gc));
  CHECK(n.world.FindLink(kHostPath, "ens2f0np0") != nullptr);
  CHECK(n.world.FindLink(kPod, "net1") != nullptr);
  CHECK(StateStore(n.state_dir).List()->size() == 1);
  CHECK(p.Gc(n.Conf()).error().code == kInvalidConfig);  // no list: refuse to collect everything
}

TEST_CASE("ADD writes the device-info file naming the RDMA device, keeping what Multus put there") {
  Node n;
  Plugin p = n.MakePlugin();
  std::string info = n.state_dir + "/devinfo/net1.json";
  REQUIRE(WriteFileAtomic(
      info,
      R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"x","vhost-net":"/dev/vhost-net"}})"));
  REQUIRE(p.Add(Req(kPod, "net1"),
                n.Conf(R"(,"runtimeConfig":{"CNIDeviceInfoFile":")" + info + "\"}")));
  auto j = json::parse(*ReadFile(info));
  CHECK(j["pci"]["rdma-device"] == "mlx5_0");
  CHECK(j["pci"]["pci-address"] == "0000:1a:00.0");
  CHECK(j["pci"]["vhost-net"] == "/dev/vhost-net");
}

TEST_CASE("CNI_IFNAME already present in the pod is refused without touching the host") {
  Node n;
  n.world.AddLink(kPod, "net1", "02:00:00:00:00:42", 1500, true);
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(kPod, "net1"), n.Conf());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kInvalidEnv);
  CHECK(n.world.Snapshot() == before);
}

TEST_CASE("A node lock held past lockTimeoutMs is error 11, and nothing is touched") {
  Node n;
  std::string before = n.world.Snapshot();
  auto held = NodeLock::Acquire(n.state_dir, 1000);
  REQUIRE(held);
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(kPod, "net1"), n.Conf(R"(,"lockTimeoutMs":30)"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kTryAgainLater);
  CHECK(p.Del(Req(kPod, "net1"), n.Conf(R"(,"lockTimeoutMs":30)")).error().code == kTryAgainLater);
  CHECK(n.world.Snapshot() == before);
}

TEST_CASE("A pod namespace that does not exist is error 4 on ADD") {
  Node n;
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req("/var/run/netns/missing", "net1"), n.Conf());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kInvalidEnv);
}

}  // namespace
}  // namespace kuberdma::cni

namespace kuberdma::cni {
namespace {

TEST_CASE("ADD refuses CNI_NETNS naming the plugin's own namespace with code 4") {
  Node n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(kHostPath, "net1"), n.Conf());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kInvalidEnv);
  CHECK_THAT(r.error().msg, Catch::Contains("namespace rdma runs in"));
  CHECK(n.world.Snapshot() == before);
  CHECK(StateStore(n.state_dir).List()->empty());
}

TEST_CASE("A device-info file that is a planted link is neither followed nor replaced") {
  Node n;
  Plugin p = n.MakePlugin();
  std::string target = n.state_dir + "/precious";
  REQUIRE(WriteFileAtomic(target, "keep me\n"));
  std::filesystem::create_directories(n.state_dir + "/devinfo");
  std::filesystem::create_symlink(target, n.state_dir + "/devinfo/net1.json");
  std::string info = n.state_dir + "/devinfo/net1.json";
  REQUIRE(p.Add(Req(kPod, "net1"),
                n.Conf(R"(,"runtimeConfig":{"CNIDeviceInfoFile":")" + info + "\"}")));
  CHECK(*ReadFile(target) == "keep me\n");
  CHECK(std::filesystem::is_symlink(info));
}

TEST_CASE("A symbolic link below the state root is refused and nothing is written through it") {
  Node n;
  Plugin p = n.MakePlugin();
  std::string elsewhere = n.state_dir + "-elsewhere";
  std::filesystem::create_directories(elsewhere);
  struct Cleanup {
    std::string d;
    ~Cleanup() { std::filesystem::remove_all(d); }
  } cleanup{elsewhere};
  std::filesystem::create_directories(n.state_dir);
  std::filesystem::create_directory_symlink(elsewhere, n.state_dir + "/rdma-net");
  std::string before = n.world.Snapshot();
  auto r = p.Add(Req(kPod, "net1"), n.Conf());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kStateFailure);
  CHECK_THAT(r.error().msg, Catch::Contains("symbolic link"));
  CHECK(n.world.Snapshot() == before);
  CHECK(std::filesystem::is_empty(elsewhere));
}

TEST_CASE("State directories are private and record files are not world-readable") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  auto perms = std::filesystem::status(n.state_dir + "/rdma-net").permissions();
  CHECK((perms & std::filesystem::perms::all) == std::filesystem::perms::owner_all);
  auto rec = std::filesystem::status(n.state_dir + "/rdma-net/c1:net1.json").permissions();
  CHECK((rec & (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
        std::filesystem::perms::none);
  // No temporary file is left beside the record.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(n.state_dir + "/rdma-net")) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("DEL with a config that no longer parses restores the device from its record") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  REQUIRE(n.world.FindLink(kPod, "net1") != nullptr);
  std::string broken = R"({"cniVersion":"1.1.0","name":"rdma-net","type":"rdma","mtu":"abc",
      "stateDir":")" + n.state_dir +
                       "\"}";
  REQUIRE_FALSE(ParseConfig(broken, Command::kDel, TestPolicy()));
  Request del = Req(kPod, "net1");
  del.command = Command::kDel;
  REQUIRE(p.Del(del, SalvageForDel(broken, TestPolicy())));
  CHECK(n.world.FindLink(kHostPath, "ens1f0np0") != nullptr);
  CHECK(StateStore(n.state_dir).List()->empty());
  // No name at all: the record is found by container ID and ifname in any network.
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  std::string nameless = R"({"stateDir":")" + n.state_dir + "\", \"mtu\": []}";
  REQUIRE(p.Del(del, SalvageForDel(nameless, TestPolicy())));
  CHECK(n.world.FindLink(kHostPath, "ens1f0np0") != nullptr);
  CHECK(StateStore(n.state_dir).List()->empty());
  // Nothing recorded: success.
  CHECK(p.Del(del, SalvageForDel("{", TestPolicy())));
}

TEST_CASE("Every ID the shipped device plugin allocates, passed as Multus passes it, attaches") {
  auto cm =
      test_support::Shipped("manifests/10-configmap.yaml").ConfigMapData("device-plugin.json");
  auto nads = test_support::Shipped("manifests/30-networkattachmentdefinition.yaml").Nads();
  REQUIRE(cm);
  REQUIRE(nads.size() == 1);
  auto cfg = deviceplugin::ParseConfig(*cm);
  REQUIRE(cfg);
  json nad = nads.front().config;
  for (const auto& rc : cfg->resources) {
    Node n;
    deviceplugin::Resource res(rc, n.root);
    res.Refresh(*sysfs::DiscoverHcas(n.root, sysfs::HcaDetail::kPorts));
    // The kubelet allocates four slots, preferring what the plugin prefers.
    std::vector<std::string> all;
    for (const auto& d : res.Devices()) all.push_back(d.id);
    std::vector<std::string> ids = res.Preferred(all, {}, 4);
    REQUIRE(ids.size() == 4);
    auto alloc = res.Allocate(ids);
    REQUIRE(alloc);
    INFO(rc.FullName());
    Plugin p = n.MakePlugin();
    std::vector<std::string> attached;
    for (size_t i = 0; i < ids.size(); ++i) {
      // Multus: the i-th allocated ID as deviceID of the i-th attachment of a NAD with this
      // resourceName, copied into pciBusID too, and into runtimeConfig where capabilities say.
      json conf = nad;
      conf["deviceID"] = ids[i];
      conf["pciBusID"] = ids[i];
      conf["stateDir"] = n.state_dir;
      auto c = ParseConfig(conf.dump(), Command::kAdd, TestPolicy());
      REQUIRE(c);
      std::string ifname = "net" + std::to_string(i + 1);
      auto r = p.Add(Req(kPod, ifname), *c);
      INFO(ids[i] << ": " << (r ? "" : r.error().msg));
      REQUIRE(r);
      attached.push_back((**StateStore(n.state_dir).Load(nad["name"], "c1", ifname)).hca);
    }
    std::set<std::string> distinct(attached.begin(), attached.end());
    CHECK(distinct.size() == ids.size());
    if (rc.policy == deviceplugin::Policy::kPerHca) {
      CHECK(attached == alloc->hcas);  // exactly the kubelet's HCAs, in Multus's order
    } else {
      for (const auto& h : attached) {  // a pool share names no HCA: free ones of the pool
        CHECK(std::find(alloc->hcas.begin(), alloc->hcas.end(), h) != alloc->hcas.end());
      }
    }
  }
}

TEST_CASE("A per-HCA slot of an HCA this node does not have is refused, naming the HCA") {
  Node n;
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(kPod, "net1"), n.Conf(R"(,"deviceID":"mlx5_9-001")"));
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().msg, Catch::Contains("slot 1 of HCA mlx5_9"));
}

// ---- The node's own NICs, rails, the maximum MTU ----

link::IpPrefix V4(const std::string& ip, int len) {
  return {.family = 4, .address = ip, .prefix_len = len};
}

// mlx5_0's netdev carries the default route, mlx5_1's an address no rail declares, mlx5_2's is a
// bond member.
void MakeNodeNics(Node& n) {
  auto host = n.world.namespaces().Host();
  REQUIRE(host);
  link::AddrOps& addrs = n.world.addrs();
  int ens1 = n.world.FindLink(kHostPath, "ens1f0np0")->ifindex;
  int ens2 = n.world.FindLink(kHostPath, "ens2f0np0")->ifindex;
  REQUIRE(addrs.AddRoute(*host, {.dst = V4("0.0.0.0", 0), .gateway = "10.0.0.1", .ifindex = ens1}));
  REQUIRE(addrs.AddAddress(*host, ens2, V4("10.50.0.9", 24)));
  n.world.AddLink(kHostPath, "bond0", "b8:3f:d2:00:00:ff", 1500, true);
  n.world.Enslave(kHostPath, "ens3f0np0", "bond0");
}

TEST_CASE("A move never takes the node's own NIC, however it is named, and changes nothing") {
  Node n;
  MakeNodeNics(n);
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  struct Case {
    std::string extra, says;
  };
  for (const Case& c :
       {Case{R"(,"hca":"mlx5_0")", "carries the node's default route (via 10.0.0.1)"},
        Case{R"(,"deviceID":"0000:1b:00.0")", "holds 10.50.0.9/24"},
        Case{R"(,"deviceID":"mlx5_2-000")", "is a port of bond0"},
        Case{R"(,"device":"ens1f0np0")", "default route"},
        Case{R"(,"runtimeConfig":{"deviceID":"mlx5_1"})", "10.50.0.9/24"}}) {
    auto r = p.Add(Req(kPod, "net1"), n.Conf(c.extra));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kNodeOwnNic);
    CHECK_THAT(r.error().msg, Catch::Contains(c.says) && Catch::Contains("the node's own NIC") &&
                                  Catch::Contains("Nothing was changed"));
    CHECK(n.world.Snapshot() == before);
    CHECK(StateStore(n.state_dir).List()->empty());
  }
  // The first free HCA, and a pool slot, skip them.
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf()));
  CHECK(n.world.HasRdma(kPod, "mlx5_3"));
  REQUIRE(p.Add(Req(kPod, "net2"), n.Conf(R"(,"deviceID":"pool-shared-000")")));
  CHECK(n.world.HasRdma(kPod, "mlx5_4"));
}

TEST_CASE("A declared rail may hold its own address, the node's address or default route never") {
  Node n;
  MakeNodeNics(n);
  rails::NodeConfig node{.rails = {"ens2f0np0", "ens1f0np0"}};
  Plugin p({n.world.links(), n.world.rdma(), n.world.namespaces(), n.root, &n.world.addrs(),
            nullptr, node});
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf(R"(,"hca":"mlx5_1")")));
  auto def = p.Add(Req(kPod, "net2"), n.Conf(R"(,"hca":"mlx5_0")"));
  REQUIRE_FALSE(def);
  CHECK(def.error().code == kNodeOwnNic);

  Node m;
  MakeNodeNics(m);
  node.node_addresses = {"10.50.0.9"};
  Plugin q({m.world.links(), m.world.rdma(), m.world.namespaces(), m.root, &m.world.addrs(),
            nullptr, node});
  auto known = q.Add(Req(kPod, "net1"), m.Conf(R"(,"hca":"mlx5_1")"));
  REQUIRE_FALSE(known);
  CHECK_THAT(known.error().msg, Catch::Contains("the address the node is known by"));
}

TEST_CASE("A rail's network takes the HCA on that rail, and refuses a device on another rail") {
  Node n;
  // Cabled in reverse: rail 1 is mlx5_7's ens8f0np0.
  rails::NodeConfig node{.rails = {"ens8f0np0", "ens7f0np0", "ens6f0np0", "ens5f0np0"}};
  Plugin p({n.world.links(), n.world.rdma(), n.world.namespaces(), n.root, &n.world.addrs(),
            nullptr, node});
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf(R"(,"rail":2)")));
  CHECK(n.world.HasRdma(kPod, "mlx5_6"));
  // A pool slot names no HCA: the rail decides.
  REQUIRE(p.Add(Req(kPod, "net3"), n.Conf(R"(,"rail":3,"deviceID":"pool-shared-004")")));
  CHECK(n.world.HasRdma(kPod, "mlx5_5"));
  REQUIRE(p.Add(Req(kPod, "net4"), n.Conf(R"(,"rail":1,"deviceID":"mlx5_7-000")")));

  std::string before = n.world.Snapshot();
  auto wrong = p.Add(Req(kPod2, "net1", "c2"), n.Conf(R"(,"rail":4,"deviceID":"mlx5_3-000")"));
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == kInvalidConfig);
  CHECK_THAT(wrong.error().msg, Catch::Contains("network rdma-net is rail 4") &&
                                    Catch::Contains("mlx5_3, on no rail") &&
                                    Catch::Contains("declared in"));
  auto none = p.Add(Req(kPod2, "net1", "c2"), n.Conf(R"(,"rail":7)"));
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().msg, Catch::Contains("no HCA of this node is on that rail"));
  auto taken = p.Add(Req(kPod2, "net1", "c2"), n.Conf(R"(,"rail":2)"));
  REQUIRE_FALSE(taken);
  CHECK(taken.error().code == kDeviceUnavailable);
  CHECK_THAT(taken.error().msg, Catch::Contains("whose HCA mlx5_6 is already attached to c1/net1"));
  CHECK(n.world.Snapshot() == before);
}

TEST_CASE("Without a declaration a rail is the HCA's place in PCI-address order") {
  Node n;
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "net1"), n.Conf(R"(,"rail":3)")));
  CHECK(n.world.HasRdma(kPod, "mlx5_2"));  // roce8's third PCI address, 0000:3c:00.0
  auto wrong = p.Add(Req(kPod, "net2"), n.Conf(R"(,"rail":1,"hca":"mlx5_5")"));
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.error().msg,
             Catch::Contains("on rail 6") && Catch::Contains("PCI-address order"));
}

TEST_CASE("An MTU above the netdev's maximum is refused before anything moves (IPoIB: 4092)") {
  Node ib("ib8", true);
  std::string before = ib.world.Snapshot();
  Plugin q = ib.MakePlugin();
  auto c = ib.Conf();
  c.mtu = 9000;  // the value users copy from RoCE examples
  auto r = q.Add(Req(kPod, "net1"), c);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kInvalidConfig);
  CHECK_THAT(r.error().msg, Catch::Contains("mtu 9000 is above the maximum MTU of ibp26s0") &&
                                Catch::Contains("4092") && Catch::Contains("datagram"));
  CHECK(ib.world.Snapshot() == before);
  c.mtu = 4092;
  REQUIRE(q.Add(Req(kPod, "net1"), c));

  Node roce;  // the fake driver's maximum is 9978, as mlx5's on Ethernet
  Plugin p = roce.MakePlugin();
  auto jumbo = roce.Conf();
  jumbo.mtu = 9979;
  auto big = p.Add(Req(kPod, "net1"), jumbo);
  REQUIRE_FALSE(big);
  CHECK_THAT(big.error().msg, Catch::Contains("ens1f0np0 (mlx5_0): 9978, the driver's maximum"));
}

TEST_CASE("Rail networks get the pod's HCA on their rail whatever order Multus passes the slots") {
  Node n;
  std::string allocations = n.state_dir + "/allocations";
  // Cabled in reverse on this node: rail 1 is mlx5_3. The kubelet allocated mlx5_0..3 together
  // and lists them in its own order; Multus gives net1 the first, net2 the second, ...
  rails::NodeConfig node{.rails = {"ens4f0np0", "ens3f0np0", "ens2f0np0", "ens1f0np0"}};
  std::vector<std::string> slots = {"mlx5_2-0", "mlx5_0-0", "mlx5_3-0", "mlx5_1-0"};
  REQUIRE(contract::RecordAllocation(
      allocations,
      {.resource = "rdma/hca", .slots = slots, .hcas = {"mlx5_2", "mlx5_0", "mlx5_3", "mlx5_1"}}));
  Plugin p({n.world.links(), n.world.rdma(), n.world.namespaces(), n.root, &n.world.addrs(),
            nullptr, node, allocations});
  for (int i = 1; i <= 4; ++i) {
    std::string ifname = "net" + std::to_string(i);
    auto conf = n.Conf(",\"rail\":" + std::to_string(i) + ",\"deviceID\":\"" +
                       slots[static_cast<size_t>(i - 1)] + "\"");
    auto r = p.Add(Req(kPod, ifname), conf);
    INFO(ifname << (r ? "" : ": " + r.error().msg));
    REQUIRE(r);
    CHECK((**StateStore(n.state_dir).Load("rdma-net", "c1", ifname)).hca ==
          "mlx5_" + std::to_string(4 - i));
  }
  // A pod allocated rails 1 and 2 only cannot attach rail 3.
  REQUIRE(contract::RecordAllocation(
      allocations, {.resource = "rdma/hca", .slots = {"mlx5_4-0"}, .hcas = {"mlx5_4"}}));
  auto missing = p.Add(Req(kPod2, "net1", "c2"), n.Conf(R"(,"rail":3,"deviceID":"mlx5_4-0")"));
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == kInvalidConfig);
  CHECK_THAT(missing.error().msg,
             Catch::Contains("the pod's allocation of rdma/hca (mlx5_4 rail 0)") &&
                 Catch::Contains("has no HCA on it"));
}

}  // namespace
}  // namespace kuberdma::cni
