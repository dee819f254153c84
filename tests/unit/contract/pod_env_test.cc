// SPDX-License-Identifier: Apache-2.0
// The pod-env codec: what the device plugin writes is what the validator and doctor read back,
// for every HCA of every fixture; NCCL_IB_HCA's own semantics.
#include "kuberdma/contract/pod_env.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "kuberdma/base/files.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/contract/slot_id.h"

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

TEST_CASE("Slot IDs: what the device plugin writes, the CNI reads back, per HCA and pool") {
  for (uint32_t max : {1u, 8u, 100u, 1000u, 10000u}) {
    for (uint32_t i : {0u, max - 1}) {
      for (const Slot& s :
           {Slot{SlotKind::kPerHca, "mlx5_3", i}, Slot{SlotKind::kPool, "shared", i},
            Slot{SlotKind::kPerHca, "mlx5-bond_0", i}}) {
        std::string id = FormatSlot(s, max);
        INFO(id);
        CHECK(ParseSlot(id) == s);
      }
    }
  }
  CHECK(FormatSlot({SlotKind::kPerHca, "mlx5_3", 17}, 1000) == "mlx5_3-017");
  CHECK(FormatSlot({SlotKind::kPool, "shared", 17}, 1000) == "pool-shared-017");
  // Not slot IDs: addresses, names, a dash with no number.
  for (const char* id : {"0000:3b:00.0", "mlx5_3", "mlx5_core.sf.2", "-017", "mlx5_3-", "pool--1",
                         "mlx5_3-0x1", "mlx5_3-123456"}) {
    INFO(id);
    CHECK_FALSE(ParseSlot(id));
  }
}

