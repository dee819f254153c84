// SPDX-License-Identifier: Apache-2.0
// Mode ipoib over FakeWorld and the ib8 fixture: IPoIB children of one InfiniBand HCA's netdev on
// a partition of their own (the HCA and its netdev stay on the host), the pkey checked against
// the port's table with the subnet manager's step named, IPoIB's MTU limits, RoCE refused, bad
// pkeys refused, and every failing call of ADD undone.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "fake_world.h"
#include "kuberdma/cni/plugin.h"

namespace kuberdma::cni {
namespace {

using fakes::FakeWorld;
using fakes::kHostPath;
using fakes::TestPolicy;

constexpr const char* kPodA = "/var/run/netns/pod-a";
constexpr const char* kPodB = "/var/run/netns/pod-b";

// An ib8 node in shared netns mode: each HCA's IPoIB netdev a host link with its 20-byte address.
struct IbNode {
  IbNode() : root(std::string(KUBERDMA_FIXTURES) + "/sysfs/ib8") {
    char tmpl[] = "/tmp/kuberdma-ipoib-XXXXXX";
    state_dir = mkdtemp(tmpl);
    auto hcas = sysfs::DiscoverHcas(root, sysfs::HcaDetail::kIdentity);
    REQUIRE(hcas);
    uint32_t index = 1;
    for (const auto& h : *hcas) {
      std::string addr = root.ReadAttrOr("class/net/" + h.netdevs.front() + "/address", "");
      REQUIRE(addr.size() == 59);
      world.AddLink(kHostPath, h.netdevs.front(), addr, 2044, true, 4092);
      world.AddRdma(kHostPath, h.name, index++);
    }
    world.SetMode(rdma::NetnsMode::kShared);
    world.AddNamespace(kPodA);
    world.AddNamespace(kPodB);
  }
  ~IbNode() { std::filesystem::remove_all(state_dir); }

  CniResult<NetConf> TryConf(const std::string& extra) const {
    return ParseConfig(R"({"cniVersion":"1.1.0","name":"tenant-ib","type":"rdma","mode":"ipoib",
        "hca":"mlx5_0","linkState":"up","stateDir":")" +
                           state_dir + "\"" + extra + "}",
                       Command::kAdd, TestPolicy());
  }
  NetConf Conf(const std::string& extra = R"(,"pkey":"0x8001")") const {
    auto c = TryConf(extra);
    REQUIRE(c);
    return *c;
  }
  Plugin MakePlugin() {
    return Plugin({.links = world.links(),
                   .rdma = world.rdma(),
                   .namespaces = world.namespaces(),
                   .sysfs = root,
                   .addrs = &world.addrs()});
  }
  std::vector<AttachmentRecord> Records() const { return *StateStore(state_dir).List(); }

