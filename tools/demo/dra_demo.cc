// SPDX-License-Identifier: Apache-2.0
// The node demo's DRA path (`make demo DRA=1`, demo.h): the stand-in API server the driver
// publishes to, NVIDIA's GPU slice as its DRA driver would publish it from the fixture, the
// stand-in allocator giving each pod a claim from the chart's GPU+NIC pairs template, the
// kubelet's side (plugin registration, NodePrepareResources, the CDI spec applied), and Multus'
// DRA path (a NAD's resourceName matched against the devices' k8s.cni.cncf.io/resourceName, their
// k8s.cni.cncf.io/deviceID as the CNI's deviceID).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "demo.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/dra/prepare.h"
#include "kuberdma/dra/slices.h"
#include "kuberdma/standins/allocator.h"
#include "kuberdma/standins/kubelet_dra.h"
#include "kuberdma/standins/multus.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::demo {

namespace {

using nlohmann::json;
constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices/";

std::string ClaimPath(const std::string& ns, const std::string& name) {
  return "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name;
}

// The attribute's string value of `device` (`driver`/`name`) in `slices`.
std::string Attribute(const std::vector<json>& slices, const std::string& driver,
                      const std::string& device, const std::string& attribute) {
  for (const auto& s : slices) {
    if (s["spec"].value("driver", "") != driver) continue;
    for (const auto& d : s["spec"].value("devices", json::array())) {
      if (d.value("name", "") != device) continue;
      const json& a = d.value("attributes", json::object());
      if (a.contains(attribute) && a[attribute].contains("string")) return a[attribute]["string"];
    }
  }
  return "";
}

}  // namespace

DraDemo::DraDemo(std::string dir, std::string fixture, std::string node)
    : dir_(std::move(dir)), fixture_(std::move(fixture)), node_(std::move(node)) {}

DraDemo::~DraDemo() = default;

std::vector<std::string> DraDemo::PluginArgs() const {
  return {"--dra",
          "--node-name=" + node_,
          "--api-server=" + api_.base(),
          "--kubelet-plugins-dir=" + dir_ + "/plugins",
          "--kubelet-registry-dir=" + dir_ + "/plugins_registry",
          "--cdi-dir=" + dir_ + "/cdi"};
}

bool DraDemo::Load(const std::vector<json>& objects, Failures& fail) {
  for (const auto& o : objects) {
    std::string kind = o.value("kind", "");
    if (kind == "DeviceClass") classes_.push_back(o);
    if (kind == "ResourceClaimTemplate") template_ = o;
  }
  // NVIDIA's chart installs its class; the stand-in plays it.
  classes_.push_back(
      {{"metadata", {{"name", "gpu.nvidia.com"}}},
       {"spec",
        {{"selectors", {{{"cel", {{"expression", R"(device.driver == "gpu.nvidia.com")"}}}}}}}}});
  if (classes_.size() < 2 || template_.is_null()) {
    fail("the rendering has no DeviceClass or ResourceClaimTemplate (render with dra.enabled)");
    return false;
  }
  for (const auto& c : classes_)
    api_.Put("/apis/resource.k8s.io/v1/deviceclasses/" + c["metadata"]["name"].get<std::string>(),
             c);
  pairs_ = template_["spec"]["spec"]["devices"]["requests"].size() / 2;
  std::printf(
      "  DeviceClasses %s, gpu.nvidia.com (NVIDIA's, played here); ResourceClaimTemplate "
      "%s: %zu GPU+NIC pairs, matchAttribute resource.kubernetes.io/pcieRoot\n",
      classes_.front()["metadata"]["name"].get<std::string>().c_str(),
      template_["metadata"]["name"].get<std::string>().c_str(), pairs_);
  return true;
}

// The kubelet's plugin watcher: the driver's registration socket, GetInfo, then the status.
bool DraDemo::Register(Failures& fail) {
  auto k = standins::KubeletDraStandIn::Register(dir_ + "/plugins_registry", dra::kDriverName,
                                                 std::chrono::seconds(10));
  if (!k) {
    fail("the DRA driver did not register: " + k.error().message());
    return false;
  }
  kubelet_ = std::make_unique<standins::KubeletDraStandIn>(std::move(*k));
  std::printf("  kubelet stand-in: plugin %s (%s) registered, endpoint %s\n", dra::kDriverName,
              kubelet_->version().c_str(), kubelet_->endpoint().c_str());
  return true;
}

