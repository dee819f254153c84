// SPDX-License-Identifier: Apache-2.0
// The pod-env codec: what the device plugin writes is what the validator and doctor read back,
// for every HCA of every fixture; NCCL_IB_HCA's own semantics.
#include "kuberdma/contract/pod_env.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "kuberdma/base/files.h"

namespace kuberdma::contract {
namespace {

std::function<const char*(const char*)> Env(const std::map<std::string, std::string>& m) {
  return [&m](const char* k) -> const char* {
    auto it = m.find(k);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("Write then parse is the identity for every HCA of every fixture") {
  for (const char* fixture : {"roce8", "ib8", "sriov", "sf"}) {
    sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + fixture);
    auto hcas = sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
    REQUIRE(hcas);
    REQUIRE_FALSE(hcas->empty());
    std::vector<HcaInfo> described;
    for (size_t i = 0; i < hcas->size(); ++i) described.push_back(Describe((*hcas)[i], i % 2 == 0));
    auto env = Encode(described);
    REQUIRE(env.size() == 2);
    auto pod = Read(Env(env));
    INFO(fixture << ": " << env[kHcas]);
    REQUIRE(pod);
    REQUIRE(pod->hcas);
    CHECK(*pod->hcas == described);
    REQUIRE(pod->ib_hca);
    CHECK(pod->ib_hca->exact);
    CHECK_FALSE(pod->ib_hca->exclude);
    // Every HCA, with exactly its ACTIVE ports, in the same order; formatting it again gives the
    // same text.
    std::vector<std::string> names;
    for (const auto& h : *hcas) names.push_back(h.name);
    CHECK(pod->ib_hca->Names() == names);
    for (const auto& h : *hcas) {
      const IbHcaEntry* e = pod->ib_hca->Find(h.name);
      REQUIRE(e != nullptr);
      CHECK(e->ports == std::vector<uint32_t>{1});
    }
    CHECK(FormatIbHca(*pod->ib_hca) == env[kNcclIbHca]);
    CHECK(pod->HcaNames() == names);
  }
}

TEST_CASE("NCCL_IB_HCA names only ACTIVE ports, and every port when none is active") {
  HcaInfo up{.name = "mlx5_0",
             .ports = {{.port = 1, .state = "ACTIVE"}, {.port = 2, .state = "DOWN"}}};
  HcaInfo down{.name = "mlx5_1", .ports = {{.port = 1, .state = "DOWN"}}};
  CHECK(Encode({up, down})[kNcclIbHca] == "=mlx5_0:1");
  CHECK(Encode({down})[kNcclIbHca] == "=mlx5_1:1");
}

TEST_CASE("NCCL_IB_HCA selects by prefix unless '=' makes it exact, '^' excludes") {
  std::vector<std::string> present = {"mlx5_1", "mlx5_10", "mlx5_2"};
  CHECK(ParseIbHca("mlx5_1").Select(present) == std::vector<std::string>{"mlx5_1", "mlx5_10"});
  CHECK(ParseIbHca("=mlx5_1:1").Select(present) == std::vector<std::string>{"mlx5_1"});
  CHECK(ParseIbHca("^mlx5_1").Select(present) == std::vector<std::string>{"mlx5_2"});
  CHECK(ParseIbHca("^=mlx5_1").Select(present) == std::vector<std::string>{"mlx5_10", "mlx5_2"});
  auto l = ParseIbHca("=mlx5_3:1,mlx5_0:1,mlx5_3:2");
  CHECK(l.Names() == std::vector<std::string>{"mlx5_3", "mlx5_0"});  // written order, merged
  CHECK(l.Find("mlx5_3")->ports == std::vector<uint32_t>{1, 2});
}

TEST_CASE("A malformed KUBERDMA_HCAS is an error that names the variable") {
  std::map<std::string, std::string> bad = {{kHcas, "{"}};
  auto r = Read(Env(bad));
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("KUBERDMA_HCAS"));
  std::map<std::string, std::string> nameless = {{kHcas, R"([{"pciAddress":"0000:1a:00.0"}])"}};
  CHECK_THAT(Read(Env(nameless)).error().message(), Catch::Contains("KUBERDMA_HCAS[0]"));
  std::map<std::string, std::string> none;
  auto empty = Read(Env(none));
  REQUIRE(empty);
  CHECK_FALSE(empty->hcas);
  CHECK_FALSE(empty->ib_hca);
}

TEST_CASE("KUBERDMA_HCAS with fields of the wrong type decodes without throwing") {
  // The fuzz replay found it: json::value() threw type_error on "healthy":3 and "port":"x".
  auto h = DecodeHcas(
      R"([{"name":"mlx5_0","healthy":3,"numaNode":"y","ports":[{"port":"1","rateGbps":"x"}]}])");
  REQUIRE(h);
  REQUIRE(h->size() == 1);
  CHECK_FALSE(h->at(0).healthy);
  CHECK(h->at(0).numa_node == -1);
  CHECK(h->at(0).ports.at(0).port == 0);
  CHECK_FALSE(DecodeHcas(std::string(1000, '[') + std::string(1000, ']')));
}

TEST_CASE("KUBERDMA_CLAIM_PCIE_ROOTS reads back what the DRA driver wrote, in order") {
  std::vector<ClaimPair> pairs = {{"mlx5_0", "pci0000:15"}, {"mlx5_3", "pci0000:37"}};
  std::string text = FormatClaimPcieRoots(pairs);
  CHECK(text == "mlx5_0=pci0000:15,mlx5_3=pci0000:37");
  CHECK(ParseClaimPcieRoots(text) == pairs);
  CHECK(FormatClaimPcieRoots({}).empty());
  CHECK(ParseClaimPcieRoots("").empty());
  // An entry that is no pair is skipped, the others kept.
  CHECK(ParseClaimPcieRoots("junk,mlx5_1=pci0000:ba,") ==
        std::vector<ClaimPair>{{"mlx5_1", "pci0000:ba"}});
}

}  // namespace
}  // namespace kuberdma::contract
