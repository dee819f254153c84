// SPDX-License-Identifier: Apache-2.0
// What the DRA driver publishes (deviceplugin/dra): the 8-GPU fixture's HCAs as ResourceSlices
// from the device plugin's own model, the attributes that align them with GPUs, the API's limits.
// (Against resource.k8s.io/v1's schema: deploy/check_schemas.py --dra.)
#include "kuberdma/dra/slices.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "kuberdma/rails/rails.h"
#include "kuberdma/sysfs/topology.h"
#include "per_hca.h"

namespace kuberdma::dra {
namespace {

std::string Attr(const nlohmann::json& device, const std::string& name) {
  const auto& a = device["attributes"];
  if (!a.contains(name)) return "";
  const auto& v = a[name];
  return v.contains("string") ? v["string"].get<std::string>() : v.begin().value().dump();
}

TEST_CASE("The 8-GPU node's HCAs are published with what aligns them to its GPUs") {
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  auto p = ResourceSlices(
      r, {.node = "gpu-node-7", .generation = 3, .netns_mode = rdma::NetnsMode::kShared});
  REQUIRE(p);
  REQUIRE(p->objects.size() == 1);
  const auto& s = p->objects[0];
  CHECK(s["apiVersion"] == "resource.k8s.io/v1");
  CHECK(s["spec"]["driver"] == "rdma.kube-rdma.io");
  CHECK(s["spec"]["nodeName"] == "gpu-node-7");
  CHECK(s["spec"]["pool"]["name"] == "gpu-node-7/hca");
  CHECK(s["spec"]["pool"]["generation"] == 3);
  CHECK(s["spec"]["pool"]["resourceSliceCount"] == 1);
  const auto& devices = s["spec"]["devices"];
  REQUIRE(devices.size() == 8);
  CHECK(p->devices.front() == "mlx5-0");
  const auto& d = devices[0];
  CHECK(Attr(d, "rdma.kube-rdma.io/rdmaDevice") == "mlx5_0");
  CHECK(Attr(d, "k8s.cni.cncf.io/deviceID") == "0000:1a:00.0");
  CHECK(Attr(d, "k8s.cni.cncf.io/resourceName") == "rdma/hca");
  CHECK(Attr(d, "resource.kubernetes.io/pciBusID") == "0000:1a:00.0");
  CHECK(Attr(d, "resource.kubernetes.io/numaNode") == "0");
  CHECK(Attr(d, "rdma.kube-rdma.io/rateGbps") == "400");
  CHECK(Attr(d, "rdma.kube-rdma.io/linkLayer") == "Ethernet");
  CHECK(Attr(d, "rdma.kube-rdma.io/netnsMode") == "shared");
  CHECK(d["attributes"].size() <= kMaxAttributesPerDevice);
  // The GPUs on mlx5_0's switch share its PCIe root: what matchAttribute on
  // resource.kubernetes.io/pcieRoot pairs, whichever driver publishes the GPU.
  auto gpus = *sysfs::DiscoverGpus(root);
  std::string gpu_root = gpus[0].device_path.substr(8, gpus[0].device_path.find('/', 8) - 8);
  CHECK(Attr(d, "resource.kubernetes.io/pcieRoot") == gpu_root);
  std::set<std::string> roots;
  for (const auto& dev : devices) roots.insert(Attr(dev, "resource.kubernetes.io/pcieRoot"));
  CHECK(roots.size() == 4);  // four switches, two HCAs on each
  CHECK(p->dropped.empty());
}

TEST_CASE("VFs are published like HCAs, on their PF's rail and PCIe root, naming their PF") {
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/sriov");
  deviceplugin::ResourceConfig vf = testing::PerHcaResource();
  vf.resource_name = "vf";
  vf.selectors.functions = {"vf"};
  deviceplugin::Resource r(vf, root);
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  r.Refresh(hcas);
  // Rails as the device plugin judges them: a VF is on its PF's.
  rails::NodeRoles roles = rails::JudgeHcas(hcas, rails::HostNet{}, rails::NodeConfig{});
  auto p = ResourceSlices(
      r, {.node = "gpu-node-7", .generation = 1, .netns_mode = rdma::NetnsMode::kExclusive},
      &roles);
  REQUIRE(p);
  const auto& devices = p->objects.at(0)["spec"]["devices"];
  REQUIRE(devices.size() == 8);  // the fixture's two PFs' four VFs each, never a PF
  std::map<std::string, int> pf_rail;
  for (const auto& h : hcas) {
    if (h.pf_address.empty() && roles.Find(h.name))
      pf_rail[h.pci_address] = roles.Find(h.name)->rail;
  }
  std::map<std::string, std::string> pf_root;
  for (const auto& h : hcas) {
    if (h.pf_address.empty()) pf_root[h.pci_address] = h.device_path;
  }
  for (const auto& d : devices) {
    INFO(d.dump());
    CHECK(Attr(d, "rdma.kube-rdma.io/function") == "vf");
    const std::string pf = Attr(d, "rdma.kube-rdma.io/pfPciAddress");
    REQUIRE(pf_root.contains(pf));
    CHECK(Attr(d, "k8s.cni.cncf.io/resourceName") == "rdma/vf");
    CHECK(Attr(d, "rdma.kube-rdma.io/linkLayer") == "Ethernet");
    // The VF's PCIe root is its PF's: a GPU+VF claim aligns as GPU+NIC pairs do.
    const std::string& path = pf_root[pf];
    CHECK(Attr(d, "resource.kubernetes.io/pcieRoot") == path.substr(8, path.find('/', 8) - 8));
    CHECK(Attr(d, "rdma.kube-rdma.io/rail") == std::to_string(pf_rail[pf]));
    CHECK(pf_rail[pf] > 0);
  }
  // The whole HCAs say "pf", so a selector on function never meets a device without it.
  deviceplugin::Resource whole(testing::PerHcaResource(), root);
  whole.Refresh(hcas);
  auto q = ResourceSlices(
      whole, {.node = "gpu-node-7", .generation = 1, .netns_mode = rdma::NetnsMode::kShared});
  REQUIRE(q);
  std::map<std::string, int> functions;
  for (const auto& d : q->objects.at(0)["spec"]["devices"]) {
    ++functions[Attr(d, "rdma.kube-rdma.io/function")];
  }
  CHECK(functions["pf"] > 0);
  CHECK(functions.count("") == 0);
}

using nlohmann::json;

// The device `name` of the first slice of `p`.
json DeviceIn(const Published& p, const std::string& name) {
  for (const auto& d : p.objects.front()["spec"]["devices"]) {
    if (d["name"] == name) return d;
  }
  return json();
}

TEST_CASE(
    "A port down, a slow port and a NIC the node took are tainted, an HCA gone is not offered") {
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(hcas);
  hcas[3].ports[0].state = 1;  // mlx5_3 port 1 DOWN
  hcas[3].ports[0].state_name = "DOWN";
  hcas[2].ports[0].rate_gbps /= 2;  // mlx5_2 trained at half its siblings' rate
  hcas.erase(hcas.begin() + 5);     // mlx5_5 gone
  // mlx5_6 got the node's default route: the node's own now.
  rails::NodeRoles roles;
  roles.by_hca["mlx5_6"].node_own = "its netdev carries the default route";
  r.Refresh(hcas, &roles);
  auto p = ResourceSlices(r, {.node = "n1"}, &roles);
  REQUIRE(p);
  std::set<std::string> names(p->devices.begin(), p->devices.end());
  CHECK(names.size() == 7);
  CHECK_FALSE(names.contains("mlx5-5"));
  CHECK(DeviceIn(*p, "mlx5-3")["taints"] ==
        json::parse(R"([{"key": "rdma.kube-rdma.io/link-down", "value": "port-1-DOWN",
                         "effect": "NoSchedule"}])"));
  CHECK(DeviceIn(*p, "mlx5-6")["taints"][0]["key"] == "rdma.kube-rdma.io/node-nic");
  CHECK(DeviceIn(*p, "mlx5-6")["taints"][0]["value"] ==
        "the-node-s-own-NIC-its-netdev-carries-the-default-route");
  const json slow = DeviceIn(*p, "mlx5-2")["taints"][0];
  CHECK(slow["key"] == "rdma.kube-rdma.io/degraded");
  CHECK(slow["effect"] == "None");  // shown, not acted on
  CHECK_THAT(slow["value"].get<std::string>(), Catch::StartsWith("rate-"));
  CHECK_FALSE(DeviceIn(*p, "mlx5-0").contains("taints"));

