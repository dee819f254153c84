// SPDX-License-Identifier: Apache-2.0
// Device plugin config and resources over the sysfs fixtures: selection, both policies, device
// nodes and env, preference, health.
#include "kuberdma/deviceplugin/resource.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kuberdma/base/files.h"
#include "kuberdma/deviceplugin/config.h"
#include "manifests.h"

namespace kuberdma::deviceplugin {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string Fx(const std::string& n) { return std::string(KUBERDMA_FIXTURES) + "/sysfs/" + n; }

Resource Make(const std::string& fixture, const std::string& entry) {
  auto cfg = ParseConfig(R"({"configList":[)" + entry + "]}");
  if (!cfg) FAIL(cfg.error().message());
  sysfs::SysfsRoot root(Fx(fixture));
  Resource r(cfg->resources.at(0), root);
  r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  return r;
}

std::vector<std::string> Names(const Resource& r) {
  std::vector<std::string> out;
  for (const auto& [n, st] : r.hcas()) out.push_back(n);
  return out;
}

TEST_CASE("The shared plugin's config parses as written, deprecated devices included") {
  auto cfg = ParseConfig(R"({"periodicUpdateInterval":300,"configList":[
    {"resourceName":"hca_shared_devices_a","rdmaHcaMax":1000,"selectors":{"vendors":["15b3"],"deviceIDs":["1021"],
     "drivers":["mlx5_core"],"ifNames":["ens1f0np0"],"linkTypes":["ether"]}},
    {"resourceName":"legacy","resourcePrefix":"example.com","rdmaHcaMax":10,"devices":["ibp26s0"]}]})");
  REQUIRE(cfg);
  CHECK(cfg->periodic_update_interval_s == 300);
  CHECK(cfg->resources[0].FullName() == "rdma/hca_shared_devices_a");
  CHECK(cfg->resources[1].FullName() == "example.com/legacy");
  CHECK(cfg->resources[1].selectors.if_names == std::vector<std::string>{"ibp26s0"});
  CHECK(cfg->resources[0].policy == Policy::kPool);
}

TEST_CASE("Config errors name the entry and the field") {
  struct Case {
    const char* json;
    const char* says;
  };
  for (
      auto [text, says] : {
          Case{"{", "not valid JSON"},
          Case{R"({"configList":[]})", "configList"},
          Case{R"({"configList":[{"rdmaHcaMax":1}]})", "configList[0].resourceName"},
          Case{R"({"configList":[{"resourceName":"a","rdmaHcaMax":0}]})",
               "configList[0].rdmaHcaMax"},
          Case{
              R"({"configList":[{"resourceName":"a","rdmaHcaMax":1},{"resourceName":"b","rdmaHcaMax":1,"selectors":{"vendors":"15b3"}}]})",
              "configList[1].selectors.vendors"},
          Case{
              R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"selectors":{"linkTypes":["fddi"]}}]})",
              "linkTypes"},
          Case{R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"policy":"greedy"}]})",
               "configList[0].policy"},
          Case{
              R"({"configList":[{"resourceName":"a","rdmaHcaMax":1},{"resourceName":"a","rdmaHcaMax":1}]})",
              "configured twice"},
          Case{R"({"configList":[{"resourceName":"bad/name","rdmaHcaMax":1}]})", "resourceName"},
          Case{R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"extraEnv":{"X":1}}]})",
               "extraEnv.X"},
          // Names the kubelet would refuse at registration, refused here with the field.
          Case{R"({"configList":[{"resourceName":"x y","rdmaHcaMax":1}]})", "resourceName"},
          Case{R"({"configList":[{"resourceName":"a","resourcePrefix":"x y","rdmaHcaMax":1}]})",
               "configList[0].resourcePrefix"},
          Case{
              R"({"configList":[{"resourceName":"a","resourcePrefix":"rdma/../../x","rdmaHcaMax":1}]})",
              "resourcePrefix"},
          Case{R"({"configList":[{"resourceName":"a","resourcePrefix":"RDMA_","rdmaHcaMax":1}]})",
               "resourcePrefix"},
          Case{R"({"configList":[{"resourceName":"a","resourcePrefix":"a:b","rdmaHcaMax":1}]})",
               "resourcePrefix"},
          Case{
              R"({"configList":[{"resourceName":"a","resourcePrefix":"kubernetes.io","rdmaHcaMax":1}]})",
              "outside kubernetes.io"},
          Case{
              R"({"configList":[{"resourceName":"a","resourcePrefix":"x.kubernetes.io","rdmaHcaMax":1}]})",
              "outside kubernetes.io"},
          Case{R"({"configList":[{"resourceName":"a","resourcePrefix":"-a.com","rdmaHcaMax":1}]})",
               "resourcePrefix"},
          Case{R"({"configList":[{"resourceName":"a","rdmaHcaMax":10001}]})", "1..10000"},
      }) {
    INFO(text);
    auto r = ParseConfig(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message(), Catch::Contains(says));
  }
}

