// SPDX-License-Identifier: Apache-2.0
// The shipped objects, run as Multus runs them: deploy/manifests' ConfigMap gives the device
// plugin's resources, the kubelet's allocation gives device IDs, the shipped NAD and the shipped
// StatefulSet's networks annotation give the attachments, and the Multus stand-in (tools/sim)
// turns them into the CNI calls `rdma` gets, CNI_ARGS and all. Real namespaces, real binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "kuberdma/cni/state.h"
#include "kuberdma/deviceplugin/config.h"
#include "kuberdma/deviceplugin/resource.h"
#include "kuberdma/sim/multus.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/sysfs/hca.h"
#include "manifests.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;

struct Shipped {
  Shipped() {
    auto cm = test_support::ShippedBlock("manifests/10-configmap.yaml", "device-plugin.json");
    auto conf =
        test_support::ShippedBlock("manifests/30-networkattachmentdefinition.yaml", "config");
    auto res = test_support::ShippedBlock("manifests/30-networkattachmentdefinition.yaml",
                                          "k8s.v1.cni.cncf.io/resourceName");
    auto nets =
        test_support::ShippedBlock("manifests/40-statefulset.yaml", "k8s.v1.cni.cncf.io/networks");
    REQUIRE(cm);
    REQUIRE(conf);
    REQUIRE(res);
    REQUIRE(nets);
    auto cfg = deviceplugin::ParseConfig(*cm);
    REQUIRE(cfg);
    resources = cfg->resources;
    json c = json::parse(*conf);
    nad = Nad{.name = c["name"], .ns = "default", .resource = *res, .config = c};
    auto parsed = ParseNetworksAnnotation(*nets);
    REQUIRE(parsed);
    networks = *parsed;
  }
  std::vector<deviceplugin::ResourceConfig> resources;
  Nad nad;
  std::vector<std::pair<std::string, std::string>> networks;
};

// The kubelet's allocation of `n` slots of `resource`, as the plugin prefers them.
std::vector<std::string> Allocate(const Shipped& s, const std::string& resource, size_t n) {
  sysfs::SysfsRoot root(kRoce8);
  for (const auto& rc : s.resources) {
    if (rc.FullName() != resource) continue;
    deviceplugin::Resource r(rc, root);
    r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
    std::vector<std::string> all;
    for (const auto& d : r.Devices()) all.push_back(d.id);
    return r.Preferred(all, {}, n);
  }
  FAIL("the shipped ConfigMap has no resource " << resource);
  return {};
}