bool DraDemo::WaitForSlices(Failures& fail) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    slices_ = api_.Objects(kSlices);
    if (!slices_.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (slices_.empty()) {
    fail("the DRA driver wrote no ResourceSlice to the stand-in API server");
    return false;
  }
  for (const auto& s : slices_) {
    std::printf("  ResourceSlice %s: pool %s, %zu devices\n",
                s["metadata"]["name"].get<std::string>().c_str(),
                s["spec"]["pool"]["name"].get<std::string>().c_str(), s["spec"]["devices"].size());
    for (const auto& d : s["spec"]["devices"]) {
      const json& a = d["attributes"];
      std::printf("    %-8s %-7s netdev %-10s pcieRoot %s\n", d["name"].get<std::string>().c_str(),
                  a["rdma.kube-rdma.io/rdmaDevice"]["string"].get<std::string>().c_str(),
                  a.value("rdma.kube-rdma.io/netdev", json{{"string", "-"}})["string"]
                      .get<std::string>()
                      .c_str(),
                  a["resource.kubernetes.io/pcieRoot"]["string"].get<std::string>().c_str());
    }
  }
  auto gpus = sysfs::DiscoverGpus(sysfs::SysfsRoot(fixture_));
  gpus_ = gpus ? *gpus : std::vector<sysfs::Gpu>{};
  json gpu_slice = standins::StandInGpuSlice(node_, gpus_);
  api_.Put(kSlices + gpu_slice["metadata"]["name"].get<std::string>(), gpu_slice);
  slices_.push_back(gpu_slice);
  std::printf(
      "  ResourceSlice %s: %zu GPUs of the fixture, as NVIDIA's DRA driver publishes them\n",
      gpu_slice["metadata"]["name"].get<std::string>().c_str(), gpus_.size());
  return true;
}

// The claim from the template for `pod`, allocated by the stand-in scheduler and reserved for the
// pod on the stand-in API server, as kube-scheduler and the resourceclaim controller leave it.
Result<json> DraDemo::AllocateClaim(const std::string& ns, const std::string& pod) {
  std::string name = pod + "-" + template_["metadata"]["name"].get<std::string>();
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec", template_["spec"]["spec"]}};
  KUBERDMA_ASSIGN_OR_RETURN(json alloc, standins::Allocate(claim, slices_, classes_, in_use_));
  auto taken = standins::AllocatedKeys(alloc);
  in_use_.insert(taken.begin(), taken.end());
  api_.Put(ClaimPath(ns, name), claim);
  json stored = *api_.Object(ClaimPath(ns, name));
  stored["status"] = {
      {"allocation", alloc},
      {"reservedFor", {{{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod}}}}};
  api_.Put(ClaimPath(ns, name), stored);
  return stored;
}

// Each GPU+NIC pair of the allocation, and the claim's GPUs' PCI addresses into `out`.
void DraDemo::ShowPairs(const json& alloc, PodClaim& out) const {
  std::map<std::string, std::string> gpu_of;
  for (const auto& x : alloc["devices"]["results"]) {
    std::string driver = x["driver"];
    std::string dev = x["device"];
    std::string req_name = x["request"];
    std::string pair = req_name.substr(req_name.find('-') + 1);
    if (driver == "gpu.nvidia.com") {
      gpu_of[pair] = dev;
      std::string bus = Attribute(slices_, driver, dev, "resource.kubernetes.io/pciBusID");
      out.gpus += (out.gpus.empty() ? "" : ",") + bus;
      continue;
    }
    std::printf("    pair %s: %s + %s on %s (deviceID %s)\n", pair.c_str(), gpu_of[pair].c_str(),
                Attribute(slices_, driver, dev, "rdma.kube-rdma.io/rdmaDevice").c_str(),
                Attribute(slices_, driver, dev, "resource.kubernetes.io/pcieRoot").c_str(),
                Attribute(slices_, driver, dev, "k8s.cni.cncf.io/deviceID").c_str());
  }
}

