// SPDX-License-Identifier: Apache-2.0
// The node's records (allocation.cc): allocations, cabling, acceptance verdicts, DRA taints and
// claims, each round-tripped and each bad file refused or passed over.
#include "kuberdma/contract/allocation.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "kuberdma/base/files.h"

namespace kuberdma::contract {
namespace {

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

}  // namespace
}  // namespace kuberdma::contract
