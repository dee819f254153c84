// SPDX-License-Identifier: Apache-2.0
// The DRA driver end to end against the stand-in API server: slices written, left alone when
// nothing changed, republished with a new generation when a port goes down, a stale slice
// deleted and other nodes' and drivers' slices untouched, a 503 retried; then a claim of GPU+NIC
// pairs allocated by the stand-in allocator from the published slices and NVIDIA's stand-in GPU
// slice, prepared by the kubelet over the driver's socket (the CDI spec, the alignment promise,
// the record the CNI's allocation check reads), and refused by name when misaligned.
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>

#include "draplugin.grpc.pb.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/dra/driver.h"
#include "kuberdma/standins/allocator.h"
#include "kuberdma/standins/api_server.h"
#include "kuberdma/sysfs/topology.h"
#include "per_hca.h"

namespace kuberdma::dra {
namespace {

using standins::Allocate;
using standins::AllocatedKeys;
using standins::ApiStandIn;
using standins::StandInGpuSlice;

namespace fs = std::filesystem;
namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
using nlohmann::json;

constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices/";

json Class(const std::string& name, const std::string& driver) {
  return {{"metadata", {{"name", name}}},
          {"spec",
           {{"selectors", {{{"cel", {{"expression", "device.driver == \"" + driver + "\""}}}}}}}}};
}

// A claim of `pairs` GPU+NIC pairs, each pair on one PCIe root; `extra` selectors per request.
json PairsClaim(int pairs, const std::map<std::string, std::string>& extra = {}) {
  json requests = json::array();
  json constraints = json::array();
  for (int i = 0; i < pairs; ++i) {
    for (const auto& [kind, cls] :
         {std::pair{"gpu", "gpu.nvidia.com"}, std::pair{"nic", "rdma.kube-rdma.io"}}) {
      std::string name = std::string(kind) + "-" + std::to_string(i);
      json ex = {{"deviceClassName", cls}, {"count", 1}};
      if (auto it = extra.find(name); it != extra.end()) {
        ex["selectors"] = {{{"cel", {{"expression", it->second}}}}};
      }
      requests.push_back({{"name", name}, {"exactly", ex}});
    }
    constraints.push_back({{"requests", {"gpu-" + std::to_string(i), "nic-" + std::to_string(i)}},
                           {"matchAttribute", "resource.kubernetes.io/pcieRoot"}});
  }
  return {{"metadata", {{"name", "pairs"}, {"namespace", "team-a"}, {"uid", "claim-1"}}},
          {"spec", {{"devices", {{"requests", requests}, {"constraints", constraints}}}}}};
}

TEST_CASE("The DRA driver keeps this node's ResourceSlices on the API server") {
  char tmpl[] = "/tmp/kuberdma-dradrv-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  r.Refresh(hcas);
  ApiStandIn api;
  ApiServer conn{.base = api.base(), .attempts = 3};
  PublishOptions o{.node = "gpu-node-7"};
  // Someone else's slices: another node's, another driver's on this node.
  api.Put(
      std::string(kSlices) + "other",
      {{"metadata", {{"name", "other"}}},
       {"spec", {{"driver", kDriverName}, {"nodeName", "gpu-node-8"}, {"pool", {{"name", "x"}}}}}});
  api.Put(
      std::string(kSlices) + "gpus",
      {{"metadata", {{"name", "gpus"}}},
       {"spec",
        {{"driver", "gpu.nvidia.com"}, {"nodeName", "gpu-node-7"}, {"pool", {{"name", "y"}}}}}});

  auto first = SyncSlices(conn, kDriverName, o.node, ResourceSlices(r, o)->objects);
  REQUIRE(first);
  CHECK(first->created == 1);
  const std::string name = ResourceSlices(r, o)->objects.front()["metadata"]["name"];
  CHECK_THAT(name, Catch::StartsWith("gpu-node-7-hca-0-"));
  auto slice = api.Object(std::string(kSlices) + name);
  REQUIRE(slice);
  CHECK((*slice)["spec"]["devices"].size() == 8);
  CHECK((*slice)["spec"]["pool"]["generation"] == 1);
  CHECK_THAT(api.requests().front(),
             Catch::Contains(
                 "fieldSelector=spec.driver%3Drdma.kube-rdma.io%2Cspec.nodeName%3Dgpu-node-7"));

  SECTION("nothing changed: nothing written") {
    auto again = SyncSlices(conn, kDriverName, o.node, ResourceSlices(r, o)->objects);
    REQUIRE(again);
    CHECK(again->unchanged == 1);
    CHECK(again->created + again->updated + again->deleted == 0);
    CHECK(api.requests().size() == 3);  // list, create, list
  }
  SECTION("a port down: republished tainted, a new generation; a stale slice deleted") {
    api.Put(std::string(kSlices) + "gpu-node-7-old-0",
            {{"metadata", {{"name", "gpu-node-7-old-0"}}},
             {"spec",
              {{"driver", kDriverName},
               {"nodeName", "gpu-node-7"},
               {"pool", {{"name", "gpu-node-7/old"}, {"generation", 4}}}}}});
    auto down = hcas;
    down[3].ports[0].state = 1;  // DOWN
    down[3].ports[0].state_name = "DOWN";
    r.Refresh(down);
    api.fail_next = 1;  // an API server restarting: retried
    auto second = SyncSlices(conn, kDriverName, o.node, ResourceSlices(r, o)->objects);
    REQUIRE(second);
    CHECK(second->updated == 1);
    CHECK(second->deleted == 1);
    slice = api.Object(std::string(kSlices) + name);
    REQUIRE((*slice)["spec"]["devices"].size() == 8);
    const json& tainted = (*slice)["spec"]["devices"][3];
    CHECK(tainted["name"] == "mlx5-3");
    CHECK(tainted["taints"] == json::parse(R"([{"key": "rdma.kube-rdma.io/link-down",
        "value": "port-1-DOWN", "effect": "NoSchedule"}])"));
    CHECK((*slice)["spec"]["pool"]["generation"] == 2);
    CHECK_FALSE(api.Object(std::string(kSlices) + "gpu-node-7-old-0"));
    CHECK(api.Object(std::string(kSlices) + "other"));
    CHECK(api.Object(std::string(kSlices) + "gpus"));
  }
  SECTION("a slice of unexpected shape in the answer is passed over, not a crash") {
    api.Put(std::string(kSlices) + "odd",
            {{"metadata", {{"name", "odd"}}},
             {"spec", {{"driver", kDriverName}, {"nodeName", "gpu-node-7"}, {"pool", "x"}}}});
    auto again = SyncSlices(conn, kDriverName, o.node, ResourceSlices(r, o)->objects);
    REQUIRE(again);
    CHECK(again->unchanged == 1);
    CHECK(again->deleted == 0);
    CHECK(api.Object(std::string(kSlices) + "odd"));
  }
  SECTION("uninstalling: every slice of the driver goes, on every node, no other driver's") {
    auto gone = SyncSlices(conn, kDriverName, "", {});
    REQUIRE(gone);
    CHECK(gone->deleted == 2);
    CHECK(api.Objects(kSlices).size() == 1);
    CHECK(api.Object(std::string(kSlices) + "gpus"));
  }
  SECTION("an API server that is down is named, nothing half-written") {
    api.fail_next = 10;
    auto down = SyncSlices(ApiServer{.base = api.base(), .attempts = 2}, kDriverName, o.node, {});
    REQUIRE_FALSE(down);
    CHECK_THAT(down.error().message(),
               Catch::Contains("GET /apis/resource.k8s.io/v1/resourceslices"));
    CHECK_THAT(down.error().message(), Catch::Contains("HTTP 503 after 2 attempt(s)"));
    CHECK(api.Objects(kSlices).size() == 3);
  }
  fs::remove_all(dir);
}

TEST_CASE("GPU+NIC pairs: allocated on one PCIe root, prepared over the driver's socket") {
  char tmpl[] = "/tmp/kuberdma-dradrv-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  auto shared = std::make_shared<deviceplugin::SharedResource>(
      deviceplugin::Resource(testing::PerHcaResource(), root), dir + "/allocations");
  ApiStandIn api;
  {
    Driver driver({.publish = {.node = "gpu-node-7"},
                   .cdi_dir = dir + "/cdi",
                   .plugins_dir = dir + "/plugins",
                   .registry_dir = dir + "/registry"},
                  ApiServer{.base = api.base(), .timeout_s = 1, .attempts = 2});
    shared->resource.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
    driver.OnRescan({{"rdma/hca", shared}}, nullptr);
    REQUIRE(driver.WaitFor([](const Driver::Status& s) { return s.syncs > 0; },
                           std::chrono::milliseconds(5000)));
    CHECK(driver.status().serving);
    CHECK(fs::exists(dir + "/registry/rdma.kube-rdma.io-reg.sock"));

    std::vector<json> slices = api.Objects(kSlices);
    slices.push_back(StandInGpuSlice("gpu-node-7", *sysfs::DiscoverGpus(root)));
    std::vector<json> classes = {Class("rdma.kube-rdma.io", kDriverName),
                                 Class("gpu.nvidia.com", "gpu.nvidia.com")};
    json claim = PairsClaim(4);
    auto alloc = Allocate(claim, slices, classes, {});
    REQUIRE(alloc);
    // Every pair shares a root: the GPU's and the HCA's pcieRoot are equal.
    std::map<std::string, std::string> root_of;
    for (const auto& s : slices) {
      for (const auto& d : s["spec"]["devices"]) {
        root_of[s["spec"]["driver"].get<std::string>() + "/" + d["name"].get<std::string>()] =
            d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"];
      }
    }
    std::map<std::string, std::string> by_request;
    for (const auto& x : (*alloc)["devices"]["results"]) {
      by_request[x["request"]] =
          root_of[x["driver"].get<std::string>() + "/" + x["device"].get<std::string>()];
    }
    for (int i = 0; i < 4; ++i) {
      CHECK(by_request["gpu-" + std::to_string(i)] == by_request["nic-" + std::to_string(i)]);
    }
    claim["status"]["allocation"] = *alloc;
    claim["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "trainer-0"}, {"uid", "p0"}}};
    api.Put("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/pairs", claim);

    auto stub = drapb::DRAPlugin::NewStub(grpc::CreateChannel(
        "unix:" + dir + "/plugins/rdma.kube-rdma.io/dra.sock", grpc::InsecureChannelCredentials()));
    drapb::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("team-a");
    c->set_uid("claim-1");
    c->set_name("pairs");
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    REQUIRE(stub->NodePrepareResources(&ctx, req, &resp).ok());
    REQUIRE(resp.claims().at("claim-1").error().empty());
    CHECK(resp.claims().at("claim-1").devices_size() == 4);
    std::ifstream in(dir + "/cdi/kube-rdma-claim-claim-1.json");
    json spec = json::parse(in);
    // The claim's environment is the spec's own edit; each of the 4 HCAs its own CDI device.
    CHECK(spec["devices"].size() == 4);
    std::string env = spec["containerEdits"]["env"].dump();
    CHECK_THAT(env, Catch::Contains("KUBERDMA_CLAIM=team-a/pairs"));
    CHECK_THAT(env, Catch::Contains("KUBERDMA_CLAIM_PCIE_ROOTS=mlx5_"));
    auto recs = contract::ClaimsOfPod(dir + "/allocations", "team-a", "trainer-0");
    REQUIRE(recs.size() == 1);
    CHECK(recs[0].hcas.size() == 4);
    CHECK(contract::ClaimsOfPod(dir + "/allocations", "team-a", "trainer-1").empty());

    SECTION("a misaligned claim cannot be satisfied: no wrong pair is taken") {
      // GPU 0 is on the first switch; the NIC asked for sits on the last.
      json bad = PairsClaim(
          1, {{"gpu-0", "device.attributes[\"gpu.nvidia.com\"].pcieBusID == \"" +
                            (*sysfs::DiscoverGpus(root))[0].address + "\""},
              {"nic-0", "device.attributes[\"rdma.kube-rdma.io\"].rdmaDevice == \"mlx5_7\""}});
      auto refused = Allocate(bad, slices, classes, {});
      REQUIRE_FALSE(refused);
      CHECK(refused.error().code() == ErrorCode::kNotFound);
      CHECK_THAT(refused.error().message(),
                 Catch::Contains("with the same resource.kubernetes.io/pcieRoot"));
      // Without the constraint the same requests are satisfiable: the constraint refused it.
      bad["spec"]["devices"].erase("constraints");
      CHECK(Allocate(bad, slices, classes, {}));
    }
    SECTION("a rail's switch the LLDP watch withdraws leaves the slice's leaf attribute") {
      auto leaf_of_mlx5_0 = [&] {
        for (const auto& sl : api.Objects(kSlices)) {
          for (const auto& d : sl["spec"].value("devices", json::array())) {
            if (d["name"] == "mlx5-0") return d["attributes"]["rdma.kube-rdma.io/leaf"].dump();
          }
        }
        return std::string("no device");
      };
      auto republish = [&] {
        int before = driver.status().syncs;
        driver.OnRescan({{"rdma/hca", shared}}, nullptr);
        return driver.WaitFor([&](const Driver::Status& s) { return s.syncs > before; },
                              std::chrono::milliseconds(5000));
      };
      REQUIRE(contract::RecordCabling(
          dir + "/allocations",
          {{.hca = "mlx5_0", .rail = 1, .switch_name = "leaf-1", .port = "swp7"}}));
      REQUIRE(republish());
      CHECK(leaf_of_mlx5_0() == R"({"string":"leaf-1"})");
      REQUIRE(contract::RecordCabling(dir + "/allocations", {}));  // withdrawn (cabling_watch.h)
      REQUIRE(republish());
      CHECK(leaf_of_mlx5_0() == R"({"string":""})");
    }
    SECTION("a port going down is republished at once, tainted, in the next generation") {
      auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
      hcas[7].ports[0].state = 1;  // DOWN
      hcas[7].ports[0].state_name = "DOWN";
      {
        std::lock_guard lock(shared->mu);
        shared->resource.Refresh(hcas);
      }
      int before = driver.status().syncs;
      driver.OnRescan({{"rdma/hca", shared}}, nullptr);
      REQUIRE(driver.WaitFor([&](const Driver::Status& s) { return s.syncs > before; },
                             std::chrono::milliseconds(5000)));
      auto now = api.Objects(kSlices);
      auto ours = std::ranges::find_if(
          now, [](const json& x) { return x["spec"]["driver"] == kDriverName; });
      REQUIRE(ours != now.end());
      CHECK((*ours)["spec"]["devices"].size() == 8);
      CHECK((*ours)["spec"]["devices"][7]["taints"][0]["key"] == "rdma.kube-rdma.io/link-down");
      CHECK((*ours)["spec"]["pool"]["generation"] == 2);
      // The scheduler (here the stand-in allocator) leaves the tainted NIC out.
      json any7 = PairsClaim(
          1, {{"nic-0", "device.attributes[\"rdma.kube-rdma.io\"].rdmaDevice == \"mlx5_7\""}});
      CHECK_FALSE(Allocate(any7, api.Objects(kSlices), classes, {}));
    }
    SECTION("a slow API server: the claim is refused by name, nothing half-prepared") {
      json second = claim;
      second["metadata"]["name"] = "pairs2";
      second["metadata"]["uid"] = "claim-2";
      api.Put("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/pairs2", second);
      api.delay_ms = 1500;
      drapb::NodePrepareResourcesRequest slow;
      auto* sc = slow.add_claims();
      sc->set_namespace_("team-a");
      sc->set_uid("claim-2");
      sc->set_name("pairs2");
      drapb::NodePrepareResourcesResponse sresp;
      grpc::ClientContext sctx;
      REQUIRE(stub->NodePrepareResources(&sctx, slow, &sresp).ok());
      api.delay_ms = 0;
      CHECK_THAT(sresp.claims().at("claim-2").error(), Catch::Contains("after 2 attempt(s)"));
      CHECK_FALSE(fs::exists(dir + "/cdi/kube-rdma-claim-claim-2.json"));
      CHECK_FALSE(fs::exists(dir + "/allocations/claims/claim-2.json"));
    }
    SECTION("devices in use are not allocated twice; CEL it cannot read is an error") {
      auto second = Allocate(PairsClaim(4), slices, classes, AllocatedKeys(*alloc));
      REQUIRE(second);
      std::set<std::string> overlap;
      auto a = AllocatedKeys(*alloc);
      auto b = AllocatedKeys(*second);
      std::ranges::set_intersection(a, b, std::inserter(overlap, overlap.begin()));
      CHECK(overlap.empty());
      auto third = Allocate(PairsClaim(1), slices, classes, [&] {
        auto all = a;
        all.insert(b.begin(), b.end());
        return all;
      }());
      CHECK_FALSE(third);
      auto cel = Allocate(PairsClaim(1, {{"nic-0", "device.attributes[\"x\"].y > 3"}}), slices,
                          classes, {});
      REQUIRE_FALSE(cel);
      CHECK_THAT(cel.error().message(), Catch::Contains("reads only `==`"));
    }
  }
  fs::remove_all(dir);
}

// `rdma-device-plugin args`: its exit code and what it printed (stdout and stderr).
std::pair<int, std::string> RunPlugin(const std::string& args) {
  std::string out;
  FILE* p = ::popen((std::string(KUBERDMA_DP_BIN) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char b[512];
  while (std::fgets(b, sizeof b, p) != nullptr) out += b;
  int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST_CASE("A wiped slice is back within 5 s and owned by its Node") {
  char tmpl[] = "/tmp/kuberdma-drawipe-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  auto shared = std::make_shared<deviceplugin::SharedResource>(
      deviceplugin::Resource(testing::PerHcaResource(), root), dir + "/allocations");
  shared->resource.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  ApiStandIn api;
  api.Put("/api/v1/nodes/gpu-node-7",
          {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "gpu-node-7"}}}});
  const std::string node_uid = (*api.Object("/api/v1/nodes/gpu-node-7"))["metadata"]["uid"];
  {
    // The resync is an hour away: only the watch (or the registration) can bring a slice back.
    Driver driver({.publish = {.node = "gpu-node-7"},
                   .cdi_dir = dir + "/cdi",
                   .plugins_dir = dir + "/plugins",
                   .registry_dir = dir + "/registry",
                   .resync = std::chrono::hours(1)},
                  ApiServer{.base = api.base(), .timeout_s = 2, .attempts = 2});
    driver.OnRescan({{"rdma/hca", shared}}, nullptr);
    REQUIRE(driver.WaitFor([](const Driver::Status& s) { return s.syncs > 0; },
                           std::chrono::milliseconds(5000)));
    auto ours = [&] {
      std::vector<json> out;
      for (const auto& x : api.Objects(kSlices)) {
        if (x["spec"]["driver"] == kDriverName) out.push_back(x);
      }
      return out;
    };
    REQUIRE(ours().size() == 1);
    json owner = ours()[0]["metadata"]["ownerReferences"][0];
    CHECK(owner["kind"] == "Node");
    CHECK(owner["name"] == "gpu-node-7");
    CHECK(owner["uid"] == node_uid);
    // The fleet acceptance's verdict file in the allocations directory: tainted on the next scan.
    REQUIRE(contract::RecordVerdicts(dir + "/allocations",
                                     {{.hca = "mlx5_5", .why = "slow", .effect = "NoSchedule"}}));
    driver.OnRescan({{"rdma/hca", shared}}, nullptr);
    auto acceptance_taint = [&] {
      const auto now = ours();
      for (const auto& d : now[0]["spec"]["devices"]) {
        if (d["name"] == "mlx5-5" && d.contains("taints")) return d["taints"][0]["key"].dump();
      }
      return std::string();
    };
    for (int i = 0; i < 250 && acceptance_taint().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(acceptance_taint() == "\"rdma.kube-rdma.io/acceptance\"");
    // The watch is open before the kubelet wipes.
    for (int i = 0; i < 100 && api.watchers() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(api.watchers() == 1);
    std::string name = ours()[0]["metadata"]["name"];
    auto wiped = std::chrono::steady_clock::now();
    api.Remove(std::string(kSlices) + name);  // the kubelet starting: every slice of the node
    bool back = false;
    while (!back && std::chrono::steady_clock::now() - wiped < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      back = api.Object(std::string(kSlices) + name).has_value();
    }
    CHECK(back);
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - wiped);
    INFO("back after " << took.count() << " ms");
    CHECK(took < std::chrono::seconds(5));
    CHECK(driver.status().last_error.empty());
  }
  fs::remove_all(dir);
}

TEST_CASE("Where the API server drops device taints, an unhealthy NIC is left out instead") {
  char tmpl[] = "/tmp/kuberdma-dranotaint-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  auto shared = std::make_shared<deviceplugin::SharedResource>(
      deviceplugin::Resource(testing::PerHcaResource(), root), dir + "/allocations");
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  hcas[2].ports[0].state = 1;
  hcas[2].ports[0].state_name = "DOWN";
  shared->resource.Refresh(hcas);
  ApiStandIn api;
  api.drop_device_taints = true;  // DRADeviceTaints off
  {
    Driver driver({.publish = {.node = "gpu-node-7"},
                   .cdi_dir = dir + "/cdi",
                   .plugins_dir = dir + "/plugins",
                   .registry_dir = dir + "/registry"},
                  ApiServer{.base = api.base(), .timeout_s = 2, .attempts = 2});
    driver.OnRescan({{"rdma/hca", shared}}, nullptr);
    REQUIRE(driver.WaitFor([](const Driver::Status& s) { return s.syncs > 0; },
                           std::chrono::milliseconds(5000)));
    driver.OnRescan({{"rdma/hca", shared}}, nullptr);  // the next scan
    REQUIRE(driver.WaitFor([](const Driver::Status& s) { return s.devices.size() == 7; },
                           std::chrono::milliseconds(5000)));
    REQUIRE(driver.WaitFor([](const Driver::Status& s) { return s.syncs > 1; },
                           std::chrono::milliseconds(5000)));
    for (const auto& x : api.Objects(kSlices)) {
      if (x["spec"]["driver"] != kDriverName) continue;
      CHECK(x["spec"]["devices"].size() == 7);  // mlx5-2 not offered as if healthy
      for (const auto& d : x["spec"]["devices"]) CHECK(d["name"] != "mlx5-2");
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("Under the node policy a node's driver writes its own slices and no other node's") {
  // The stand-in enforces the chart's ValidatingAdmissionPolicy (its rule coded, not its CEL
  // evaluated; check_renders.py holds the rendered policy to the same expressions).
  char tmpl[] = "/tmp/kuberdma-drapol-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  ApiStandIn api;
  const std::string driver_user = "system:serviceaccount:kube-rdma:kube-rdma-dra";
  api.RestrictSlicesToNode(driver_user);
  api.AddToken("node7", {.user = driver_user, .node = "gpu-node-7"});
  api.AddToken("nowhere", {.user = driver_user});
  api.AddToken("uninstall", {.user = "system:serviceaccount:kube-rdma:kube-rdma-dra-uninstall"});
  auto as = [&](const std::string& token) {
    std::string file = dir + "/" + token;
    std::ofstream(file) << token << "\n";
    return ApiServer{.base = api.base(), .token_file = file, .attempts = 1};
  };
  auto slices_of = [&](const std::string& node) {
    return ResourceSlices(r, {.node = node})->objects;
  };
  // Its own node's: written.
  REQUIRE(SyncSlices(as("node7"), kDriverName, "gpu-node-7", slices_of("gpu-node-7")));
  // Another node's: refused by the policy, nothing written.
  auto other = SyncSlices(as("node7"), kDriverName, "gpu-node-8", slices_of("gpu-node-8"));
  REQUIRE_FALSE(other);
  CHECK(other.error().code() == ErrorCode::kPermissionDenied);
  size_t before = api.Objects(kSlices).size();
  REQUIRE(SyncSlices(as("uninstall"), kDriverName, "gpu-node-8", slices_of("gpu-node-8")));
  CHECK(api.Objects(kSlices).size() == before + 1);
  // Deleting another node's (a desired list of none): refused too.
  CHECK_FALSE(SyncSlices(as("node7"), kDriverName, "gpu-node-8", {}));
  CHECK(api.Objects(kSlices).size() == before + 1);
  // A token bound to no node may write nothing.
  CHECK_FALSE(SyncSlices(as("nowhere"), kDriverName, "gpu-node-7", {}));
  // The uninstall hook's account clears every node's, as --dra-remove-slices does.
  auto all = SyncSlices(as("uninstall"), kDriverName, "", {});
  REQUIRE(all);
  CHECK(all->deleted == 2);
  fs::remove_all(dir);
}

TEST_CASE("rdma-device-plugin --dra-remove-slices: a node's, or every node's on uninstall") {
  ApiStandIn api;
  auto put = [&](const std::string& name, const std::string& driver, const std::string& node) {
    api.Put(std::string(kSlices) + name,
            {{"metadata", {{"name", name}}},
             {"spec", {{"driver", driver}, {"nodeName", node}, {"pool", {{"name", node}}}}}});
  };
  put("a-0", kDriverName, "node-a");
  put("b-0", kDriverName, "node-b");
  put("a-gpu", "gpu.nvidia.com", "node-a");
  auto [rc, out] =
      RunPlugin("--dra-remove-slices --api-server " + api.base() + " --node-name node-a");
  CHECK(rc == 0);
  CHECK_THAT(out, Catch::Contains("removed 1 ResourceSlice(s) of rdma.kube-rdma.io on node-a"));
  CHECK(api.Objects(kSlices).size() == 2);
  std::tie(rc, out) =
      RunPlugin("--dra-remove-slices --api-server " + api.base() + " --node-name ''");
  CHECK(rc == 0);
  CHECK_THAT(out, Catch::Contains("removed 1 ResourceSlice(s) of rdma.kube-rdma.io on every node"));
  REQUIRE(api.Objects(kSlices).size() == 1);
  CHECK(api.Object(std::string(kSlices) + "a-gpu"));
  // No API server there: a non-zero exit saying which request failed.
  std::tie(rc, out) =
      RunPlugin("--dra-remove-slices --api-server http://127.0.0.1:1 --node-name x");
  CHECK(rc == 1);
  CHECK_THAT(
      out, Catch::Contains("removing ResourceSlices: GET /apis/resource.k8s.io/v1/resourceslices"));
}

}  // namespace
}  // namespace kuberdma::dra