Result<DraDemo::PodClaim> DraDemo::ClaimFor(const std::string& ns, const std::string& pod,
                                            const std::string& resource) {
  KUBERDMA_ASSIGN_OR_RETURN(json claim, AllocateClaim(ns, pod));
  dra::ClaimRef ref{.ns = ns, .uid = claim["metadata"]["uid"], .name = claim["metadata"]["name"]};
  KUBERDMA_ASSIGN_OR_RETURN(auto prepared, kubelet_->Prepare(ref));
  prepared_.push_back(ref);
  PodClaim out{.claim = ns + "/" + ref.name};
  // The runtime applies the CDI device the kubelet was given: its environment and device nodes.
  KUBERDMA_ASSIGN_OR_RETURN(auto edits, standins::ApplyCdi(dir_ + "/cdi", prepared.cdi_ids));
  out.env = edits.env;
  out.device_nodes = edits.device_nodes;
  // Multus' DRA path: the devices' resourceName and deviceID attributes (standins/multus.h).
  const json& alloc = claim["status"]["allocation"];
  out.device_ids = standins::DraAllocated({alloc}, slices_)[resource];
  std::printf("  %s: claim %s, %zu CDI devices (%s, ...; %zu device nodes)\n", pod.c_str(),
              ref.name.c_str(), prepared.cdi_ids.size(), prepared.cdi_ids.front().c_str(),
              out.device_nodes);
  ShowPairs(alloc, out);
  return out;
}

bool DraDemo::ShowMisaligned(Failures& fail) {
  // GPU 0 and the last HCA: under different PCIe roots on this node.
  std::string far;
  std::string gpu0;  // selected as NVIDIA's driver allows: by its published pcieBusID
  for (const auto& s : slices_) {
    if (s["spec"]["driver"] == "gpu.nvidia.com") {
      gpu0 = s["spec"]["devices"].front()["attributes"]["gpu.nvidia.com/pcieBusID"]["string"];
    }
    if (s["spec"]["driver"] != dra::kDriverName) continue;
    far = s["spec"]["devices"].back()["attributes"]["rdma.kube-rdma.io/rdmaDevice"]["string"];
  }
  json claim = {
      {"metadata", {{"name", "misaligned"}, {"namespace", "default"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu-0"},
             {"exactly",
              {{"deviceClassName", "gpu.nvidia.com"},
               {"selectors",
                {{{"cel",
                   {{"expression",
                     R"(device.attributes["gpu.nvidia.com"].pcieBusID == ")" + gpu0 + "\""}}}}}}}}},
            {{"name", "nic-0"},
             {"exactly",
              {{"deviceClassName", classes_.front()["metadata"]["name"]},
               {"selectors",
                {{{"cel",
                   {{"expression", R"(device.attributes["rdma.kube-rdma.io"].rdmaDevice == ")" +
                                       far + "\""}}}}}}}}}}},
          {"constraints",
           {{{"requests", {"gpu-0", "nic-0"}},
             {"matchAttribute", "resource.kubernetes.io/pcieRoot"}}}}}}}}};
  auto refused = standins::Allocate(claim, slices_, classes_, {});
  std::printf(
      "  a claim pairing gpu-0 with %s (another PCIe root), matchAttribute pcieRoot:\n    %s\n",
      far.c_str(), refused ? "ALLOCATED (wrong)" : refused.error().message().c_str());
  if (refused) fail("a misaligned claim was allocated");
  return !refused;
}

namespace {

// The port-1 state file of `hca` under the sysfs root `root` ("" when there is none).
std::string PortStateFile(const std::string& root, const std::string& hca) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::string p = it->path().string();
    if (p.ends_with("/infiniband/" + hca + "/ports/1/state")) return p;
  }
  return "";
}

// The taints of `device` on the driver's slices now ("" when none).
std::string TaintsOf(const std::vector<json>& slices, const std::string& device) {
  std::string out;
  for (const auto& s : slices) {
    if (s["spec"].value("driver", "") != dra::kDriverName) continue;
    for (const auto& d : s["spec"].value("devices", json::array())) {
      if (d.value("name", "") != device) continue;
      for (const auto& t : d.value("taints", json::array())) {
        out += (out.empty() ? "" : ", ") + t.value("key", "") + "=" + t.value("value", "") + ":" +
               t.value("effect", "");
      }
    }
  }
  return out;
}

}  // namespace

bool DraDemo::WaitForTaint(const std::string& device, bool tainted, Failures& fail) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    if (TaintsOf(api_.Objects(kSlices), device).empty() != tainted) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fail("the DRA driver did not " + std::string(tainted ? "taint " : "untaint ") + device +
       " on its ResourceSlice within 15 s");
  return false;
}