  // The same verdicts are the health the kubelet is streamed.
  std::map<std::string, bool> healthy;
  for (const auto& d : DeviceStates(r, {.node = "n1"})) healthy[d.device] = d.Healthy();
  CHECK(healthy.size() == 7);
  CHECK_FALSE(healthy["mlx5-3"]);
  CHECK_FALSE(healthy["mlx5-6"]);
  CHECK(healthy["mlx5-2"]);
  CHECK(healthy["mlx5-0"]);

  SECTION("NoExecute when the admin asks for it; degraded stays None") {
    auto e = ResourceSlices(r, {.node = "n1", .taint_effect = "NoExecute"}, &roles);
    CHECK(DeviceIn(*e, "mlx5-3")["taints"][0]["effect"] == "NoExecute");
    CHECK(DeviceIn(*e, "mlx5-2")["taints"][0]["effect"] == "None");
  }
}

TEST_CASE("An HCA the fleet acceptance named slow is tainted as its verdict says") {
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  PublishOptions o{.node = "n1"};
  o.acceptance["mlx5_4"] = {"rail 5 (mlx5_4): 0.20 GB/s against the fleet median of 2.00",
                            "NoSchedule"};
  auto p = ResourceSlices(r, o);
  REQUIRE(p);
  const json t = DeviceIn(*p, "mlx5-4")["taints"];
  REQUIRE(t.size() == 1);
  CHECK(t[0]["key"] == "rdma.kube-rdma.io/acceptance");
  CHECK(t[0]["value"] == "rail-5-mlx5_4-0.20-GB-s-against-the-fleet-median-of-2.00");
  CHECK(t[0]["effect"] == "NoSchedule");
  CHECK_FALSE(DeviceIn(*p, "mlx5-3").contains("taints"));
  o.acceptance["mlx5_4"].second = "None";  // shown only
  bool healthy = false;
  for (const auto& d : DeviceStates(r, o))
    healthy = healthy || (d.device == "mlx5-4" && d.Healthy());
  CHECK(healthy);
}

TEST_CASE("Each device names its rail's leaf switch from LLDP, for matchAttribute") {
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  PublishOptions o{.node = "n1"};
  o.leaves = {{"mlx5_0", "leaf-1"}, {"mlx5_1", std::string(80, 'x')}};
  auto p = ResourceSlices(r, o);
  REQUIRE(p);
  const auto& devices = p->objects[0]["spec"]["devices"];
  CHECK(Attr(devices[0], "rdma.kube-rdma.io/leaf") == "leaf-1");
  // Too long for the API: its head and a hash of the whole, never left out.
  std::string long_leaf = Attr(devices[1], "rdma.kube-rdma.io/leaf");
  CHECK(long_leaf.size() == kMaxStringValue);
  CHECK(long_leaf.substr(0, 55) == std::string(55, 'x'));
  // Not heard: an empty string, so a selector on leaf meets no missing attribute.
  REQUIRE(devices[2]["attributes"].contains("rdma.kube-rdma.io/leaf"));
  CHECK(Attr(devices[2], "rdma.kube-rdma.io/leaf").empty());
  CHECK(p->dropped.empty());
}

TEST_CASE("A taint value is a label value, whatever the reason says") {
  CHECK(TaintValue("port 1 DOWN") == "port-1-DOWN");
  CHECK(TaintValue("  --weird\x01 reason: a/b  ") == "weird-reason-a-b");
  CHECK(TaintValue(std::string(200, 'x')).size() == 63);
  CHECK(TaintValue("!!!").empty());
}

TEST_CASE("Slice names cannot collide across nodes, resources or drivers") {
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  auto name_of = [&](const std::string& node, const std::string& resource,
                     const std::string& driver) {
    auto cfg = testing::PerHcaResource();
    cfg.resource_name = resource;
    deviceplugin::Resource r(cfg, root);
    r.Refresh(hcas);
    return ResourceSlices(r, {.driver = driver, .node = node})
        ->objects.front()["metadata"]["name"]
        .get<std::string>();
  };
  // Node "a-b" with resource "c" and node "a" with resource "b-c" once both made "a-b-c-0".
  CHECK(name_of("a-b", "c", kDriverName) != name_of("a", "b-c", kDriverName));
  CHECK(name_of("a", "b", kDriverName) != name_of("a", "b", "other.example.com"));
  CHECK(name_of("a", "b", kDriverName) == name_of("a", "b", kDriverName));
  std::string label(63, 'n');
  std::string longest =
      name_of(label + "." + label + "." + label + "." + std::string(61, 'n'), "hca", kDriverName);
  CHECK(longest.size() <= 253);
}

TEST_CASE("Names, limits: DNS labels, qualified names, 64-character values, 128 devices a slice") {
  CHECK(DeviceName("mlx5_0", 1, false) == "mlx5-0");
  CHECK(DeviceName("mlx5_0", 2, true) == "mlx5-0-p2");
  CHECK(DeviceName("_Odd.Name_", 1, false) == "odd-name");
  CHECK(IsQualifiedName("resource.kubernetes.io/pcieRoot"));
  CHECK(IsQualifiedName("rdmaDevice"));
  CHECK_FALSE(IsQualifiedName("rdma.kube-rdma.io/" + std::string(33, 'a')));
  CHECK_FALSE(IsQualifiedName("Bad_Domain/x"));
  CHECK_FALSE(IsQualifiedName("rdma.kube-rdma.io/1st"));

  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  auto one = sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts)->front();
  std::vector<sysfs::Hca> many;
  for (int i = 0; i < 130; ++i) {
    sysfs::Hca h = one;
    h.name = "mlx5_" + std::to_string(i);
    h.fw_version = i == 7 ? std::string(65, '9') : one.fw_version;
    many.push_back(h);
  }
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(many);
  auto p = ResourceSlices(r, {.node = "big-node"});
  REQUIRE(p);
  REQUIRE(p->objects.size() == 2);
  CHECK(p->objects[0]["spec"]["devices"].size() == kMaxDevicesPerSlice);
  CHECK(p->objects[1]["spec"]["devices"].size() == 2);
  CHECK(p->objects[1]["spec"]["pool"]["resourceSliceCount"] == 2);
  CHECK(p->objects[0]["metadata"]["name"] != p->objects[1]["metadata"]["name"]);
  REQUIRE(p->dropped.size() == 1);
  CHECK(p->dropped[0] == "mlx5-7: rdma.kube-rdma.io/firmware (65 characters, the API takes 64)");

  CHECK_FALSE(ResourceSlices(r, {.node = "Not_A_Node"}));
}

}  // namespace
}  // namespace kuberdma::dra
