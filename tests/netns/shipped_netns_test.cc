// SPDX-License-Identifier: Apache-2.0
// The shipped objects, run as Multus runs them. deploy/render.sh renders the chart with its
// default values and with each ci/ file, and deploy/manifests; from each rendering the device
// plugin's ConfigMap gives the resources, the kubelet's allocation of what each pod template asks
// for gives the device IDs, the rendered NADs and the pod's networks annotation give the
// attachments, and the Multus stand-in (tools/sim) turns them into the CNI calls `rdma` gets,
// CNI_ARGS and all. Real namespaces, the real binary, Debian's host-local for the IPAM sections.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "kuberdma/base/files.h"
#include "kuberdma/cni/config.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/contract/slot_id.h"
#include "kuberdma/deviceplugin/config.h"
#include "kuberdma/deviceplugin/resource.h"
#include "kuberdma/dra/slices.h"
#include "kuberdma/rails/node_config.h"
#include "kuberdma/sim/host_local.h"
#include "kuberdma/sim/manifests.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/allocator.h"
#include "kuberdma/standins/kubelet.h"
#include "kuberdma/standins/multus.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/topology.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using standins::MultusAdds;
using standins::MultusDels;
using standins::MultusPod;
using standins::ParseNetworksAnnotation;

// Every rendering deploy/render.sh wrote (the CTest fixture runs it first).
std::vector<std::string> Renderings() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(KUBERDMA_RENDERED, ec)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  INFO("renderings in " KUBERDMA_RENDERED " (deploy/render.sh, run by CTest first)");
  REQUIRE(out.size() >= 6);
  return out;
}

struct Shipped {
  explicit Shipped(const std::string& path) {
    auto r = LoadRendered(path);
    REQUIRE(r);
    rendered = *r;
    auto cm = rendered.ConfigMapData("device-plugin.json");
    REQUIRE(cm);
    auto cfg = deviceplugin::ParseConfig(*cm);
    REQUIRE(cfg);
    resources = cfg->resources;
    nads = rendered.Nads();
    REQUIRE_FALSE(nads.empty());
  }
  // The HCA on physical rail `rail` of a roce8 node given this rendering's node config.
  std::string HcaOnRail(int rail) const {
    auto nc = rendered.ConfigMapData("node.json");
    auto config =
        nc ? rails::ParseNodeConfig(*nc, "") : Result<rails::NodeConfig>(rails::NodeConfig{});
    if (config && config->Declared()) {
      auto h = sysfs::HcaForNetdev(sysfs::SysfsRoot(kRoce8),
                                   config->rails.at(static_cast<size_t>(rail - 1)),
                                   sysfs::HcaDetail::kIdentity);
      return h ? h->name : "";
    }
    return "mlx5_" + std::to_string(rail - 1);  // roce8: PCI order is name order
  }
  // What the DaemonSet writes on the node (the node config), and, for routed rails, the rail
  // addresses the fabric's provisioning gives each declared rail's netdev.
  void Provision(SimNode& node) const {
    auto nc = rendered.ConfigMapData("node.json");
    if (!nc) return;
    auto config = rails::ParseNodeConfig(*nc, "");
    REQUIRE(config);
    // No kubelet here to ask for the pod's allocation (the demos run one).
    rails::NodeConfig resolved = *config;
    resolved.allow_unallocated = true;
    REQUIRE(WriteFileAtomic(node.node_config_path(), rails::FormatNodeConfig(resolved)));
    bool routed = std::any_of(nads.begin(), nads.end(), [](const Nad& n) {
      return n.config.is_object() && n.config.value("addresses", "") == "node";
    });
    for (size_t r = 0; routed && r < config->rails.size(); ++r) {
      auto l = node.links().GetByName(node.node(), config->rails[r]);
      REQUIRE(l);
      REQUIRE(node.addrs().AddAddress(
          node.node(), l->ifindex,
          {.family = 4, .address = "10.10." + std::to_string(r + 1) + ".1", .prefix_len = 24}));
    }
  }
  Rendered rendered;
  std::vector<deviceplugin::ResourceConfig> resources;
  std::vector<Nad> nads;
};