namespace {

// The first device of ours in `claim`'s allocation (null when none).
json FirstOfOurs(const json& claim) {
  const json results = claim.value("status", json::object())
                           .value("allocation", json::object())
                           .value("devices", json::object())
                           .value("results", json::array());
  for (const auto& r : results.is_array() ? results : json::array()) {
    if (r.is_object() && r.value("driver", "") == dra::kDriverName) return r;
  }
  return {};
}

}  // namespace

bool DraDemo::ShowNicDown(Failures& fail) {
  if (prepared_.empty()) return false;
  const dra::ClaimRef& ref = prepared_.front();
  json ours = FirstOfOurs(api_.Object(ClaimPath(ref.ns, ref.name)).value_or(json::object()));
  if (ours.is_null()) return false;
  down_device_ = ours["device"];
  down_pool_ = ours["pool"];
  down_hca_ = Attribute(slices_, dra::kDriverName, down_device_, "rdma.kube-rdma.io/rdmaDevice");
  down_state_ = PortStateFile(fixture_, down_hca_);
  if (down_state_.empty() || !WriteFileAtomic(down_state_, "1: DOWN\n")) {
    fail("cannot take " + down_hca_ + "'s port down in the fixture copy " + fixture_);
    return false;
  }
  std::printf("  %s (device %s of claim %s, request %s): port 1 now DOWN\n", down_hca_.c_str(),
              down_device_.c_str(), ref.name.c_str(), ours["request"].get<std::string>().c_str());
  if (!WaitForTaint(down_device_, true, fail)) return false;
  std::printf("  ResourceSlice: %s tainted %s\n", down_device_.c_str(),
              TaintsOf(api_.Objects(kSlices), down_device_).c_str());
  const std::string key = down_pool_ + "/" + down_device_;
  auto health = kubelet_->WatchHealth(
      [&](const auto& h) { return h.contains(key) && h.at(key) == "Unhealthy"; },
      std::chrono::seconds(15));
  if (!health) {
    fail("the kubelet's health stream never said " + down_device_ + " is Unhealthy");
    return false;
  }
  std::printf(
      "  pod status, allocatedResourcesStatus (the kubelet from NodeWatchResources):\n"
      "    claim:%s/%s: %s/%s: Unhealthy\n",
      ref.name.c_str(), ours["request"].get<std::string>().c_str(), dra::kDriverName, key.c_str());
  return ShowAllocatedAround(ref.ns, fail);
}

bool DraDemo::ShowAllocatedAround(const std::string& ns, Failures& fail) {
  // A new pod's claim from the same template, as if the node were free: around the tainted NIC.
  json next = {{"metadata", {{"name", "next-pod"}, {"namespace", ns}}},
               {"spec", template_["spec"]["spec"]}};
  auto alloc = standins::Allocate(next, api_.Objects(kSlices), classes_, {});
  bool around = alloc && !standins::AllocatedKeys(*alloc).contains(
                             standins::DeviceKey(dra::kDriverName, down_pool_, down_device_));
  std::string what = !alloc   ? alloc.error().message()
                     : around ? "allocated around " + down_device_
                              : "GOT THE TAINTED NIC";
  std::printf("  a new pod's claim (%zu pairs, the node as if free): %s\n", pairs_, what.c_str());
  if (!around) fail("a new claim was not allocated around the tainted " + down_device_);
  return around;
}

bool DraDemo::ShowNicUp(Failures& fail) {
  if (down_state_.empty()) return false;
  if (!WriteFileAtomic(down_state_, "4: ACTIVE\n")) return false;
  if (!WaitForTaint(down_device_, false, fail)) return false;
  const std::string key = down_pool_ + "/" + down_device_;
  auto health = kubelet_->WatchHealth(
      [&](const auto& h) { return h.contains(key) && h.at(key) == "Healthy"; },
      std::chrono::seconds(15));
  std::printf("  %s port 1 ACTIVE again: taint removed, health %s\n", down_hca_.c_str(),
              health ? "Healthy" : health.error().message().c_str());
  if (!health) fail("the health stream never said " + down_device_ + " is Healthy again");
  return health.has_value();
}

void DraDemo::UnprepareAll(Failures& fail) {
  auto done = kubelet_->Unprepare(prepared_);
  std::printf("  NodeUnprepareResources: %zu claim(s) %s\n", prepared_.size(),
              done ? "unprepared, CDI specs removed" : done.error().message().c_str());
  if (!done) fail("NodeUnprepareResources failed");
}

}  // namespace kuberdma::demo