TEST_CASE("SR-IOV selectors: pfNames, rootDevices and functions keep PFs and VFs apart") {
  auto names = [](const std::string& sel) {
    return Names(Make("sriov", R"({"resourceName":"a","rdmaHcaMax":1,"selectors":)" + sel + "}"));
  };
  using V = std::vector<std::string>;
  CHECK(names(R"({"functions":["pf"]})") == V{"mlx5_0", "mlx5_5"});
  CHECK(names(R"({"functions":["vf"]})").size() == 8);
  // The VFs of ens1f0np0 (and the PF itself), as sriov-network-device-plugin's pfNames.
  CHECK(names(R"({"pfNames":["ens1f0np0"]})") ==
        V{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4"});
  CHECK(names(R"({"pfNames":["ens1f0np0"],"functions":["vf"]})") ==
        V{"mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4"});
  CHECK(names(R"({"rootDevices":["3c:00.0"],"functions":["vf"]})") ==
        V{"mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"});
  CHECK(names(R"({"linkTypes":["ether"],"functions":["pf"]})").size() == 2);
  CHECK(Names(Make("sf",
                   R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"functions":["sf"]}})")) ==
        V{"mlx5_2"});
  auto bad = ParseConfig(
      R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"selectors":{"functions":["vm"]}}]})");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("selectors.functions"));
}

TEST_CASE("The shipped resources select PFs only: never a PF and its VFs in one resource") {
  auto text =
      test_support::Shipped("manifests/10-configmap.yaml").ConfigMapData("device-plugin.json");
  REQUIRE(text);
  auto cfg = ParseConfig(*text);
  REQUIRE(cfg);
  sysfs::SysfsRoot root(Fx("sriov"));
  auto all = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  for (const auto& rc : cfg->resources) {
    Resource r(rc, root);
    r.Refresh(all);
    INFO(rc.FullName());
    CHECK(Names(r) == std::vector<std::string>{"mlx5_0", "mlx5_5"});
  }
}

TEST_CASE("Limits on resources, slots and nesting are errors naming the limit") {
  std::string many = R"({"configList":[)";
  for (int i = 0; i < 65; ++i) {
    many += (i ? "," : "") + std::string(R"({"resourceName":"r)") + std::to_string(i) +
            R"(","rdmaHcaMax":1})";
  }
  auto r = ParseConfig(many + "]}");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("at most 64"));
  auto deep = ParseConfig(R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"x":)" +
                          std::string(100000, '[') + std::string(100000, ']') + "}]}");
  REQUIRE_FALSE(deep);
  CHECK_THAT(deep.error().message(), Catch::Contains("nesting"));
  CHECK(ParseConfig(
      R"({"configList":[{"resourceName":"a","resourcePrefix":"nvidia.com","rdmaHcaMax":10000}]})"));
}

