// SPDX-License-Identifier: Apache-2.0
// rdma-validate --env's plan in the pod: the libraries told the pod's own GIDs (one index, a range,
// or UCX's per-HCA subnets), InfiniBand HCAs from KUBERDMA_HCAS, one process's HCAs by its GPU,
// refused when a one-index library cannot be told, and the pod spec's own values kept.
#include "kuberdma/validator/comm_plan.h"

#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>

namespace kuberdma::validator {
namespace {

using contract::Library;

sysfs::Gid V2(uint32_t index, const std::string& ipv4) {
  in_addr a{};
  REQUIRE(::inet_pton(AF_INET, ipv4.c_str(), &a) == 1);
  const auto* b = reinterpret_cast<const uint8_t*>(&a.s_addr);
  char gid[64];
  std::snprintf(gid, sizeof gid, "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", b[0], b[1],
                b[2], b[3]);
  return {.index = index, .gid = gid, .type = "RoCE v2", .netdev = "net1"};
}

std::map<std::string, std::string> Vars(const PodCommPlan& p) {
  std::map<std::string, std::string> out;
  for (const auto& l : p.libraries) out.insert(l.vars.begin(), l.vars.end());
  return out;
}

TEST_CASE("In the pod: each library told the pod's own GID on shared HCAs") {
  // Another pod's entry first on mlx5_0: the pod's own is index 5 there, 3 on mlx5_1.
  PodCommInputs in{.tables = {{.hca = "mlx5_0", .gids = {V2(3, "10.10.1.2"), V2(5, "10.10.1.3")}},
                              {.hca = "mlx5_1", .gids = {V2(3, "10.10.2.3"), V2(5, "10.10.2.2")}}},
                   .own_ipv4 = {"10.10.1.3", "10.10.2.3"},
                   .control_address = "192.168.0.9"};
  SECTION("UCX alone: each HCA's own GID by its address") {
    auto p = PlanPodComm({Library::kUcx, Library::kNixl}, in);
    REQUIRE(p.why_not.empty());
    auto v = Vars(p);
    CHECK(v["UCX_IB_ROCE_SUBNETS"] == "10.10.1.3/32,10.10.2.3/32");
    CHECK(v["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "192.168.0.9");
  }
  SECTION("NCCL among them: no index or range can be the pod's own: refused, saying why") {
    auto p = PlanPodComm({Library::kUcx, Library::kNccl}, in);
    CHECK_THAT(p.why_not, Catch::Contains("different indices"));
    CHECK(p.libraries.empty());
  }
  SECTION("the pod's entries at one index on both HCAs: that index, for every library") {
    in.own_ipv4 = {"10.10.1.2", "10.10.2.3"};
    auto p = PlanPodComm(contract::AllLibraries(), in);
    REQUIRE(p.why_not.empty());
    auto v = Vars(p);
    for (const char* k :
         {"NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX", "MC_GID_INDEX"}) {
      CHECK(v[k] == "3");
    }
  }
  SECTION("no entry of the pod's addresses on any HCA") {
    in.own_ipv4 = {"10.99.0.1"};
    CHECK_THAT(PlanPodComm({Library::kUcx}, in).why_not, Catch::Contains("ipam"));
  }
}

TEST_CASE("InfiniBand: the HCAs from KUBERDMA_HCAS, and one process gets the HCA beside its GPU") {
  contract::HcaInfo a{.name = "mlx5_0",
                      .link_layer = "InfiniBand",
                      .ports = {{.port = 1, .state = "ACTIVE", .link_layer = "InfiniBand"}}};
  contract::HcaInfo b = a;
  b.name = "mlx5_1";
  PodCommInputs in{.allocated = std::vector<contract::HcaInfo>{a, b},
                   .local_rank = 1,
                   .nearest_gpu = {{"mlx5_0", 0}, {"mlx5_1", 1}}};
  auto p = PlanPodComm({Library::kUcx}, in);
  REQUIRE(p.why_not.empty());
  CHECK(Vars(p)["UCX_NET_DEVICES"] == "mlx5_1:1");
  in.allocated.reset();
  CHECK_THAT(PlanPodComm({Library::kUcx}, in).why_not, Catch::Contains("KUBERDMA_HCAS"));
}

TEST_CASE("The exports keep what the pod spec set, and refine what the allocation set") {
  contract::HcaInfo a{.name = "mlx5_0",
                      .link_layer = "InfiniBand",
                      .ports = {{.port = 1, .state = "ACTIVE", .link_layer = "InfiniBand"}}};
  contract::HcaInfo b = a;
  b.name = "mlx5_1";
  PodCommInputs in{.allocated = std::vector<contract::HcaInfo>{a, b},
                   .local_rank = 0,
                   .nearest_gpu = {{"mlx5_0", 0}}};
  auto p = PlanPodComm({Library::kUcx, Library::kGloo}, in);
  std::map<std::string, std::string> env = {
      {"UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1"},  // what Allocate set: refined for this process
      {"GLOO_SOCKET_IFNAME", "bond0"}};          // what the pod spec set: kept
  std::vector<std::string> kept;
  std::string out = FormatCommExports(
      p, [&](const char* k) { return env.contains(k) ? env[k].c_str() : nullptr; }, &kept);
  CHECK_THAT(out, Catch::Contains("export UCX_NET_DEVICES='mlx5_0:1'\n"));
  CHECK_THAT(out, !Catch::Contains("GLOO_SOCKET_IFNAME"));
  CHECK(kept == std::vector<std::string>{"GLOO_SOCKET_IFNAME=bond0: set by the pod spec, kept"});
}

}  // namespace
}  // namespace kuberdma::validator