// The kubelet's allocation of `n` slots of `resource`, as the plugin prefers them. Empty when
// the ConfigMap has no such resource.
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
  return {};
}

// A rendering with the DRA driver on (dra.trainer): the pod's claim from the rendered template,
// allocated by the stand-in scheduler from this node's slices (the shipped config's per-HCA
// resource on roce8) and NVIDIA's stand-in GPU slice, turned into the NADs' device IDs by Multus'
// DRA path. Empty when the rendering has no claim template.
// The device IDs a pod's DRA claim gives each resource, as the Multus of the rendering reads
// them: by the devices' attributes (no `claim_name`), or, for a pod that names its own claim
// (dra.multus podResources), by the claim's name from the kubelet's pod-resources.
std::map<std::string, std::vector<std::string>> DraAllocated(const Shipped& s,
                                                             const std::string& claim_name = "",
                                                             const std::string& claim_uid = "") {
  std::vector<nlohmann::json> classes = {
      {{"metadata", {{"name", "gpu.nvidia.com"}}},
       {"spec",
        {{"selectors", {{{"cel", {{"expression", R"(device.driver == "gpu.nvidia.com")"}}}}}}}}}};
  nlohmann::json tmpl;
  for (const auto& o : s.rendered.objects) {
    if (o.value("kind", "") == "DeviceClass") classes.push_back(o);
    if (o.value("kind", "") == "ResourceClaimTemplate") tmpl = o;
  }
  if (tmpl.is_null()) return {};
  sysfs::SysfsRoot root(kRoce8);
  std::vector<nlohmann::json> slices = {
      standins::StandInGpuSlice("roce8", *sysfs::DiscoverGpus(root))};
  for (const auto& rc : s.resources) {
    if (rc.policy != deviceplugin::Policy::kPerHca) continue;
    deviceplugin::Resource r(rc, root);
    r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
    auto published = dra::ResourceSlices(r, {.node = "roce8"});
    REQUIRE(published);
    slices.insert(slices.end(), published->objects.begin(), published->objects.end());
  }
  nlohmann::json claim = {{"metadata", {{"name", "c"}}}, {"spec", tmpl["spec"]["spec"]}};
  auto alloc = standins::Allocate(claim, slices, classes, {});
  REQUIRE(alloc);
  if (claim_name.empty()) return standins::DraAllocated({*alloc}, slices);  // Multus' main branch
  // Released Multus: the kubelet's pod-resources lists the claim under its name with each
  // device's CDI name, as our driver returns them (<claim uid>_<PCI address>), accumulated as the
  // kubelet's own loop lists them.
  std::vector<std::vector<std::string>> cdi;
  for (const auto& d : standins::DraAllocated({*alloc}, slices)) {
    for (const auto& pci : d.second) {
      cdi.push_back({std::string(contract::kClaimDeviceCdiKind) + "=" +
                     contract::FormatClaimDevice({.uid = claim_uid, .address = pci})});
    }
  }
  return standins::PodResourcesDraAllocated(
      {{claim_name, standins::ListedCdi(cdi, standins::CdiListing::kAccumulated)}});
}