TEST_CASE("Selectors pick HCAs by vendor, device, driver, netdev, link type, address and name") {
  CHECK(Names(Make("roce8",
                   R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"vendors":["0x15B3"]}})"))
            .size() == 8);
  CHECK(
      Names(Make("roce8",
                 R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"linkTypes":["infiniband"]}})"))
          .empty());
  CHECK(
      Names(Make("ib8", R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"linkTypes":["ib"]}})"))
          .size() == 8);
  CHECK(
      Names(Make(
          "roce8",
          R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"ifNames":["ens3f0np0","ens5f0np0"]}})")) ==
      std::vector<std::string>{"mlx5_2", "mlx5_4"});
  CHECK(Names(Make(
            "roce8",
            R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"pciAddresses":["3d:00.0"]}})")) ==
        std::vector<std::string>{"mlx5_3"});
  CHECK(Names(Make("sriov",
                   R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"deviceIDs":["101e"]}})"))
            .size() == 8);
  CHECK(
      Names(Make(
          "sf",
          R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"pciAddresses":["mlx5_core.sf.2"]}})")) ==
      std::vector<std::string>{"mlx5_2"});
  CHECK(
      Names(Make(
          "ib8",
          R"({"resourceName":"a","rdmaHcaMax":1,"selectors":{"hcaNames":["mlx5_7"],"drivers":["mlx5_core"]}})")) ==
      std::vector<std::string>{"mlx5_7"});
}

TEST_CASE("The pool policy advertises rdmaHcaMax slots and gives every HCA to each allocation") {
  Resource r = Make(
      "roce8", R"({"resourceName":"shared","rdmaHcaMax":1000,"selectors":{"vendors":["15b3"]}})");
  auto devs = r.Devices();
  REQUIRE(devs.size() == 1000);
  CHECK(devs[0].id == "pool-shared-000");
  CHECK(devs[999].id == "pool-shared-999");
  CHECK(devs[0].healthy);
  CHECK(devs[0].numa_nodes == std::vector<int64_t>{0, 1});
  auto a = r.Allocate({"pool-shared-017", "pool-shared-018"});
  REQUIRE(a);
  CHECK(a->hcas.size() == 8);
  CHECK(a->envs.at("NCCL_IB_HCA") ==
        "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  // uverbs and umad per HCA (RoCE: no issm), rdma_cm once.
  CHECK(a->devices.size() == 8 * 2 + 1);
  CHECK(a->devices.back().container_path == "/dev/infiniband/rdma_cm");
  for (const auto& d : a->devices) {
    CHECK(d.permissions == "rw");
    CHECK(fs::exists(d.host_path));
  }
  // An empty request is malformed (the kubelet always names its slots), never "every HCA".
  auto none = r.Allocate({});
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(none.error().message(), Catch::Contains("names no device IDs"));
  auto bad = r.Allocate({"pool-shared-1000"});
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("unknown device ID 'pool-shared-1000'") &&
                                        Catch::Contains("rdma/shared"));
}

TEST_CASE(
    "The per-HCA policy names slots after HCAs, carries NUMA and gives exactly the slots' HCAs") {
  Resource r = Make("ib8", R"({"resourceName":"ib","rdmaHcaMax":32,"policy":"per-hca"})");
  auto devs = r.Devices();
  REQUIRE(devs.size() == 8 * 32);
  CHECK(devs[3 * 32 + 17].id == "mlx5_3-17");
  CHECK(devs[3 * 32 + 17].numa_nodes == std::vector<int64_t>{0});
  CHECK(devs[5 * 32].numa_nodes == std::vector<int64_t>{1});
  auto a = r.Allocate({"mlx5_3-17", "mlx5_0-01", "mlx5_3-02"});
  REQUIRE(a);
  CHECK(a->hcas == std::vector<std::string>{"mlx5_0", "mlx5_3"});
  CHECK(a->envs.at("NCCL_IB_HCA") == "=mlx5_0:1,mlx5_3:1");
  std::vector<std::string> paths;
  for (const auto& d : a->devices) paths.push_back(d.container_path);
  CHECK(paths == std::vector<std::string>{"/dev/infiniband/uverbs0", "/dev/infiniband/umad0",
                                          "/dev/infiniband/issm0", "/dev/infiniband/uverbs3",
                                          "/dev/infiniband/umad3", "/dev/infiniband/issm3",
                                          "/dev/infiniband/rdma_cm"});
  auto hcas = json::parse(a->envs.at("KUBERDMA_HCAS"));
  REQUIRE(hcas.size() == 2);
  CHECK(hcas[1]["name"] == "mlx5_3");
  CHECK(hcas[1]["pciAddress"] == "0000:3d:00.0");
  CHECK(hcas[1]["numaNode"] == 0);
  CHECK(hcas[1]["linkLayer"] == "InfiniBand");
  CHECK(hcas[1]["uverbs"] == "/dev/infiniband/uverbs3");
  CHECK(hcas[1]["ports"][0]["state"] == "ACTIVE");
  CHECK(hcas[1]["ports"][0]["rateGbps"] == 400);
  CHECK_FALSE(r.Allocate({"mlx5_3-32"}));  // beyond rdmaHcaMax
  CHECK_FALSE(r.Allocate({"mlx5_9-01"}));
}