TEST_CASE("Allocation records round-trip, refuse what is not one, and find nothing unrecorded") {
  char tmpl[] = "/tmp/kuberdma-alloc-XXXXXX";
  std::string dir = std::string(mkdtemp(tmpl)) + "/allocations";
  AllocationGroup g{
      .resource = "rdma/hca", .slots = {"mlx5_3-0", "mlx5_0-0"}, .hcas = {"mlx5_3", "mlx5_0"}};
  REQUIRE(RecordAllocation(dir, g));
  auto found = FindAllocation(dir, "mlx5_0-0");
  REQUIRE(found);
  CHECK(*found == g);
  auto none = FindAllocation(dir, "mlx5_7-0");
  REQUIRE(none);
  CHECK_FALSE(none->has_value());
  auto path = FindAllocation(dir, "../etc/passwd");  // not a slot: never a path
  REQUIRE(path);
  CHECK_FALSE(path->has_value());
  CHECK_FALSE(RecordAllocation(dir, {.resource = "x", .slots = {"../x"}, .hcas = {"y"}}));
  for (const char* bad : {"[]", R"({"resource":"r","slots":["a"],"hcas":[]})",
                          R"({"resource":"r","slots":[1],"hcas":["a"]})",
                          R"({"resource":"r","slots":["a/b"],"hcas":["a"]})", "{"}) {
    INFO(bad);
    CHECK_FALSE(DecodeAllocation(bad));
  }
  REQUIRE(WriteFileAtomic(dir + "/mlx5_5-0", "garbage"));
  auto broken = FindAllocation(dir, "mlx5_5-0");
  REQUIRE_FALSE(broken);
  CHECK_THAT(broken.error().message(), Catch::Contains(dir + "/mlx5_5-0"));
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST_CASE("Cabling records: round trip, and files with escapes, bad names or shapes refused") {
  char tmpl[] = "/tmp/kuberdma-cabling-XXXXXX";
  std::string dir = std::string(mkdtemp(tmpl)) + "/allocations";
  CHECK(ListCabling(dir).error().code() == ErrorCode::kNotFound);  // nothing heard yet
  std::vector<CablingRecord> c = {{.hca = "mlx5_2",
                                   .netdev = "ens3f0np0",
                                   .rail = 3,
                                   .switch_name = "leaf-3",
                                   .port = "swp17",
                                   .chassis_id = "8a:b6:51:41:59:fe",
                                   .heard_at = 1796400000}};
  REQUIRE(RecordCabling(dir, c));
  REQUIRE(ListCabling(dir));
  CHECK(*ListCabling(dir) == c);
  for (const char* bad :
       {R"({"rails":[{"hca":"../x"}]})", R"({"rails":[{"hca":"mlx5_0","switch":"a\u001b[2Jb"}]})",
        R"({"rails":{}})", "{cut"}) {
    REQUIRE(WriteFileAtomic(dir + "/cabling.json", bad));
    INFO(bad);
    auto r = ListCabling(dir);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kInvalidArgument);
  }
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST_CASE("Acceptance verdicts and DRA taint records: round trip, and bad files named") {
  char tmpl[] = "/tmp/kuberdma-verdicts-XXXXXX";
  std::string dir = std::string(mkdtemp(tmpl)) + "/allocations";
  CHECK(ListVerdicts(dir).error().code() == ErrorCode::kNotFound);  // no pass yet
  std::vector<VerdictRecord> v = {{.hca = "mlx5_3", .why = "slow", .effect = "NoSchedule"}};
  REQUIRE(RecordVerdicts(dir, v));
  REQUIRE(ListVerdicts(dir));
  CHECK(*ListVerdicts(dir) == v);
  REQUIRE(RecordVerdicts(dir, {}));  // the next pass, clean: no verdict left
  CHECK(ListVerdicts(dir)->empty());
  for (const char* bad :
       {R"({"verdicts":[{"hca":"../x","effect":"NoSchedule"}]})",
        R"({"verdicts":[{"hca":"mlx5_0","effect":"NoExecute"}]})", R"({"verdicts":"x"})", "{cut"}) {
    REQUIRE(WriteFileAtomic(dir + "/acceptance-verdicts.json", bad));
    INFO(bad);
    auto r = ListVerdicts(dir);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kInvalidArgument);
  }
  std::vector<TaintRecord> t = {{.device = "mlx5-3",
                                 .hca = "mlx5_3",
                                 .key = "rdma.kube-rdma.io/link-down",
                                 .value = "port-1-DOWN",
                                 .effect = "NoSchedule"}};
  REQUIRE(RecordTaints(dir, t));
  CHECK(*ListTaints(dir) == t);
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST_CASE("DRA claim records: found by pod, wrong types and cut files passed over, uids checked") {
  char tmpl[] = "/tmp/kuberdma-claims-XXXXXX";
  std::string dir = std::string(mkdtemp(tmpl)) + "/allocations";
  ClaimRecord c{.claim = "team-a/pairs", .uid = "u1", .pods = {"team-a/p0"}, .hcas = {"mlx5_0"}};
  REQUIRE(RecordClaim(dir, c));
  REQUIRE(WriteFileAtomic(dir + "/claims/u2.json", R"({"claim":3,"pods":"team-a/p0","hcas":[1]})"));
  REQUIRE(WriteFileAtomic(dir + "/claims/u3.json", R"({"claim":"team-a/x","pods":["team-a/p0"],)"));
  std::vector<std::string> skipped;
  auto all = ListClaims(dir, &skipped);
  REQUIRE(all.size() == 2);  // u2 reads with its wrong-typed fields empty, u3 is cut
  CHECK(skipped == std::vector<std::string>{dir + "/claims/u3.json"});
  auto mine = ClaimsOfPod(dir, "team-a", "p0");
  REQUIRE(mine.size() == 1);
  CHECK(mine[0] == c);
  CHECK(ClaimsOfPod(dir, "team-b", "p0").empty());
  CHECK_FALSE(RecordClaim(dir, {.claim = "x", .uid = "../u"}));
  CHECK_FALSE(RemoveClaim(dir, "../u"));
  REQUIRE(RemoveClaim(dir, "u1"));
  REQUIRE(RemoveClaim(dir, "u1"));  // again: fine
  CHECK(ClaimsOfPod(dir, "team-a", "p0").empty());
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
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
