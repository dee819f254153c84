// SPDX-License-Identifier: Apache-2.0
// The node demo's DRA path (`make demo DRA=1`, demo.h): the stand-in API server the driver
// publishes to, NVIDIA's GPU slice as its DRA driver would publish it from the fixture, the
// stand-in allocator giving each pod a claim from the chart's GPU+NIC pairs template, the
// kubelet's side (plugin registration, NodePrepareResources, the CDI spec applied), and Multus'
// DRA path (a NAD's resourceName matched against the devices' k8s.cni.cncf.io/resourceName, their
// k8s.cni.cncf.io/deviceID as the CNI's deviceID).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "demo.h"
#include "draplugin.grpc.pb.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/dra/allocator.h"
#include "kuberdma/dra/prepare.h"
#include "kuberdma/dra/slices.h"
#include "kuberdma/sysfs/topology.h"
#include "pluginregistration.grpc.pb.h"

namespace kuberdma::demo {

namespace {

using nlohmann::json;
namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
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
       {"spec", {{"selectors", {{{"cel", {{"expression", "device.driver == \"gpu.nvidia.com\""}}}}}}}}});
  if (classes_.size() < 2 || template_.is_null()) {
    fail("the rendering has no DeviceClass or ResourceClaimTemplate (render with dra.enabled)");
    return false;
  }
  for (const auto& c : classes_) api_.Put("/apis/resource.k8s.io/v1/deviceclasses/" + c["metadata"]["name"].get<std::string>(), c);
  pairs_ = template_["spec"]["spec"]["devices"]["requests"].size() / 2;
  std::printf("  DeviceClasses %s, gpu.nvidia.com (NVIDIA's, played here); ResourceClaimTemplate "
              "%s: %zu GPU+NIC pairs, matchAttribute resource.kubernetes.io/pcieRoot\n",
              classes_.front()["metadata"]["name"].get<std::string>().c_str(),
              template_["metadata"]["name"].get<std::string>().c_str(), pairs_);
  return true;
}

// The kubelet's plugin watcher: the driver's registration socket, GetInfo, then the status.
bool DraDemo::Register(Failures& fail) {
  std::string reg = dir_ + "/plugins_registry/" + std::string(dra::kDriverName) + "-reg.sock";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (::access(reg.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto stub = pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix:" + reg, grpc::InsecureChannelCredentials()));
  pluginregistration::PluginInfo info;
  grpc::ClientContext c1;
  c1.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!stub->GetInfo(&c1, {}, &info).ok() || info.type() != "DRAPlugin") {
    fail("the DRA driver did not register at " + reg);
    return false;
  }
  pluginregistration::RegistrationStatus st;
  st.set_plugin_registered(true);
  pluginregistration::RegistrationStatusResponse none;
  grpc::ClientContext c2;
  (void)stub->NotifyRegistrationStatus(&c2, st, &none);
  endpoint_ = info.endpoint();
  std::printf("  kubelet stand-in: plugin %s (%s) registered, endpoint %s\n", info.name().c_str(),
              info.supported_versions(0).c_str(), endpoint_.c_str());
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
                  a.value("rdma.kube-rdma.io/netdev", json{{"string", "-"}})["string"].get<std::string>().c_str(),
                  a["resource.kubernetes.io/pcieRoot"]["string"].get<std::string>().c_str());
    }
  }
  auto gpus = sysfs::DiscoverGpus(sysfs::SysfsRoot(fixture_));
  gpus_ = gpus ? *gpus : std::vector<sysfs::Gpu>{};
  json gpu_slice = dra::StandInGpuSlice(node_, gpus_);
  api_.Put(kSlices + gpu_slice["metadata"]["name"].get<std::string>(), gpu_slice);
  slices_.push_back(gpu_slice);
  std::printf("  ResourceSlice %s: %zu GPUs of the fixture, as NVIDIA's DRA driver publishes them\n",
              gpu_slice["metadata"]["name"].get<std::string>().c_str(), gpus_.size());
  return true;
}