TEST_CASE("Allocate tells each chosen library the HCAs, and no GID before the pod has addresses") {
  Resource all = Make("roce8", R"({"resourceName":"hca","rdmaHcaMax":1,"policy":"per-hca"})");
  auto a = all.Allocate({"mlx5_2-0", "mlx5_0-0"});
  REQUIRE(a);
  CHECK(a->envs.at("UCX_NET_DEVICES") == "mlx5_0:1,mlx5_2:1");
  CHECK(a->envs.at("NVSHMEM_HCA_LIST") == "mlx5_0:1,mlx5_2:1");
  CHECK(a->envs.at("MC_TE_FILTERS") == "mlx5_0,mlx5_2");
  CHECK(a->envs.at("OMPI_MCA_pml") == "ucx");
  CHECK(a->envs.at("GLOO_SOCKET_IFNAME") == "eth0");
  CHECK(a->envs.at("NCCL_SOCKET_IFNAME") == "=eth0");
  for (const auto& [k, v] : a->envs) CHECK(k.find("GID") == std::string::npos);
  Resource some = Make("roce8", R"({"resourceName":"hca","rdmaHcaMax":1,"policy":"per-hca",
      "commLibraries":["gloo","ucx"],"commInterface":"ens9"})");
  a = some.Allocate({"mlx5_1-0"});
  REQUIRE(a);
  CHECK(a->envs.at("GLOO_SOCKET_IFNAME") == "ens9");
  CHECK(a->envs.at("UCX_NET_DEVICES") == "mlx5_1:1");
  CHECK_FALSE(a->envs.contains("OMPI_MCA_pml"));
  CHECK_FALSE(a->envs.contains("MC_TE_FILTERS"));
  Resource none = Make("roce8", R"({"resourceName":"hca","rdmaHcaMax":1,"policy":"per-hca",
      "commLibraries":"none"})");
  a = none.Allocate({"mlx5_1-0"});
  REQUIRE(a);
  CHECK(a->envs.size() == 2);  // NCCL_IB_HCA and KUBERDMA_HCAS
  for (const auto& [bad, why] :
       {std::pair{R"("commLibraries":["ucx","nccl2"])", "unknown library 'nccl2'"},
        std::pair{R"("commLibraries":7)", "commLibraries"},
        std::pair{R"("commInterface":"eth0,eth1")", "commInterface"}}) {
    auto cfg = ParseConfig(R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,)" +
                           std::string(bad) + "}]}");
    REQUIRE_FALSE(cfg);
    CHECK_THAT(cfg.error().message(), Catch::Contains(why));
  }
}

TEST_CASE("injectMad off leaves only uverbs and rdma_cm, extraEnv and ncclEnv apply") {
  Resource r =
      Make("ib8", R"({"resourceName":"ib","rdmaHcaMax":1,"policy":"per-hca","injectMad":false,
                                "ncclEnv":false,"extraEnv":{"NCCL_IB_GID_INDEX":"3"}})");
  auto a = r.Allocate({"mlx5_1-0"});
  REQUIRE(a);
  CHECK(a->devices.size() == 2);
  CHECK_FALSE(a->envs.contains("NCCL_IB_HCA"));
  CHECK(a->envs.at("NCCL_IB_GID_INDEX") == "3");
}

