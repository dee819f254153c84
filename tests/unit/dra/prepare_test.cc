// SPDX-License-Identifier: Apache-2.0
// The DRA driver's preparing on the 8-GPU fixture: a claim allocated by the scheduler becomes a
// CDI spec with the device plugin's device nodes and environment; every way a claim can be wrong
// is refused by name and leaves nothing behind; prepare and unprepare are idempotent.
#include "kuberdma/dra/prepare.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/base/files.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/contract/slot_id.h"
#include "per_hca.h"

namespace kuberdma::dra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Node {
  Node() {
    char tmpl[] = "/tmp/kuberdma-dra-XXXXXX";
    dir = mkdtemp(tmpl);
    r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  }
  ~Node() { fs::remove_all(dir); }
  std::string dir;
  sysfs::SysfsRoot root{std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8"};
  deviceplugin::Resource r{testing::PerHcaResource(), root};
  PublishOptions o{.node = "gpu-node-7"};
};

// A claim of two GPU+NIC pairs as the scheduler allocates it: two NICs of ours, two GPUs of
// NVIDIA's driver, for node gpu-node-7, with an opaque config of ours.
json Claim() {
  auto result = [](const char* request, const char* driver, const char* pool, const char* dev) {
    return json{{"request", request}, {"driver", driver}, {"pool", pool}, {"device", dev}};
  };
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata",
       {{"name", "trainer-0-pairs"},
        {"namespace", "team-a"},
        {"uid", "c0ffee01-0000-4000-8000-000000000001"}}},
      {"status",
       {{"allocation",
         {{"nodeSelector",
           {{"nodeSelectorTerms",
             {{{"matchFields",
                {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"gpu-node-7"}}}}}}}}}},
          {"devices",
           {{"results",
             {result("gpu0", "gpu.nvidia.com", "gpu-node-7", "gpu-0"),
              result("nic0", kDriverName, "gpu-node-7/hca", "mlx5-0"),
              result("gpu1", "gpu.nvidia.com", "gpu-node-7", "gpu-1"),
              result("nic1", kDriverName, "gpu-node-7/hca", "mlx5-1")}},
            {"config",
             {{{"source", "FromClaim"},
               {"opaque",
                {{"driver", kDriverName},
                 {"parameters", {{"mtu", 9000}, {"mode", "exclusive"}}}}}}}}}}}}}}};
}

const ClaimRef kRef{
    .ns = "team-a", .uid = "c0ffee01-0000-4000-8000-000000000001", .name = "trainer-0-pairs"};

TEST_CASE("A claim of two GPU+NIC pairs becomes a CDI spec with the device plugin's devices") {
  Node n;
  ClaimConfig config;
  auto devices = OurDevices(Claim(), kRef, n.o, n.r, &config);
  REQUIRE(devices);
  REQUIRE(devices->size() == 2);  // the GPUs are NVIDIA's driver's to prepare
  CHECK((*devices)[0].hca == "mlx5_0");
  CHECK((*devices)[1].request == "nic1");
  CHECK(config.mtu == 9000);
  CHECK(config.mode == "exclusive");

  Preparer p(n.r, n.o, n.dir + "/cdi");
  auto ids = p.Prepare(kRef, Claim());
  REQUIRE(ids);
  REQUIRE(ids->devices.size() == 2);
  // One CDI device per HCA, named so that released Multus' deviceID (the text after '=') leads
  // the CNI to exactly that HCA of exactly this claim.
  for (size_t i = 0; i < 2; ++i) {
    const auto& d = ids->devices[i];
    auto hca = n.r.hcas().at(d.hca).hca;
    CHECK(d.cdi_id == "kube-rdma.io/hca=" + kRef.uid + "_" + hca.pci_address);
    auto parsed = contract::ParseClaimDevice(d.cdi_id.substr(d.cdi_id.find('=') + 1));
    REQUIRE(parsed);
    CHECK(parsed->uid == kRef.uid);
    CHECK(parsed->address == hca.pci_address);
  }
  CHECK(ids->devices[0].cdi_id != ids->devices[1].cdi_id);
  auto spec = json::parse(*ReadFile(p.SpecPath(kRef)));
  CHECK(spec["kind"] == "kube-rdma.io/hca");
  REQUIRE(spec["devices"].size() == 2);
  // Each device brings its own uverbs node; what both need (rdma_cm) and the claim's environment
  // are the spec's, applied once for either.
  std::string first = spec["devices"][0]["containerEdits"]["deviceNodes"].dump();
  std::string second = spec["devices"][1]["containerEdits"]["deviceNodes"].dump();
  CHECK_THAT(first, Catch::Contains("/dev/infiniband/uverbs0"));
  CHECK_THAT(first, !Catch::Contains("uverbs1"));
  CHECK_THAT(second, Catch::Contains("/dev/infiniband/uverbs1"));
  CHECK_THAT(second, !Catch::Contains("uverbs0"));
  const auto& edits = spec["containerEdits"];
  std::string nodes = edits["deviceNodes"].dump();
  CHECK_THAT(nodes, Catch::Contains("/dev/infiniband/rdma_cm"));
  CHECK_THAT(nodes + first + second, !Catch::Contains("uverbs2"));
  std::string env = edits["env"].dump();
  CHECK_THAT(env, Catch::Contains(std::string(contract::kNcclIbHca) + "==mlx5_0:1,mlx5_1:1"));
  CHECK_THAT(env, Catch::Contains(contract::kHcas));

  // Again (a kubelet retry, a restarted driver): the same answer, the same file.
  auto again = p.Prepare(kRef, Claim());
  REQUIRE(again);
  CHECK(again->devices[1].cdi_id == ids->devices[1].cdi_id);
  REQUIRE(p.Unprepare(kRef));
  CHECK_FALSE(fs::exists(p.SpecPath(kRef)));
  CHECK(p.Unprepare(kRef));  // never prepared, or already undone: fine
}