TEST_CASE("The shipped StatefulSet's pod gets the HCAs the kubelet allocated, as Multus calls") {
  Shipped s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string netns = node.AddPod("trainer-0");
  std::vector<std::string> ids = Allocate(s, s.nad.resource, s.networks.size());
  REQUIRE(ids.size() == s.networks.size());
  MultusPod pod{.name = "llm-trainer-0",
                .uid = "u-1",
                .sandbox = "c0ffee01",
                .networks = s.networks,
                .allocated = {{s.nad.resource, ids}}};
  auto adds = MultusAdds(pod, {s.nad}, netns, {{"stateDir", node.state_dir()}});
  REQUIRE(adds);
  REQUIRE(adds->size() == 8);
  // The runtime's keys, then Multus's copies of the same keys: the plugin takes both.
  CHECK_THAT(adds->front().args,
             Catch::StartsWith("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;") &&
                 Catch::Contains("K8S_POD_UID=u-1;IgnoreUnknown=1;K8S_POD_NAMESPACE=default;"));
  std::vector<std::string> attached;
  for (const auto& call : *adds) {
    auto r = node.Run(kBin, call);
    INFO(call.ifname << ": " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    auto rec = cni::StateStore(node.state_dir()).Load(s.nad.name, pod.sandbox, call.ifname);
    REQUIRE(rec);
    REQUIRE(*rec);
    attached.push_back((*rec)->hca);
    CHECK(node.links().GetByName(node.Pod(netns), call.ifname));
  }
  // Slot i is HCA i's: the i-th attachment has exactly the i-th allocated HCA.
  std::vector<std::string> want;
  for (const auto& id : ids) want.push_back(id.substr(0, id.find_last_of('-')));
  CHECK(attached == want);
  for (const auto& call : MultusDels(*adds)) CHECK(node.Run(kBin, call).exit_code == 0);
  for (const auto& n : Roce8Netdevs()) CHECK(node.links().GetByName(node.node(), n));
}

TEST_CASE("Multus refuses more attachments than allocations; a NAD broken after ADD still DELs") {
  Shipped s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string netns = node.AddPod("short");
  // Two slots for three attachments: Multus cannot build the third call.
  MultusPod pod{.name = "short-0",
                .uid = "u-2",
                .sandbox = "c0ffee02",
                .networks = {{s.nad.name, ""}, {s.nad.name, ""}, {s.nad.name, ""}},
                .allocated = {{s.nad.resource, Allocate(s, s.nad.resource, 2)}}};
  CHECK_FALSE(MultusAdds(pod, {s.nad}, netns, {{"stateDir", node.state_dir()}}));
  // A NAD whose config breaks after the first ADD: the runtime's DEL re-sends it to every
  // attachment, and each DEL succeeds (the first restores its HCA from the record).
  pod.networks.pop_back();
  auto adds = MultusAdds(pod, {s.nad}, netns, {{"stateDir", node.state_dir()}});
  REQUIRE(adds);
  REQUIRE(node.Run(kBin, adds->front()).exit_code == 0);
  json broken = json::parse((*adds)[1].config);
  broken["mtu"] = "abc";
  (*adds)[1].config = broken.dump();
  CHECK(node.Run(kBin, (*adds)[1]).exit_code == 1);
  for (auto& call : MultusDels(*adds)) {
    call.config = broken.dump();
    auto r = node.Run(kBin, call);
    INFO(call.ifname << ": " << r.out << r.err);
    CHECK(r.exit_code == 0);
  }
  for (const auto& n : Roce8Netdevs()) CHECK(node.links().GetByName(node.node(), n));
  CHECK(cni::StateStore(node.state_dir()).List()->empty());
}

TEST_CASE("Debian's host-local takes Multus's CNI_ARGS, duplicate keys and all") {
  Shipped s;
  SimNode node(kRoce8, Roce8Netdevs());
  std::string netns = node.AddPod("roce");
  // The shipped NAD as the chart's fabric roce renders a rail: plus one host-local subnet.
  Nad rail = s.nad;
  rail.name = "rdma-rail1";
  rail.config["name"] = "rdma-rail1";
  rail.config["cniVersion"] = "1.0.0";
  rail.config["ipam"] = {{"type", "host-local"},
                         {"dataDir", node.state_dir() + "/ipam"},
                         {"ranges", {{{{"subnet", "10.10.1.0/24"}}}}}};
  MultusPod pod{.name = "roce-0",
                .uid = "u-3",
                .sandbox = "c0ffee03",
                .networks = {{"rdma-rail1", ""}},
                .allocated = {{s.nad.resource, Allocate(s, s.nad.resource, 1)}}};
  auto adds = MultusAdds(pod, {rail}, netns, {{"stateDir", node.state_dir()}});
  REQUIRE(adds);
  (*adds)[0].cni_path = KUBERDMA_CNI_PLUGINS_DIR;
  auto add = node.Run(kBin, (*adds)[0]);
  INFO(add.out << add.err);
  REQUIRE(add.exit_code == 0);
  json result = json::parse(add.out);
  CHECK_THAT(result["ips"][0]["address"].get<std::string>(), Catch::StartsWith("10.10.1."));
  auto del = MultusDels(*adds);
  del[0].cni_path = KUBERDMA_CNI_PLUGINS_DIR;
  CHECK(node.Run(kBin, del[0]).exit_code == 0);
}

}  // namespace
}  // namespace kuberdma::sim