TEST_CASE(
    "Preferred allocation spreads over distinct HCAs, keeps NUMA locality, honours must_include") {
  Resource r = Make("roce8", R"({"resourceName":"hca","rdmaHcaMax":4,"policy":"per-hca"})");
  std::vector<std::string> all;
  for (const auto& d : r.Devices()) all.push_back(d.id);
  auto four = r.Preferred(all, {}, 4);
  CHECK(four ==
        std::vector<std::string>{"mlx5_0-0", "mlx5_1-0", "mlx5_2-0", "mlx5_3-0"});  // NUMA 0
  auto with_must = r.Preferred(all, {"mlx5_5-2"}, 3);
  REQUIRE(with_must.size() == 3);
  CHECK(with_must[0] == "mlx5_5-2");
  CHECK(with_must[1] == "mlx5_4-0");  // NUMA 1 like the must-include
  CHECK(with_must[2] == "mlx5_6-0");
  auto ten = r.Preferred(all, {}, 10);
  std::set<std::string> hcas;
  for (size_t i = 0; i < 8; ++i) hcas.insert(ten[i].substr(0, ten[i].find('-')));
  CHECK(hcas.size() == 8);  // every HCA before any repeats
  CHECK(ten.size() == 10);
}

struct FixtureCopy {
  explicit FixtureCopy(const std::string& name) {
    char tmpl[] = "/tmp/kuberdma-dp-XXXXXX";
    dir = mkdtemp(tmpl);
    fs::copy(Fx(name), dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  ~FixtureCopy() { fs::remove_all(dir); }
  std::string dir;
};

TEST_CASE(
    "An HCA is Unhealthy when its port leaves ACTIVE or it disappears, Healthy when it returns") {
  FixtureCopy copy("roce8");
  sysfs::SysfsRoot root(copy.dir);
  auto cfg =
      ParseConfig(R"({"configList":[{"resourceName":"hca","rdmaHcaMax":2,"policy":"per-hca"}]})");
  Resource r(cfg->resources[0], root);
  auto scan = [&] { return r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts)); };
  CHECK(scan());
  CHECK_FALSE(scan());  // nothing changed
  std::string state = root.Sys("class/infiniband/mlx5_2/ports/1/state");
  REQUIRE(WriteFileAtomic(state, "1: DOWN\n"));
  CHECK(scan());
  CHECK_FALSE(r.Devices()[4].healthy);
  CHECK(r.hcas().at("mlx5_2").reason == "port 1 DOWN");
  auto pool = r.Allocate({"mlx5_2-0"});
  REQUIRE(pool);
  CHECK(pool->envs.at("NCCL_IB_HCA") == "=mlx5_2:1");  // no active port: still named
  REQUIRE(WriteFileAtomic(state, "4: ACTIVE\n"));
  CHECK(scan());
  CHECK(r.Devices()[4].healthy);
  fs::rename(root.Sys("class/infiniband/mlx5_6"), copy.dir + "/mlx5_6.away");
  CHECK(scan());
  CHECK(r.Devices().size() == 16);       // still listed,
  CHECK_FALSE(r.Devices()[12].healthy);  // but Unhealthy
  CHECK(r.hcas().at("mlx5_6").reason == "gone");
  fs::rename(copy.dir + "/mlx5_6.away", root.Sys("class/infiniband/mlx5_6"));
  CHECK(scan());
  CHECK(r.Devices()[12].healthy);
}

TEST_CASE("The CDI spec lists each HCA's device nodes under the resource's kind") {
  Resource r = Make("roce8", R"({"resourceName":"shared","rdmaHcaMax":4,"cdi":true})");
  auto spec = json::parse(r.CdiSpec());
  CHECK(spec["kind"] == "kube-rdma.io/shared");
  CHECK(spec["devices"].size() == 8);
  CHECK(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] ==
        "/dev/infiniband/uverbs0");
  auto a = r.Allocate({"pool-shared-0"});
  REQUIRE(a);
  CHECK(a->devices.empty());
  CHECK(a->cdi_devices.front() == "kube-rdma.io/shared=mlx5_0");
}