// A pod to run from a rendering: each workload's first replica; with none (the default values
// ship no workload), the smallest pod that uses every NAD: each attached once.
std::vector<std::pair<std::string, MultusPod>> PodsOf(const Shipped& s) {
  std::vector<std::pair<std::string, MultusPod>> out;
  int n = 0;
  for (const auto& w : s.rendered.Workloads()) {
    if (w.networks.empty()) continue;
    auto networks = ParseNetworksAnnotation(w.networks);
    REQUIRE(networks);
    MultusPod pod{.ns = w.ns,
                  .name = w.kind == "Pod" ? w.name : w.name + "-0",
                  .uid = "u-" + std::to_string(n),
                  .sandbox = "c0ffee" + std::to_string(n++),
                  .networks = *networks};
    for (const auto& [res, count] : w.main.limits) {
      auto ids = Allocate(s, res, static_cast<size_t>(count));
      if (!ids.empty()) pod.allocated[res] = ids;
    }
    // Through its claim: a claim uid as the API server gives them.
    char uid[40];
    std::snprintf(uid, sizeof uid, "00000000-0000-4000-8000-%012d", n);
    for (auto& [res, ids] : DraAllocated(s, w.claim, w.claim.empty() ? "" : uid))
      pod.allocated[res] = ids;
    if (!w.claim.empty()) {
      // Released Multus: the pod's own claim, its devices as <claim uid>_<PCI address>.
      REQUIRE(pod.allocated.contains(w.claim));
      REQUIRE_FALSE(pod.allocated[w.claim].empty());
      CHECK(contract::ParseClaimDevice(pod.allocated[w.claim].front()));
    }
    out.emplace_back(w.Describe(), pod);
  }
  if (!out.empty()) return out;
  MultusPod pod{.name = "smallest-0", .uid = "u-s", .sandbox = "c0ffeeff"};
  for (const auto& nad : s.nads) {
    pod.networks.emplace_back(nad.name, "");
    if (!nad.resource.empty()) pod.allocated[nad.resource].push_back("");
  }
  for (auto& [res, ids] : pod.allocated) ids = Allocate(s, res, ids.size());
  out.emplace_back("a pod attaching each NAD once", pod);
  return out;
}

// What the device plugin records at Allocate (contract/allocation.h), and the allocation in the
// kubelet's own order: reversed, so that the i-th slot is not the i-th rail's HCA.
MultusPod AsKubeletLists(SimNode& node, MultusPod pod) {
  for (auto& [res, ids] : pod.allocated) {
    contract::AllocationGroup g{.resource = res};
    for (const auto& id : ids) {
      auto slot = contract::ParseSlot(id);
      if (!slot || slot->kind != contract::SlotKind::kPerHca) continue;
      g.slots.push_back(id);
      g.hcas.push_back(slot->base);
    }
    if (!g.slots.empty()) REQUIRE(contract::RecordAllocation(node.allocations_dir(), g));
    // DRA device IDs (PCI addresses, or released Multus' <claim uid>_<PCI address>): the claim
    // record the DRA driver writes at prepare.
    contract::ClaimRecord claim{.claim = pod.ns + "/" + pod.name + "-claim",
                                .uid = pod.uid,
                                .pods = {pod.ns + "/" + pod.name}};
    auto present = *sysfs::DiscoverHcas(sysfs::SysfsRoot(kRoce8), sysfs::HcaDetail::kIdentity);
    bool claim_devices = false;
    for (const auto& id : ids) {
      auto claimed = contract::ParseClaimDevice(id);
      if (claimed) claim.uid = claimed->uid;
      claim_devices = claim_devices || claimed;
      for (const auto& h : present) {
        if (h.pci_address == (claimed ? claimed->address : id) &&
            std::find(claim.hcas.begin(), claim.hcas.end(), h.name) == claim.hcas.end())
          claim.hcas.push_back(h.name);
      }
    }
    if (!claim.hcas.empty()) REQUIRE(contract::RecordClaim(node.allocations_dir(), claim));
    // Released Multus' claim device IDs are already in the kubelet's List order.
    if (!claim_devices) std::reverse(ids.begin(), ids.end());
  }
  return pod;
}