Result<DraDemo::PodClaim> DraDemo::ClaimFor(const std::string& ns, const std::string& pod,
                                             const std::string& resource) {
  std::string name = pod + "-" + template_["metadata"]["name"].get<std::string>();
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec", template_["spec"]["spec"]}};
  KUBERDMA_ASSIGN_OR_RETURN(json alloc, dra::Allocate(claim, slices_, classes_, in_use_));
  auto taken = dra::AllocatedKeys(alloc);
  in_use_.insert(taken.begin(), taken.end());
  api_.Put(ClaimPath(ns, name), claim);
  json stored = *api_.Object(ClaimPath(ns, name));
  stored["status"] = {{"allocation", alloc},
                      {"reservedFor", {{{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod}}}}};
  api_.Put(ClaimPath(ns, name), stored);
  std::string uid = stored["metadata"]["uid"];

  auto stub = drapb::DRAPlugin::NewStub(
      grpc::CreateChannel("unix:" + endpoint_, grpc::InsecureChannelCredentials()));
  drapb::NodePrepareResourcesRequest req;
  auto* c = req.add_claims();
  c->set_namespace_(ns);
  c->set_uid(uid);
  c->set_name(name);
  drapb::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (auto st = stub->NodePrepareResources(&ctx, req, &resp); !st.ok()) {
    return Fail(ErrorCode::kIo, "NodePrepareResources: " + st.error_message());
  }
  const auto& r = resp.claims().at(uid);
  if (!r.error().empty()) return Fail(ErrorCode::kInvalidArgument, r.error());
  prepared_.push_back({ns, uid, name});

  PodClaim out{.claim = ns + "/" + name};
  // The runtime applies the CDI spec the kubelet was given: its environment and device nodes.
  std::string cdi = r.devices(0).cdi_device_ids(0);
  KUBERDMA_ASSIGN_OR_RETURN(std::string text,
                            ReadFile(dir_ + "/cdi/kube-rdma-claim-" + uid + ".json"));
  KUBERDMA_ASSIGN_OR_RETURN(json spec, ParseUntrustedJson(text, "CDI spec"));
  for (const auto& e : spec["devices"][0]["containerEdits"]["env"]) {
    std::string kv = e;
    out.env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  }
  out.device_nodes = spec["devices"][0]["containerEdits"]["deviceNodes"].size();
  // Multus' DRA path: our devices whose resourceName is the NAD's, their deviceID, in order.
  std::printf("  %s: claim %s, CDI device %s (%zu device nodes)\n", pod.c_str(), name.c_str(),
              cdi.c_str(), out.device_nodes);
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
    if (Attribute(slices_, driver, dev, "k8s.cni.cncf.io/resourceName") != resource) continue;
    out.device_ids.push_back(Attribute(slices_, driver, dev, "k8s.cni.cncf.io/deviceID"));
    std::printf("    pair %s: %s + %s on %s (deviceID %s)\n", pair.c_str(), gpu_of[pair].c_str(),
                Attribute(slices_, driver, dev, "rdma.kube-rdma.io/rdmaDevice").c_str(),
                Attribute(slices_, driver, dev, "resource.kubernetes.io/pcieRoot").c_str(),
                out.device_ids.back().c_str());
  }
  return out;
}

bool DraDemo::ShowMisaligned(Failures& fail) {
  // GPU 0 and the last HCA: under different PCIe roots on this node.
  std::string far;
  for (const auto& s : slices_) {
    if (s["spec"]["driver"] != dra::kDriverName) continue;
    far = s["spec"]["devices"].back()["attributes"]["rdma.kube-rdma.io/rdmaDevice"]["string"];
  }
  json claim = {{"metadata", {{"name", "misaligned"}, {"namespace", "default"}}},
                {"spec",
                 {{"devices",
                   {{"requests",
                     {{{"name", "gpu-0"},
                       {"exactly",
                        {{"deviceClassName", "gpu.nvidia.com"},
                         {"selectors",
                          {{{"cel", {{"expression", "device.attributes[\"gpu.nvidia.com\"].index == 0"}}}}}}}}},
                      {{"name", "nic-0"},
                       {"exactly",
                        {{"deviceClassName", classes_.front()["metadata"]["name"]},
                         {"selectors",
                          {{{"cel",
                             {{"expression", "device.attributes[\"rdma.kube-rdma.io\"].rdmaDevice == \"" + far + "\""}}}}}}}}}}},
                    {"constraints",
                     {{{"requests", {"gpu-0", "nic-0"}},
                       {"matchAttribute", "resource.kubernetes.io/pcieRoot"}}}}}}}}};
  auto refused = dra::Allocate(claim, slices_, classes_, {});
  std::printf("  a claim pairing gpu-0 with %s (another PCIe root), matchAttribute pcieRoot:\n    %s\n",
              far.c_str(), refused ? "ALLOCATED (wrong)" : refused.error().message().c_str());
  if (refused) fail("a misaligned claim was allocated");
  return !refused;
}

void DraDemo::UnprepareAll(Failures& fail) {
  auto stub = drapb::DRAPlugin::NewStub(
      grpc::CreateChannel("unix:" + endpoint_, grpc::InsecureChannelCredentials()));
  drapb::NodeUnprepareResourcesRequest req;
  for (const auto& [ns, uid, name] : prepared_) {
    auto* c = req.add_claims();
    c->set_namespace_(ns);
    c->set_uid(uid);
    c->set_name(name);
  }
  drapb::NodeUnprepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  bool ok = stub->NodeUnprepareResources(&ctx, req, &resp).ok();
  for (const auto& [uid, r] : resp.claims()) ok = ok && r.error().empty();
  std::printf("  NodeUnprepareResources: %zu claim(s) %s\n", prepared_.size(),
              ok ? "unprepared, CDI specs removed" : "FAILED");
  if (!ok) fail("NodeUnprepareResources failed");
}

}  // namespace kuberdma::demo