TEST_CASE("A misspelt key is an error naming it, not a selector that takes every HCA") {
  for (
      const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
          {R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"selectors":{"vendor":["15b3"]}}]})",
           "configList[0].selectors.vendor: unknown field"},
          {R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"selector":{"vendors":["15b3"]}}]})",
           "configList[0].selector: unknown field"},
          {R"({"configLists":[]})", "(top level).configLists: unknown field"},
          {R"({"configList":[{"resourceName":"a","rdmaHcaMax":1,"selectors":{"rails":[0]}}]})",
           "selectors.rails: every entry must be a rail number"}}) {
    auto cfg = ParseConfig(text);
    REQUIRE_FALSE(cfg);
    CHECK_THAT(cfg.error().message(), Catch::Contains(field));
  }
}

TEST_CASE("The node's own NIC is offered by no resource, and one that becomes it goes Unhealthy") {
  auto cfg =
      ParseConfig(R"({"configList":[{"resourceName":"hca","rdmaHcaMax":1,"policy":"per-hca"}]})");
  REQUIRE(cfg);
  sysfs::SysfsRoot root(Fx("roce8"));
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  Resource r(cfg->resources.at(0), root);
  rails::HostNet net;
  rails::NodeRoles roles = rails::JudgeHcas(hcas, net, {});
  r.Refresh(hcas, &roles);
  CHECK(r.healthy_hcas() == 8);
  // The admin gives ens2f0np0 (mlx5_1) the node's default route.
  net.links.push_back({.ifindex = 7, .name = "ens2f0np0"});
  net.routes.push_back({.dst = {.family = 4, .address = "0.0.0.0", .prefix_len = 0},
                        .gateway = "10.0.0.1",
                        .ifindex = 7});
  roles = rails::JudgeHcas(hcas, net, {});
  CHECK(r.Refresh(hcas, &roles));
  CHECK(r.healthy_hcas() == 7);
  CHECK_FALSE(r.hcas().at("mlx5_1").healthy);
  CHECK_THAT(r.hcas().at("mlx5_1").reason,
             Catch::Contains("the node's own NIC: ens2f0np0 carries the node's default route"));
  CHECK_THAT(r.WhyNotSelected(hcas[1], hcas, &roles), Catch::Contains("the node's own NIC"));
  // A fresh plugin never lists it at all.
  Resource fresh(cfg->resources.at(0), root);
  fresh.Refresh(hcas, &roles);
  CHECK(fresh.hcas().size() == 7);
  CHECK_FALSE(fresh.hcas().contains("mlx5_1"));
}

TEST_CASE("A rails selector takes the HCAs on those rails, and says why it skips the others") {
  auto cfg = ParseConfig(R"({"configList":[{"resourceName":"rail-3","rdmaHcaMax":1,
      "policy":"per-hca","selectors":{"rails":[3]}}]})");
  REQUIRE(cfg);
  sysfs::SysfsRoot root(Fx("roce8"));
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  Resource r(cfg->resources.at(0), root);
  rails::NodeConfig declared{.rails = {"ens8f0np0", "ens7f0np0", "ens6f0np0"}};
  rails::NodeRoles roles = rails::JudgeHcas(hcas, rails::HostNet{}, declared);
  r.Refresh(hcas, &roles);
  CHECK(Names(r) == std::vector<std::string>{"mlx5_5"});
  CHECK_THAT(r.WhyNotSelected(hcas[7], hcas, &roles),
             Catch::Contains("on rail 1, which rails does not list"));
  CHECK_THAT(r.WhyNotSelected(hcas[0], hcas, &roles),
             Catch::Contains("on none (not one of the node's declared rails"));
  auto vendor = ParseConfig(R"({"configList":[{"resourceName":"x","rdmaHcaMax":1,
      "selectors":{"vendors":["8086"]}}]})");
  Resource intel(vendor->resources.at(0), root);
  CHECK(intel.WhyNotSelected(hcas[0], hcas) == "vendors [8086] does not list 15b3");
}

}  // namespace
}  // namespace kuberdma::deviceplugin