// Runs `pod`'s ADDs on `node`; checks the HCAs against the allocation. Returns the calls to DEL.
std::vector<CniCall> AddPod(const Shipped& s, SimNode& node, const MultusPod& allocated) {
  MultusPod pod = AsKubeletLists(node, allocated);
  std::string netns = node.AddPod(pod.name);
  // Node-local paths kept off this machine: the plugin's state and host-local's store.
  auto adds = MultusAdds(pod, WithHostLocalStore(s.nads, node.state_dir() + "/ipam"), netns,
                         {{"stateDir", node.state_dir()}});
  REQUIRE(adds);
  REQUIRE(adds->size() == pod.networks.size());
  // Multus's keys, then the runtime's copies of the same keys: the plugin takes both.
  CHECK_THAT(adds->front().args,
             Catch::StartsWith("IgnoreUnknown=true;K8S_POD_NAMESPACE=" + pod.ns) &&
                 Catch::Contains(";IgnoreUnknown=1;K8S_POD_NAMESPACE="));
  std::map<std::string, std::vector<std::string>> got;  // resource -> HCAs, in attachment order
  std::set<std::string> hcas;
  for (auto& call : *adds) {
    call.cni_path = KUBERDMA_CNI_PLUGINS_DIR;
    auto r = node.Run(kBin, call);
    INFO(pod.name << " " << call.ifname << ": " << call.config << "\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    json conf = json::parse(call.config);
    auto rec = cni::StateStore(node.state_dir()).Load(conf["name"], pod.sandbox, call.ifname);
    REQUIRE(rec);
    REQUIRE(*rec);
    CHECK(hcas.insert((*rec)->hca).second);  // never one HCA twice
    if (conf.contains("rail")) {
      // A rail's network has the HCA on its physical rail.
      CHECK((*rec)->hca == s.HcaOnRail(conf["rail"].get<int>()));
      continue;
    }
    for (const auto& nad : s.nads) {
      if (nad.name == conf["name"] && !nad.resource.empty())
        got[nad.resource].push_back((*rec)->hca);
    }
    CHECK(node.links().GetByName(node.Pod(netns), call.ifname));
    if (conf.contains("ipam")) CHECK_FALSE(json::parse(r.out)["ips"].empty());
  }
  // A per-HCA slot is its HCA, and so is a DRA device's deviceID (its PCI address): the i-th
  // attachment of a resource that is no rail has the i-th allocated HCA.
  auto present = *sysfs::DiscoverHcas(sysfs::SysfsRoot(kRoce8), sysfs::HcaDetail::kIdentity);
  for (const auto& [res, ids] : pod.allocated) {
    if (got[res].empty()) continue;
    std::vector<std::string> want;
    for (const auto& id : ids) {
      auto slot = contract::ParseSlot(id);
      auto claimed = contract::ParseClaimDevice(id);
      const std::string pci = claimed ? claimed->address : id;
      auto at = std::find_if(present.begin(), present.end(),
                             [&](const sysfs::Hca& h) { return h.pci_address == pci; });
      REQUIRE((slot || at != present.end()));
      if (claimed) {
        // The kubelet's List repeats a claim's devices (kubelet.h's ListedCdi): each once, in
        // order, is what the attachments get.
        if (std::find(want.begin(), want.end(), at->name) == want.end()) want.push_back(at->name);
      } else if (!slot) {
        want.push_back(at->name);
      } else if (slot->kind == contract::SlotKind::kPerHca) {
        want.push_back(slot->base);
      }
    }
    if (!want.empty())
      CHECK(got[res] == std::vector<std::string>(
                            want.begin(), want.begin() + static_cast<long>(got[res].size())));
  }
  return MultusDels(*adds);
}

// Whether the rendering's NADs make children (shared mode): then pods share HCAs.
bool SharesHcas(const Shipped& s) {
  return std::any_of(s.nads.begin(), s.nads.end(), [](const Nad& n) {
    return n.config.is_object() && n.config.value("mode", "move") != "move";
  });
}

// Runs `pods` on one fresh node: every pod's ADDs, then every DEL; nothing is left.
void RunPods(const Shipped& s, const std::vector<MultusPod>& pods) {
  SimNode node(kRoce8, Roce8Netdevs());
  s.Provision(node);
  std::vector<CniCall> dels;
  for (const auto& pod : pods) {
    auto d = AddPod(s, node, pod);
    dels.insert(dels.end(), d.begin(), d.end());
  }
  if (pods.size() > 1) {
    // Shared: every HCA the first pod has serves each pod, through one child each.
    std::map<std::string, size_t> per_hca;
    auto records = cni::StateStore(node.state_dir()).List();
    REQUIRE(records);
    for (const auto& r : *records) ++per_hca[r.hca];
    CHECK(per_hca.size() == pods.front().networks.size());
    for (const auto& [hca, n] : per_hca) CHECK(n == pods.size());
  }
  for (auto call : dels) {
    call.cni_path = KUBERDMA_CNI_PLUGINS_DIR;
    auto r = node.Run(kBin, call);
    INFO(call.ifname << ": " << r.out << r.err);
    CHECK(r.exit_code == 0);
  }
  for (const auto& n : Roce8Netdevs()) CHECK(node.links().GetByName(node.node(), n));
  CHECK(cni::StateStore(node.state_dir()).List()->empty());
  CHECK(HostLocalHeld(node.state_dir() + "/ipam") == 0);
}

void RunPod(const Shipped& s, const MultusPod& pod) { RunPods(s, {pod}); }

// A rendering whose NADs attach SR-IOV VFs (mode vf).
bool AttachesVfs(const Shipped& s) {
  return std::any_of(s.nads.begin(), s.nads.end(),
                     [](const Nad& n) { return n.config.value("mode", "") == "vf"; });
}

// An SR-IOV rendering on the node it is for: every NAD parses as mode vf, and the resource it
// names offers the VFs of an SR-IOV node (the sriov / sriov-ib fixtures) and nothing else, one
// slot each. Attaching needs a PF driver that sets VFs, which this tier's veths lack: the attach
// is proven on FakeWorld's PF table (tests/unit/cni/vf_test.cc) and igb's in the VM tier.
void CheckVfRendering(const Shipped& s) {
  bool ib = std::any_of(s.nads.begin(), s.nads.end(),
                        [](const Nad& n) { return n.name.find("ib") != std::string::npos; });
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + (ib ? "sriov-ib" : "sriov"));
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  for (const auto& nad : s.nads) {
    INFO(nad.ns << "/" << nad.name);
    auto conf = cni::ParseConfig(nad.config.dump(), cni::Command::kAdd);
    REQUIRE(conf);
    CHECK(conf->mode == cni::AttachMode::kVf);
    REQUIRE(conf->vf);
    CHECK(conf->vf->spoofchk);
    auto rc = std::find_if(s.resources.begin(), s.resources.end(),
                           [&](const auto& r) { return r.FullName() == nad.resource; });
    REQUIRE(rc != s.resources.end());
    deviceplugin::Resource r(*rc, root);
    r.Refresh(hcas);
    CHECK(r.slots() == 8);  // two PFs' four VFs each, one slot per VF
    for (const auto& h : hcas) CHECK(r.Selects(h, hcas) == !h.pf_address.empty());
  }
}