TEST_CASE("A claim that is not this node's, not allocated, or wrong is refused, nothing written") {
  Node n;
  Preparer p(n.r, n.o, n.dir + "/cdi");
  auto refused = [&](json claim, const ClaimRef& ref = kRef) {
    auto r = p.Prepare(ref, claim);
    CHECK_FALSE(fs::exists(p.SpecPath(ref)));
    REQUIRE_FALSE(r);
    return r.error().message();
  };
  json c = Claim();
  c["metadata"]["uid"] = "c0ffee-2";
  CHECK_THAT(refused(c), Catch::Contains("is now uid 'c0ffee-2', not the " + kRef.uid +
                                         " the kubelet asked for: deleted and created again"));
  c = Claim();
  c["status"].erase("allocation");
  CHECK_THAT(refused(c), Catch::Contains("is not allocated"));
  c = Claim();
  c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] = {
      "gpu-node-8"};
  CHECK_THAT(refused(c), Catch::Contains("is allocated to another node, not gpu-node-7"));
  c = Claim();
  c["status"]["allocation"]["devices"]["results"][1]["pool"] = "gpu-node-8/hca";
  CHECK_THAT(refused(c), Catch::Contains("device mlx5-0 is from pool 'gpu-node-8/hca', not this "
                                         "node's gpu-node-7/hca"));
  c = Claim();
  c["status"]["allocation"]["devices"]["results"][3]["device"] = "mlx5-99";
  CHECK_THAT(refused(c), Catch::Contains("device mlx5-99 is no HCA of gpu-node-7"));
  c = Claim();
  c["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["mtu"] = 12;
  CHECK_THAT(refused(c), Catch::Contains("rdma.kube-rdma.io config: mtu is 12 (mtu: 68..65535"));
  c = Claim();
  c["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["pkey"] = "0x8001";
  CHECK_THAT(refused(c),
             Catch::Contains("unknown field 'pkey' (known: mtu, linkState, mode, commLibraries)"));
  c = Claim();
  c["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["commLibraries"] = {
      "nccl", "horovod"};
  CHECK_THAT(refused(c), Catch::Contains("config: commLibraries: unknown library 'horovod'"));
  c["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["commLibraries"] = 3;
  CHECK_THAT(refused(c), Catch::Contains(R"(commLibraries: must be a list of names, "all")"));
  c = Claim();
  c["status"]["allocation"]["devices"]["results"] = json::array();
  CHECK_THAT(refused(c), Catch::Contains("has no device of driver rdma.kube-rdma.io"));
  CHECK_THAT(refused(Claim(), {.ns = "team-a", .uid = "../x", .name = "n"}),
             Catch::Contains("is not a UID"));
  CHECK_FALSE(p.Unprepare({.uid = "a/b"}));
}

}  // namespace
}  // namespace kuberdma::dra

namespace kuberdma::dra {
namespace {

TEST_CASE("A claim's commLibraries picks the libraries its containers are told about") {
  Node n;
  Preparer p(n.r, n.o, n.dir + "/cdi");
  auto env_of = [&](const json& claim) {
    REQUIRE(p.Prepare(kRef, claim));
    auto spec = json::parse(*ReadFile(p.SpecPath(kRef)));
    return spec["containerEdits"]["env"].dump();
  };
  // The device plugin's default: every library, in its own format.
  std::string all = env_of(Claim());
  CHECK_THAT(all, Catch::Contains("UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1") &&
                      Catch::Contains("NVSHMEM_HCA_LIST=mlx5_0:1,mlx5_1:1") &&
                      Catch::Contains("MC_TE_FILTERS=mlx5_0,mlx5_1"));
  // A pod that sets UCX's variables itself (CDI would set the claim's over them) asks for NCCL's.
  json c = Claim();
  c["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["commLibraries"] = {
      "nccl"};
  std::string nccl = env_of(c);
  CHECK_THAT(nccl, Catch::Contains(std::string(contract::kNcclIbHca) + "==mlx5_0:1,mlx5_1:1") &&
                       !Catch::Contains("UCX_") && !Catch::Contains("NVSHMEM_"));
  c["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["commLibraries"] =
      "none";
  std::string none = env_of(c);
  CHECK_THAT(none, !Catch::Contains("UCX_") && Catch::Contains(contract::kHcas));
  REQUIRE(p.Unprepare(kRef));
}

}  // namespace
}  // namespace kuberdma::dra
