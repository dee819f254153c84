// SPDX-License-Identifier: Apache-2.0
// Mode vf over FakeWorld (its VF table stands in for the PF driver's) and the sriov / sriov-ib
// fixtures: what the PF sets (MAC, VLAN, QoS, spoof-check, trust, link state, rates; on
// InfiniBand the GUIDs), the VF's netdev taking its MAC or its driver rebound, bad input refused
// with nothing changed, and every undo path (each call of ADD failed in turn, and a kill at each
// call followed by DEL from a fresh plugin) putting the PF's view of the VF back.
#include "kuberdma/cni/vf.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "fake_world.h"
#include "kuberdma/cni/plugin.h"
#include "kuberdma/sysfs/sriov.h"

namespace kuberdma::cni {
namespace {

using fakes::FakeWorld;
using fakes::kHostPath;
using fakes::TestPolicy;
using link::VfConfig;

constexpr const char* kPod = "/var/run/netns/pod-a";
constexpr const char* kPod2 = "/var/run/netns/pod-b";

// A node of the sriov (RoCE) or sriov-ib fixture: every netdev a host link, every RDMA device on
// the host, each PF's four VFs in its driver's table as mlx5 reports a fresh VF; on InfiniBand
// with GUIDs an earlier owner set (`zero_guids`: none yet, as after the VFs were created).
struct VfNode {
  explicit VfNode(bool ib = false, bool zero_guids = false)
      : fixture(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + (ib ? "sriov-ib" : "sriov")),
        infiniband(ib) {
    char tmpl[] = "/tmp/kuberdma-vf-XXXXXX";
    dir = mkdtemp(tmpl);
    state_dir = dir + "/state";
    // A copy: a rebind writes the driver's unbind and the bus' drivers_probe.
    std::filesystem::copy(
        fixture, dir + "/sysfs",
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
    root = sysfs::SysfsRoot(dir + "/sysfs");
    auto hcas = sysfs::DiscoverHcas(root, sysfs::HcaDetail::kIdentity);
    REQUIRE(hcas);
    uint32_t index = 1;
    for (const auto& h : *hcas) {
      std::string mac = root.ReadAttrOr("class/net/" + h.netdevs.front() + "/address", "");
      world.AddLink(kHostPath, h.netdevs.front(), mac, ib ? 4092 : 1500, true, ib ? 4092 : 9978);
      world.AddRdma(kHostPath, h.name, index++);
    }
    for (const auto& h : *hcas) {
      auto pf = sysfs::ReadSriovPf(root, h.address);
      if (!pf || !*pf || (*pf)->num_vfs == 0) continue;
      std::vector<VfConfig> vfs;
      for (uint32_t i = 0; i < static_cast<uint32_t>((*pf)->num_vfs); ++i) {
        uint64_t guid = ib && !zero_guids ? 0x0200000000001000ULL + index * 16 + i : 0;
        vfs.push_back({.vf = i,
                       .mac = "00:00:00:00:00:00",
                       .node_guid = guid,
                       .port_guid = guid,
                       .has_spoofchk = true,
                       .has_trust = true,
                       .has_link_state = true,
                       .has_rate = true,
                       .has_guids = ib});
      }
      world.AddVfs(h.netdevs.front(), std::move(vfs));
    }
    world.AddNamespace(kPod);
    world.AddNamespace(kPod2);
  }
  ~VfNode() { std::filesystem::remove_all(dir); }

  NetConf Conf(const std::string& extra = "") const {
    auto c = TryConf(extra);
    REQUIRE(c);
    return *c;
  }
  CniResult<NetConf> TryConf(const std::string& extra) const {
    return ParseConfig(R"({"cniVersion":"1.1.0","name":"vf-net","type":"rdma","mode":"vf",
        "linkState":"up","stateDir":")" +
                           state_dir + "\"" + extra + "}",
                       Command::kAdd, TestPolicy());
  }
  Plugin MakePlugin() {
    return Plugin({.links = world.links(),
                   .rdma = world.rdma(),
                   .namespaces = world.namespaces(),
                   .sysfs = root,
                   .addrs = &world.addrs(),
                   .vfs = &world.vfs(),
                   .rebind_wait = std::chrono::milliseconds(200)});
  }
  std::vector<AttachmentRecord> Records() const { return *StateStore(state_dir).List(); }
  std::string pf() const { return infiniband ? "ibp27s0" : "ens1f0np0"; }

  std::string fixture;
  bool infiniband;
  std::string dir;
  std::string state_dir;
  sysfs::SysfsRoot root;
  FakeWorld world;
};

Request Req(const char* ns, const std::string& cid, const std::string& ifname = "net1",
            const std::string& args = "") {
  return Request{
      .command = Command::kAdd, .container_id = cid, .netns = ns, .ifname = ifname, .args = args};
}

// VF 1 of the first PF, as Multus passes a device plugin's VF: its PCI address.
const char* kVf1 = R"(,"deviceID":"0000:1b:00.3")";

TEST_CASE("A RoCE VF is set through its PF (MAC, VLAN, QoS, spoof-check), moved, and restored") {
  VfNode n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto conf = n.Conf(std::string(kVf1) + R"(,"vlan":100,"vlanQoS":3,"trust":"off",
      "min_tx_rate":1000,"max_tx_rate":50000)");
  auto r = p.Add(Req(kPod, "c1"), conf);
  REQUIRE(r);
  const VfConfig* vf = n.world.FindVf("ens1f0np0", 1);
  REQUIRE(vf);
  std::string mac = GeneratedVfMac("vf-net", "c1", "net1", 0);
  CHECK(vf->mac == mac);
  CHECK(vf->vlan == 100);
  CHECK(vf->qos == 3);
  CHECK(vf->spoofchk);  // on unless the NAD says off
  CHECK_FALSE(vf->trust);
  CHECK(vf->min_tx_rate == 1000);
  CHECK(vf->max_tx_rate == 50000);
  const auto* l = n.world.FindLink(kPod, "net1");
  REQUIRE(l);
  CHECK(l->mac == mac);  // the VF's netdev took the MAC its PF set
  CHECK(n.world.HasRdma(kPod, "mlx5_2"));
  CHECK(n.world.FindLink(kHostPath, "ens1f0v1") == nullptr);
  auto rec = n.Records().at(0);
  REQUIRE(rec.vf);
  CHECK(rec.mode == AttachMode::kVf);
  CHECK(rec.vf->pf_address == "0000:1b:00.0");
  CHECK(rec.vf->index == 1);
  CHECK(rec.vf->host_mac == "02:00:00:00:01:01");
  CHECK(r->dump().find(mac) != std::string::npos);
  REQUIRE(p.Del(Req(kPod, "c1"), conf));
  CHECK(n.world.Snapshot() == before);  // PF's table, the netdev's own MAC, the moves
  CHECK(n.Records().empty());
}

TEST_CASE("A VF's MAC: the pod's own unless another VF has it (error 7), generated ones differ") {
  VfNode n;
  Plugin p = n.MakePlugin();
  auto given = n.Conf(std::string(kVf1) + R"(,"runtimeConfig":{"mac":"0A:11:22:33:44:55"})");
  REQUIRE(p.Add(Req(kPod, "c1"), given));
  CHECK(n.world.FindVf("ens1f0np0", 1)->mac == "0a:11:22:33:44:55");
  std::string before = n.world.Snapshot();
  auto dup = p.Add(Req(kPod2, "c2"), n.Conf(R"(,"deviceID":"0000:3c:00.2",
      "runtimeConfig":{"mac":"0a:11:22:33:44:55"})"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == kInvalidConfig);
  CHECK_THAT(dup.error().msg, Catch::Contains("VF 1 of PF 0000:1b:00.0"));
  CHECK(n.world.Snapshot() == before);
  // Two pods, two generated MACs.
  REQUIRE(p.Add(Req(kPod2, "c2"), n.Conf(R"(,"deviceID":"0000:3c:00.2")")));
  CHECK(n.world.FindVf("ens2f0np0", 0)->mac == GeneratedVfMac("vf-net", "c2", "net1", 0));
  CHECK(n.world.FindVf("ens2f0np0", 0)->mac != n.world.FindVf("ens1f0np0", 1)->mac);
}

TEST_CASE("Mode vf refuses bad input with error 7 naming it, before anything changes") {
  VfNode n;
  const std::pair<const char*, const char*> bad[] = {
      {R"(,"vlan":4095)", "vlan 4095 is outside 0..4094"},
      {R"(,"vlan":-1)", "vlan -1"},
      {R"(,"vlanQoS":2)", "no vlan"},
      {R"(,"vlan":10,"vlanQoS":8)", "vlanQoS 8"},
      {R"(,"spoofchk":"yes")", R"("on" or "off")"},
      {R"(,"trust":true)", "trust"},
      {R"(,"link_state":"up")", R"("auto", "enable", "disable")"},
      {R"(,"min_tx_rate":5000,"max_tx_rate":1000)", "above max_tx_rate"},
      {R"(,"runtimeConfig":{"mac":"00:00:00:00:00:00"})", "all zero"},
      {R"(,"runtimeConfig":{"mac":"01:00:5e:00:00:01"})", "multicast"},
      {R"(,"runtimeConfig":{"mac":"0a:11:22:33:44"})", "is not a MAC"},
      {R"(,"runtimeConfig":{"infinibandGUID":"00:00:00:00:00:00:00:00"})", "all zero"},
      {R"(,"runtimeConfig":{"infinibandGUID":"ff:ff:ff:ff:ff:ff:ff:ff"})", "all ones"},
      {R"(,"runtimeConfig":{"infinibandGUID":"01:02:03:04:05:06:07:08"})", "multicast"},
      {R"(,"runtimeConfig":{"infinibandGUID":"0102:0304"})", "is neither"},
  };
  for (const auto& [extra, why] : bad) {
    auto c = n.TryConf(extra);
    INFO(extra);
    REQUIRE_FALSE(c);
    CHECK(c.error().code == kInvalidConfig);
    CHECK_THAT(c.error().msg, Catch::Contains(why));
  }
  auto not_vf =
      ParseConfig(R"({"cniVersion":"1.0.0","name":"x","type":"rdma","vlan":5})", Command::kAdd);
  REQUIRE_FALSE(not_vf);
  CHECK_THAT(not_vf.error().msg, Catch::Contains(R"("mode": "vf")"));

  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  // A rate above the VF's 200 Gb/s link.
  auto fast = p.Add(Req(kPod, "c1"), n.Conf(std::string(kVf1) + R"(,"max_tx_rate":400000)"));
  REQUIRE_FALSE(fast);
  CHECK(fast.error().code == kInvalidConfig);
  CHECK_THAT(fast.error().msg, Catch::Contains("200000 Mbit/s"));
  // A PF is not a VF.
  auto pf = p.Add(Req(kPod, "c1"), n.Conf(R"(,"deviceID":"0000:1b:00.0")"));
  REQUIRE_FALSE(pf);
  CHECK(pf.error().code == kInvalidConfig);
  CHECK_THAT(pf.error().msg, Catch::Contains("not an SR-IOV VF"));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.Records().empty());
}

TEST_CASE(
    "Never a VF and its PF to two pods, and a VF in use is refused, never reset under its pod") {
  VfNode n;
  Plugin p = n.MakePlugin();
  auto move_pf = ParseConfig(R"({"cniVersion":"1.1.0","name":"pf-net","type":"rdma",
      "deviceID":"0000:1b:00.0","stateDir":")" +
                                 n.state_dir + "\"}",
                             Command::kAdd, TestPolicy());
  REQUIRE(move_pf);
  REQUIRE(p.Add(Req(kPod, "c1"), *move_pf));
  std::string before = n.world.Snapshot();
  auto vf = p.Add(Req(kPod2, "c2"), n.Conf(kVf1));
  REQUIRE_FALSE(vf);
  CHECK(vf.error().code == kDeviceUnavailable);
  CHECK_THAT(vf.error().msg, Catch::Contains("attached whole to c1/net1"));
  REQUIRE(p.Del(Req(kPod, "c1"), *move_pf));

  REQUIRE(p.Add(Req(kPod, "c1"), n.Conf(kVf1)));
  before = n.world.Snapshot();
  auto pf = p.Add(Req(kPod2, "c2"), *move_pf);
  REQUIRE_FALSE(pf);
  CHECK(pf.error().code == kDeviceUnavailable);
  CHECK_THAT(pf.error().msg, Catch::Contains("the PF of a VF attached to c1/net1"));
  auto again = p.Add(Req(kPod2, "c2"), n.Conf(kVf1));
  REQUIRE_FALSE(again);
  CHECK(again.error().code == kDeviceUnavailable);
  CHECK(n.world.Snapshot() == before);
}

TEST_CASE("An InfiniBand VF gets a derived GUID (or the pod's), its driver rebound, all undone") {
  VfNode n(true, true);
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  SECTION("derived from the PF's GUID, unique to the VF") {
    auto conf = n.Conf(R"(,"deviceID":"0000:1b:00.4")");  // VF 2 of ibp27s0
    REQUIRE(p.Add(Req(kPod, "c1"), conf));
    const VfConfig* vf = n.world.FindVf("ibp27s0", 2);
    uint64_t want = *GeneratedVfGuid(*link::ParseGuid("b83f:d203:0030:0000"), 2);
    CHECK(vf->node_guid == want);
    CHECK(vf->port_guid == want);
    CHECK(want >> 56 == 0x02);
    CHECK(((want >> 48) & 0xff) == 3);
    auto rec = n.Records().at(0);
    CHECK(rec.vf->rebound);
    CHECK(n.world.FindLink(kPod, "net1"));
    // The rebind unbound the VF from its driver and probed it again.
    CHECK(n.root.ReadAttrOr("bus/pci/drivers/mlx5_core/unbind", "") == "0000:1b:00.4");
    CHECK(n.root.ReadAttrOr("bus/pci/drivers_probe", "") == "0000:1b:00.4");
    REQUIRE(p.Del(Req(kPod, "c1"), conf));
    // A zero GUID cannot be set back: the VF keeps its derived one; everything else is as it was.
    CHECK(n.world.FindVf("ibp27s0", 2)->node_guid == want);
    CHECK(n.world.FindLink(kHostPath, "ibp27s0v2"));
    CHECK(n.Records().empty());
  }
  SECTION("the pod's GUID from runtimeConfig or CNI_ARGS; a second VF with it is refused") {
    auto conf = n.Conf(
        R"(,"deviceID":"0000:1b:00.2","runtimeConfig":{"infinibandGUID":"02:aa:00:00:00:00:00:01"})");
    REQUIRE(p.Add(Req(kPod, "c1"), conf));
    CHECK(n.world.FindVf("ibp27s0", 0)->node_guid == 0x02aa000000000001ULL);
    auto dup = p.Add(Req(kPod2, "c2", "net1", "IgnoreUnknown=1;GUID=02:aa:00:00:00:00:00:01"),
                     n.Conf(R"(,"deviceID":"0000:3c:00.2")"));
    REQUIRE_FALSE(dup);
    CHECK(dup.error().code == kInvalidConfig);
    CHECK_THAT(dup.error().msg, Catch::Contains("CNI_ARGS GUID") && Catch::Contains("VF 0"));
    REQUIRE(p.Add(Req(kPod2, "c2", "net1", "GUID=02:bb:00:00:00:00:00:02"),
                  n.Conf(R"(,"deviceID":"0000:3c:00.2")")));
    CHECK(n.world.FindVf("ibp60s0", 0)->port_guid == 0x02bb000000000002ULL);
  }
  SECTION("a VLAN is an Ethernet setting: error 7, nothing changed") {
    auto vlan = p.Add(Req(kPod, "c1"), n.Conf(R"(,"deviceID":"0000:1b:00.2","vlan":7)"));
    REQUIRE_FALSE(vlan);
    CHECK(vlan.error().code == kInvalidConfig);
    CHECK_THAT(vlan.error().msg, Catch::Contains("pkey"));
    CHECK(n.world.Snapshot() == before);
  }
}

// The partition hook as the CNI sees it: what it was told, and whether it answers.
struct RecordingHook final : PartitionHook {
  CniResult<void> Apply(const PartitionChange& c) override {
    told.push_back((c.add ? "add " : "remove ") + sysfs::FormatPkey(c.pkey) + " " +
                   link::FormatGuidColons(c.guid) + " " + c.container_id);
    if (fail) return CniFail(kTryAgainLater, "partition hook /opt/sm-hook (add 0x8001) exited 1");
    return {};
  }
  std::vector<std::string> told;
  bool fail = false;
};

TEST_CASE("An InfiniBand VF on a partition: the hook is told its GUID on ADD and again on DEL") {
  VfNode n(true, true);
  RecordingHook hook;
  Plugin p = n.MakePlugin();
  Plugin with_hook({.links = n.world.links(),
                    .rdma = n.world.rdma(),
                    .namespaces = n.world.namespaces(),
                    .sysfs = n.root,
                    .addrs = &n.world.addrs(),
                    .vfs = &n.world.vfs(),
                    .rebind_wait = std::chrono::milliseconds(200),
                    .partitions = &hook});
  const std::string guid = "02:aa:00:00:00:00:00:07";
  // The VF's table does not hold 0x8005 (its new GUID is not a member yet): not a refusal.
  auto conf = n.Conf(R"(,"deviceID":"0000:1b:00.4","pkey":"0x8005",
      "runtimeConfig":{"infinibandGUID":")" +
                     guid + R"("})");
  SECTION("told once the VF has the GUID, and told again when it is given back") {
    REQUIRE(with_hook.Add(Req(kPod, "c1"), conf));
    REQUIRE(hook.told == std::vector<std::string>{"add 0x8005 " + guid + " c1"});
    auto rec = n.Records().at(0);
    CHECK(rec.pkey == 0x8005);
    CHECK(rec.pkey_index == -1);
    // rdma-doctor partitions names it from the record.
    auto members = PartitionMembers(n.Records(), n.root);
    REQUIRE(members.size() == 1);
    CHECK(members[0].guid == 0x02aa000000000007ULL);
    CHECK_THAT(members[0].why, Catch::Contains("VF 2 of 0000:1b:00.0"));
    REQUIRE(with_hook.Del(Req(kPod, "c1"), conf));
    CHECK(hook.told.back() == "remove 0x8005 " + guid + " c1");
    CHECK(n.Records().empty());
  }
  SECTION("a hook that fails fails ADD (11), and the VF is put back as it was") {
    hook.fail = true;
    auto r = with_hook.Add(Req(kPod, "c1"), conf);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kTryAgainLater);
    CHECK_THAT(r.error().msg, Catch::Contains("partition hook"));
    // Its GUID was unset (zero, which cannot be set again): it gets its derived one back, never
    // keeping the GUID the pod chose.
    uint64_t derived = *GeneratedVfGuid(*link::ParseGuid("b83f:d203:0030:0000"), 2);
    CHECK(n.world.FindVf("ibp27s0", 2)->node_guid == derived);
    CHECK(n.world.FindVf("ibp27s0", 2)->port_guid == derived);
    CHECK_FALSE(n.world.FindLink(kPod, "net1"));
    CHECK(n.Records().empty());
  }
  SECTION("a hook that fails on DEL does not keep the pod: logged, DEL succeeds") {
    REQUIRE(with_hook.Add(Req(kPod, "c1"), conf));
    hook.fail = true;
    REQUIRE(with_hook.Del(Req(kPod, "c1"), conf));
    CHECK(n.Records().empty());
    CHECK(n.world.FindLink(kHostPath, "ibp27s0v2"));
  }
  SECTION("a VF on the default partition tells the hook nothing") {
    REQUIRE(with_hook.Add(Req(kPod, "c1"), n.Conf(R"(,"deviceID":"0000:1b:00.4")")));
    REQUIRE(with_hook.Del(Req(kPod, "c1"), n.Conf(R"(,"deviceID":"0000:1b:00.4")")));
    CHECK(hook.told.empty());
    CHECK(n.Records().empty());
  }
}

TEST_CASE("CHECK of a VF re-reads its PF: a setting changed behind the plugin is error 105") {
  VfNode n;
  Plugin p = n.MakePlugin();
  auto conf = n.Conf(R"(,"deviceID":"0000:1b:00.3","vlan":101,"vlanQoS":3,"trust":"on",
      "max_tx_rate":1000,"runtimeConfig":{"mac":"06:aa:00:00:00:01"})");
  REQUIRE(p.Add(Req(kPod, "c1"), conf));
  Request check = Req(kPod, "c1");
  check.command = Command::kCheck;
  REQUIRE(p.Check(check, conf));
  // Someone (`ip link set PF vf 1 vlan 7`) moves the pod's VF to another VLAN.
  auto host = n.world.namespaces().Host();
  REQUIRE(host);
  const int pf = n.world.FindLink(kHostPath, n.pf())->ifindex;
  REQUIRE(n.world.vfs().Set(*host, pf, {.vf = 1, .vlan = 7, .qos = 3}));
  auto r = p.Check(check, conf);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kCheckFailed);
  CHECK_THAT(r.error().msg, Catch::Contains("vlan is 7 (ADD set 101)") &&
                                Catch::Contains("changed behind the plugin"));
  REQUIRE(p.Del(Req(kPod, "c1"), conf));
}

TEST_CASE(
    "DEL never sticks on a taken name: a netdev whose host name is another's comes home as devN") {
  VfNode n;
  Plugin p = n.MakePlugin();
  auto conf = n.Conf(R"(,"deviceID":"0000:1b:00.3","runtimeConfig":{"mac":"06:aa:00:00:00:01"})");
  REQUIRE(p.Add(Req(kPod, "c1"), conf));
  const auto rec = n.Records().at(0);
  const int ifindex = n.world.FindLink(kPod, "net1")->ifindex;
  // A rebound VF's driver took the lowest free ethN, which was this VF's name on the host.
  n.world.AddLink(kHostPath, rec.host_name, "06:bb:00:00:00:01", 1500, false);
  REQUIRE(p.Del(Req(kPod, "c1"), conf));
  const auto* home = n.world.FindLink(kHostPath, "dev" + std::to_string(ifindex));
  REQUIRE(home);
  CHECK(home->ifindex == ifindex);
  CHECK(n.world.FindLink(kHostPath, rec.host_name)->mac == "06:bb:00:00:00:01");
  CHECK(n.Records().empty());
}

TEST_CASE("A VF netdev that refuses its MAC (igbvf) is rebound to take what its PF set") {
  VfNode n;
  n.world.mac_locked.insert("ens1f0v1");
  Plugin p = n.MakePlugin();
  REQUIRE(p.Add(Req(kPod, "c1"), n.Conf(kVf1)));
  auto rec = n.Records().at(0);
  CHECK(rec.vf->rebound);
  CHECK(n.root.ReadAttrOr("bus/pci/drivers_probe", "") == "0000:1b:00.3");
}

TEST_CASE(
    "A VF left without its driver by a kill mid-rebind is probed back before DEL restores it") {
  VfNode n;
  Plugin p = n.MakePlugin();
  const NetConf conf = n.Conf(kVf1);
  REQUIRE(p.Add(Req(kPod, "c1"), conf));
  // Killed between the unbind and the probe (an ADD's or a DEL's rebind): no driver.
  namespace fs = std::filesystem;
  const std::string vf = n.root.Sys("bus/pci/devices/0000:1b:00.3/driver");
  const fs::path driver = fs::read_symlink(vf);
  fs::remove(vf);
  SECTION("the bus binds nothing: DEL fails, keeps the record and says how to bind it") {
    auto del = p.Del(Req(kPod, "c1"), conf);
    REQUIRE_FALSE(del);
    CHECK(del.error().code == kRollbackIncomplete);
    CHECK_THAT(del.error().msg, Catch::Contains("0000:1b:00.3 has no driver"));
    CHECK_THAT(del.error().msg, Catch::Contains("/bind"));
    CHECK(n.root.ReadAttrOr("bus/pci/drivers_probe", "") == "0000:1b:00.3");
    CHECK(n.Records().size() == 1);
  }
  SECTION("the bus binds its driver: DEL restores the VF and drops the record") {
    std::thread kernel([&] {  // what the kernel does on drivers_probe
      for (int i = 0; i < 200; ++i) {
        if (n.root.ReadAttrOr("bus/pci/drivers_probe", "") == "0000:1b:00.3") {
          fs::create_symlink(driver, vf);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    auto del = p.Del(Req(kPod, "c1"), conf);
    kernel.join();
    REQUIRE(del);
    CHECK(n.Records().empty());
    CHECK(n.world.FindLink(kHostPath, "ens1f0v1"));
  }
}

TEST_CASE("A setting the PF driver refuses fails ADD and what it took is restored") {
  VfNode n;
  n.world.vf_refuses.insert("link_state");  // igb: EOPNOTSUPP, after MAC, VLAN and rate took
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(kPod, "c1"), n.Conf(std::string(kVf1) + R"(,"vlan":9,"link_state":"enable")"));
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().msg, Catch::Contains("set VF 1") && Catch::Contains("ens1f0np0"));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.Records().empty());
}

// Every call of a VF ADD, made to fail in turn (the plugin undoes), and made the point where the
// process is killed (nothing after it reaches the node; DEL from a fresh plugin undoes).
TEST_CASE("Every failing or killed call of a VF ADD is undone: the PF's view of the VF back") {
  for (bool ib : {false, true}) {
    std::string extra = ib ? R"(,"deviceID":"0000:1b:00.3")"
                           : std::string(kVf1) + R"(,"vlan":100,"trust":"on","max_tx_rate":1000)";
    int total = 0;
    {
      VfNode n(ib);
      Plugin p = n.MakePlugin();
      REQUIRE(p.Add(Req(kPod, "c1"), n.Conf(extra)));
      total = n.world.calls;
    }
    for (bool killed : {false, true}) {
      for (int fail_at = 1; fail_at <= total; ++fail_at) {
        VfNode n(ib);
        std::string before = n.world.Snapshot();
        {
          Plugin p = n.MakePlugin();
          n.world.fail_at = fail_at;
          n.world.fail_after = killed;
          auto r = p.Add(Req(kPod, "c1"), n.Conf(extra));
          // Some calls ADD can do without (a lookup that only checks a name is free, another
          // PF's VFs read for uniqueness, the VF netdev's own MAC: then it rebinds): ADD may
          // still succeed, and DEL gives everything back all the same.
          INFO((ib ? "IB" : "RoCE") << (killed ? " killed at" : " failed") << " call " << fail_at
                                    << " (" << n.world.trace.at(static_cast<size_t>(fail_at - 1))
                                    << ") of " << total << (r ? "" : ": " + r.error().msg));
          if (killed && !r) CHECK(n.Records().size() <= 1);
        }
        n.world.fail_at = 0;
        n.world.fail_after = false;
        Plugin fresh = n.MakePlugin();
        INFO((ib ? "IB" : "RoCE") << (killed ? " killed at " : " failed ") << fail_at);
        REQUIRE(fresh.Del(Req(kPod, "c1"), n.Conf(extra)));
        CHECK(n.world.Snapshot() == before);
        CHECK(n.Records().empty());
      }
    }
  }
}

}  // namespace
}  // namespace kuberdma::cni