TEST_CASE("Every shipped rendering's pods get the HCAs the kubelet allocated, as Multus calls") {
  for (const auto& path : Renderings()) {
    Shipped s(path);
    if (AttachesVfs(s)) {
      INFO(path);
      CheckVfRendering(s);
      continue;
    }
    for (const auto& [what, pod] : PodsOf(s)) {
      INFO(path << ": " << what << " (" << s.rendered.Summary() << ")");
      if (!SharesHcas(s)) {
        RunPod(s, pod);
        continue;
      }
      // Shared mode: a second replica on the same node gets children of the same HCAs.
      MultusPod second = pod;
      second.name = pod.name.substr(0, pod.name.size() - 1) + "1";
      second.uid += "-1";
      second.sandbox += "1";
      RunPods(s, {pod, second});
    }
  }
}

TEST_CASE("Multus refuses more attachments than allocations, a NAD broken after ADD still DELs") {
  Shipped s(std::string(KUBERDMA_RENDERED) + "/manifests.yaml");
  const Nad& nad = s.nads.front();
  SimNode node(kRoce8, Roce8Netdevs());
  std::string netns = node.AddPod("short");
  // Two slots for three attachments: Multus cannot build the third call.
  MultusPod pod{.name = "short-0",
                .uid = "u-2",
                .sandbox = "c0ffee02",
                .networks = {{nad.name, ""}, {nad.name, ""}, {nad.name, ""}},
                .allocated = {{nad.resource, Allocate(s, nad.resource, 2)}}};
  CHECK_FALSE(MultusAdds(pod, {nad}, netns, {{"stateDir", node.state_dir()}}));
  // A NAD whose config breaks after the first ADD: the runtime's DEL re-sends it to every
  // attachment, and each DEL succeeds (the first restores its HCA from the record).
  pod.networks.pop_back();
  auto adds = MultusAdds(pod, {nad}, netns, {{"stateDir", node.state_dir()}});
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

}  // namespace
}  // namespace kuberdma::sim