  sysfs::SysfsRoot root;
  std::string state_dir;
  FakeWorld world;
};

Request Req(const char* ns, const std::string& cid, const std::string& ifname = "net1") {
  return Request{.command = Command::kAdd, .container_id = cid, .netns = ns, .ifname = ifname};
}

TEST_CASE("Two pods get IPoIB children of one HCA on its partition, the HCA staying on the host") {
  IbNode n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto conf = n.Conf(R"(,"pkey":"0x8001","mtu":2044)");
  REQUIRE(p.Add(Req(kPodA, "ca"), conf));
  REQUIRE(p.Add(Req(kPodB, "cb"), conf));
  for (const char* pod : {kPodA, kPodB}) {
    const auto* l = n.world.FindLink(pod, "net1");
    REQUIRE(l);
    CHECK(l->kind == "ipoib");
    CHECK(l->admin_up);
    CHECK(l->mtu == 2044);
  }
  // rtnl_newlink got the partition; the kernel's default transport (no IFLA_IPOIB_MODE).
  const link::ChildLink& sent = n.world.ipoib_children.at("net1");
  CHECK(sent.pkey == 0x8001);
  CHECK_FALSE(sent.ipoib_mode);
  CHECK(n.world.FindLink(kHostPath, "ibp26s0"));
  CHECK(n.world.HasRdma(kHostPath, "mlx5_0"));
  auto recs = n.Records();
  REQUIRE(recs.size() == 2);
  CHECK(recs[0].mode == AttachMode::kIpoib);
  CHECK(recs[0].pkey == 0x8001);
  CHECK(recs[0].pkey_index == 1);
  // DEL removes each child (found by name and kind: the kernel gave it its own address).
  REQUIRE(p.Del(Req(kPodA, "ca"), conf));
  REQUIRE(p.Del(Req(kPodB, "cb"), conf));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.Records().empty());
}

TEST_CASE("A pkey the port is no member of names the subnet manager's step and changes nothing") {
  IbNode n;
  std::string before = n.world.Snapshot();
  Plugin p = n.MakePlugin();
  auto r = p.Add(Req(kPodA, "ca"), n.Conf(R"(,"pkey":"0x8003")"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kInvalidConfig);
  CHECK_THAT(r.error().msg, Catch::Contains("0x8003") && Catch::Contains("[0xffff, 0x8001") &&
                                Catch::Contains("subnet manager") &&
                                Catch::Contains("rdma-doctor partitions --pkey 0x8003"));
  CHECK(n.world.Snapshot() == before);
  CHECK(n.Records().empty());
}

TEST_CASE("An IPoIB child's MTU is bounded by its transport mode, not its parent's MTU") {
  IbNode n;
  Plugin p = n.MakePlugin();
  std::string before = n.world.Snapshot();
  auto big = p.Add(Req(kPodA, "ca"), n.Conf(R"(,"pkey":"0x8001","mtu":4093)"));
  REQUIRE_FALSE(big);
  CHECK(big.error().code == kInvalidConfig);
  CHECK_THAT(big.error().msg, Catch::Contains("datagram mode: 4092") &&
                                  Catch::Contains(R"("ipoibMode": "connected")"));
  CHECK(n.world.Snapshot() == before);
  // Above the parent's 2044 but within datagram's 4092.
  REQUIRE(p.Add(Req(kPodA, "ca"), n.Conf(R"(,"pkey":"0x8001","mtu":4092)")));
  CHECK(n.world.FindLink(kPodA, "net1")->mtu == 4092);
  auto connected = n.Conf(R"(,"pkey":"0x8001","ipoibMode":"connected","mtu":65520)");
  REQUIRE(p.Add(Req(kPodB, "cb"), connected));
  CHECK(n.world.ipoib_children.at("net1").ipoib_mode == link::IpoibMode::kConnected);
  auto over = n.TryConf(R"(,"ipoibMode":"connected","mtu":65521)");
  REQUIRE(over);
  auto r = p.Add(Req(kPodB, "cc", "net2"), *over);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().msg, Catch::Contains("connected mode: 65520"));
}

TEST_CASE("Mode ipoib needs InfiniBand, and macvlan needs RoCE: each error names the other") {
  IbNode n;
  Plugin p = n.MakePlugin();
  auto mac = p.Add(Req(kPodA, "ca"), n.Conf(R"(,"mode":"macvlan")"));
  REQUIRE_FALSE(mac);
  CHECK_THAT(mac.error().msg, Catch::Contains("mode ipoib"));
  FakeWorld roce;
  sysfs::SysfsRoot roce_root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  roce.AddLink(kHostPath, "ens1f0np0", "b8:3f:d2:00:00:01", 9000, true);
  roce.AddRdma(kHostPath, "mlx5_0", 1);
  roce.SetMode(rdma::NetnsMode::kShared);
  roce.AddNamespace(kPodA);
  Plugin q({.links = roce.links(),
            .rdma = roce.rdma(),
            .namespaces = roce.namespaces(),
            .sysfs = roce_root,
            .addrs = &roce.addrs()});
  auto ipoib = q.Add(Req(kPodA, "ca"), n.Conf(R"(,"pkey":"0xffff")"));
  REQUIRE_FALSE(ipoib);
  CHECK_THAT(ipoib.error().msg,
             Catch::Contains("needs an InfiniBand HCA") && Catch::Contains("macvlan or ipvlan"));
  CHECK_FALSE(roce.FindLink(kPodA, "net1"));
}

TEST_CASE("Pkeys that are no partition and ipoibMode outside mode ipoib are error 7") {
  IbNode n;
  for (const char* pkey : {"0x0000", "0x8000", "0x7fff"}) {
    auto c = n.TryConf(std::string(R"(,"pkey":")") + pkey + "\"");
    REQUIRE_FALSE(c);
    CHECK(c.error().code == kInvalidConfig);
    CHECK_THAT(c.error().msg, Catch::Contains(pkey));
  }
  auto stray = n.TryConf(R"(,"mode":"move","ipoibMode":"connected")");
  REQUIRE_FALSE(stray);
  CHECK_THAT(stray.error().msg, Catch::Contains(R"(needs "mode": "ipoib")"));
  auto typo = n.TryConf(R"(,"ipoibMode":"reliable")");
  REQUIRE_FALSE(typo);
  CHECK_THAT(typo.error().msg, Catch::Contains("reliable") && Catch::Contains("datagram"));
}

TEST_CASE("Every failing call of an IPoIB child's ADD is undone: no child, no record") {
  int total = 0;
  {
    IbNode n;
    Plugin p = n.MakePlugin();
    REQUIRE(p.Add(Req(kPodA, "ca"), n.Conf()));
    total = n.world.calls;
  }
  REQUIRE(total > 2);
  for (int k = 1; k <= total; ++k) {
    CAPTURE(k);
    IbNode n;
    std::string before = n.world.Snapshot();
    Plugin p = n.MakePlugin();
    n.world.fail_at = k;
    auto r = p.Add(Req(kPodA, "ca"), n.Conf());
    n.world.fail_at = 0;
    if (!r) {
      // ADD rolled back by itself, before the runtime's DEL.
      CHECK(n.world.Snapshot() == before);
      CHECK(n.Records().empty());
    }
    REQUIRE(p.Del(Req(kPodA, "ca"), n.Conf()));
    CHECK(n.world.Snapshot() == before);
    CHECK(n.Records().empty());
  }
}

}  // namespace
}  // namespace kuberdma::cni
