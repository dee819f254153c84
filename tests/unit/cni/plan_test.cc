// SPDX-License-Identifier: Apache-2.0
// ADD's plan is read-only: for every fixture node and every way of naming a device, planning makes
// no mutating call on the fakes and writes no state, and the plan says what execution will do.
#include "kuberdma/cni/plan.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "fake_world.h"

namespace kuberdma::cni {
namespace {

using fakes::FakeWorld;
using fakes::kHostPath;
using fakes::TestPolicy;

constexpr const char* kPod = "/var/run/netns/pod-a";

// A FakeWorld holding every HCA of `fixture` with its first netdev on the host.
struct World {
  explicit World(const std::string& fixture)
      : root(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + fixture),
        mtu(fixture == "ib8" ? 4092 : 9000) {  // IPoIB (datagram) takes at most 4092
    char tmpl[] = "/tmp/kuberdma-plan-XXXXXX";
    state_dir = mkdtemp(tmpl);
    auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kIdentity);
    for (size_t i = 0; i < hcas.size(); ++i) {
      char mac[32];
      std::snprintf(mac, sizeof mac, "02:00:00:00:%02zx:01", i);
      world.AddLink(kHostPath, hcas[i].netdevs.front(), mac, 1500, true);
      world.AddRdma(kHostPath, hcas[i].name, static_cast<uint32_t>(i + 1));
      names.push_back(hcas[i].name);
      netdevs.push_back(hcas[i].netdevs.front());
      addresses.push_back(hcas[i].address);
    }
    world.AddNamespace(kPod);
  }
  ~World() { std::filesystem::remove_all(state_dir); }

  NetConf Conf(const std::string& extra) const {
    auto c = ParseConfig(R"({"cniVersion":"1.1.0","name":"rdma-net","type":"rdma","mtu":)" +
                             std::to_string(mtu) + R"(,"linkState":"up","stateDir":")" + state_dir +
                             "\"" + extra + "}",
                         Command::kAdd, TestPolicy());
    REQUIRE(c);
    return *c;
  }

  // Plans, then checks that nothing but lookups happened.
  CniResult<AttachPlan> Plan(const NetConf& conf) {
    Planner planner(world.links(), world.rdma(), world.addrs(), root);
    auto host = world.namespaces().Host();
    auto pod = world.namespaces().Open(kPod);
    world.trace.clear();
    std::string before = world.Snapshot();
    StateStore store(state_dir);
    Request req{.command = Command::kAdd, .container_id = "c1", .netns = kPod, .ifname = "net1"};
    auto plan = planner.Plan(req, conf, store, *host, *pod);
    for (const auto& call : world.trace) {
      INFO(call);
      bool read_only = call.rfind("link get", 0) == 0 || call.rfind("link list", 0) == 0 ||
                       call == "rdma list" || call == "rdma mode" || call.rfind("open ", 0) == 0 ||
                       call.rfind("addr list", 0) == 0 || call.rfind("route list", 0) == 0;
      CHECK(read_only);
    }
    CHECK(world.Snapshot() == before);
    CHECK(store.List()->empty());
    return plan;
  }

  sysfs::SysfsRoot root;
  uint32_t mtu;
  std::string state_dir;
  FakeWorld world;
  std::vector<std::string> names, netdevs, addresses;
};

TEST_CASE("Planning ADD on every fixture, by every selector, only looks") {
  for (const char* fixture : {"roce8", "ib8", "sriov", "sf"}) {
    World w(fixture);
    size_t last = w.names.size() - 1;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"", w.names[0]},
        {R"(,"deviceID":")" + w.addresses[last] + "\"", w.names[last]},
        {R"(,"runtimeConfig":{"deviceID":")" + w.names[last] + "-003\"}", w.names[last]},
        {R"(,"hca":")" + w.names[last] + "\"", w.names[last]},
        {R"(,"device":")" + w.netdevs[last] + "\"", w.names[last]},
        {R"(,"mac":"02:00:00:00:00:01")", w.names[0]},
    };
    for (const auto& [extra, want] : cases) {
      INFO(fixture << " " << extra);
      auto plan = w.Plan(w.Conf(extra));
      REQUIRE(plan);
      CHECK(plan->record.hca == want);
      CHECK_FALSE(plan->record.done);
      CHECK_FALSE(plan->record.rdma_moved);  // armed by execution, not by the plan
      CHECK(plan->record.netdev_moved);
      CHECK(plan->into.name == "net1");
      CHECK(plan->into.mtu == w.mtu);
      CHECK(plan->into.up == true);
    }
  }
}

TEST_CASE("Planning a child on every RoCE fixture only looks, and plans a child, not a move") {
  for (const char* fixture : {"roce8", "sriov", "sf"}) {
    World w(fixture);
    w.world.SetMode(rdma::NetnsMode::kShared);
    size_t last = w.names.size() - 1;
    for (const char* mode : {"macvlan", "ipvlan"}) {
      INFO(fixture << " " << mode);
      auto plan = w.Plan(w.Conf(std::string(R"(,"mtu":1500,"mode":")") + mode + R"(","hca":")" +
                                w.names[last] + "\""));
      if (!plan) {
        // A fixture whose HCAs are InfiniBand refuses, before anything changes.
        CHECK_THAT(plan.error().msg, Catch::Contains("RoCE"));
        continue;
      }
      CHECK(plan->record.hca == w.names[last]);
      CHECK(plan->record.host_name == w.netdevs[last]);
      CHECK_FALSE(plan->record.netdev_moved);
      REQUIRE(plan->child);
      CHECK(plan->child->name == "net1");
      CHECK(plan->child->mtu == 1500u);
      CHECK(plan->child->mac.empty() == (std::string(mode) == "ipvlan"));
      const std::string parent_mac = w.world.FindLink(kHostPath, w.netdevs[last])->mac;
      CHECK(plan->record.mac == (std::string(mode) == "ipvlan" ? parent_mac : plan->child->mac));
      CHECK_FALSE(plan->into.name);  // the child is created under its name; nothing is renamed
    }
  }
}

TEST_CASE("A plan that cannot be carried out is an error before anything changes") {
  World w("roce8");
  CHECK(w.Plan(w.Conf(R"(,"pkey":"0x8001")")).error().code == kInvalidConfig);
  CHECK(w.Plan(w.Conf(R"(,"hca":"mlx5_77")")).error().code == kInvalidConfig);
  w.world.SetMode(rdma::NetnsMode::kShared);
  CHECK(w.Plan(w.Conf(R"(,"sharedNetnsPolicy":"error")")).error().code == kSharedModeRejected);
  auto shared = w.Plan(w.Conf(""));
  REQUIRE(shared);
  CHECK(shared->record.netns_mode == rdma::NetnsMode::kShared);
}

}  // namespace
}  // namespace kuberdma::cni
