// SPDX-License-Identifier: Apache-2.0
// rdma-validate --nccl-env's plan over GID tables as shared RoCE HCAs have them (several pods'
// entries in one table): NCCL_IB_GID_INDEX only when the pod's index is the same on every HCA,
// NCCL_IB_ADDR_RANGE only when a prefix holds the pod's addresses and no other pod's, else a
// refusal that says why. The VM tier runs it on the kernel's own tables (tests/vm).
#include "kuberdma/validator/gid_env.h"

#include <arpa/inet.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>

#include "kuberdma/base/files.h"

namespace kuberdma::validator {
namespace {

// An IPv4-mapped RoCE v2 entry at `index`, spelled as sysfs spells it.
sysfs::Gid V2(uint32_t index, const std::string& ipv4) {
  in_addr a{};
  REQUIRE(::inet_pton(AF_INET, ipv4.c_str(), &a) == 1);
  const auto* b = reinterpret_cast<const uint8_t*>(&a.s_addr);
  char gid[64];
  std::snprintf(gid, sizeof gid, "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", b[0], b[1],
                b[2], b[3]);
  return {.index = index, .gid = gid, .type = "RoCE v2", .netdev = "net1"};
}

sysfs::Gid LinkLocal(uint32_t index) {
  return {.index = index, .gid = "fe80:0000:0000:0000:5054:00ff:fe12:3456", .type = "RoCE v2"};
}

std::string Var(const GidEnvPlan& p, const std::string& name) {
  for (const auto& [k, v] : p.vars)
    if (k == name) return v;
  return "";
}

TEST_CASE("One shared HCA: the pod's own index, whatever entries other pods have before it") {
  GidTable rxe0{.hca = "rxe0",
                .gids = {LinkLocal(0), LinkLocal(1), V2(3, "10.9.1.2"), V2(5, "10.9.1.3")}};
  auto b = PlanNcclGidEnv({rxe0}, {"127.0.0.1", "10.9.1.3"});
  REQUIRE(b.ok);
  CHECK(Var(b, "NCCL_IB_GID_INDEX") == "5");
  CHECK(Var(b, "NCCL_IB_HCA") == "=rxe0:1");
  auto a = PlanNcclGidEnv({rxe0}, {"10.9.1.2"});
  CHECK(Var(a, "NCCL_IB_GID_INDEX") == "3");
}

TEST_CASE("Several HCAs with the pod's entry at one index: NCCL_IB_GID_INDEX, its HCAs only") {
  GidTable m0{.hca = "mlx5_0", .gids = {V2(3, "10.10.1.2"), V2(5, "10.10.1.3")}};
  GidTable m1{.hca = "mlx5_1", .gids = {V2(3, "10.10.2.2"), V2(5, "10.10.2.3")}};
  GidTable m2{.hca = "mlx5_2", .gids = {V2(3, "10.10.3.9")}};  // another pod's rail only
  auto p = PlanNcclGidEnv({m0, m1, m2}, {"10.10.1.3", "10.10.2.3"});
  REQUIRE(p.ok);
  CHECK(Var(p, "NCCL_IB_GID_INDEX") == "5");
  CHECK(Var(p, "NCCL_IB_HCA") == "=mlx5_0:1,mlx5_1:1");
  CHECK(Var(p, "NCCL_IB_ADDR_RANGE").empty());
}

TEST_CASE("Indices differ, but the pod has an address block of its own: NCCL_IB_ADDR_RANGE") {
  GidTable m0{.hca = "mlx5_0", .gids = {V2(3, "10.9.16.5"), V2(5, "10.9.32.5")}};
  GidTable m1{.hca = "mlx5_1", .gids = {V2(3, "10.9.33.5"), V2(5, "10.9.17.5")}};
  auto p = PlanNcclGidEnv({m0, m1}, {"10.9.16.5", "10.9.17.5"});
  REQUIRE(p.ok);
  CHECK(Var(p, "NCCL_IB_GID_INDEX").empty());
  CHECK(Var(p, "NCCL_IB_ADDR_RANGE") == "10.9.16.0/23");
  CHECK(Var(p, "NCCL_IB_ADDR_FAMILY") == "AF_INET");
  CHECK(Var(p, "NCCL_IB_ROCE_VERSION_NUM") == "2");
}

TEST_CASE("Indices differ and every prefix of the pod's addresses holds another pod's: refused") {
  // One subnet per rail, pods interleaved: the usual host-local layout.
  GidTable m0{.hca = "mlx5_0", .gids = {V2(3, "10.10.1.2"), V2(5, "10.10.1.3")}};
  GidTable m1{.hca = "mlx5_1", .gids = {V2(3, "10.10.2.3"), V2(5, "10.10.2.2")}};
  auto p = PlanNcclGidEnv({m0, m1}, {"10.10.1.3", "10.10.2.3"});
  CHECK_FALSE(p.ok);
  CHECK(p.vars.empty());
  CHECK_THAT(p.why_not, Catch::Contains("mlx5_0 5, mlx5_1 3") && Catch::Contains("10.10.0.0/22") &&
                            Catch::Contains("10.10.1.2 on mlx5_0 (index 3)"));
  auto none = PlanNcclGidEnv({m0}, {"10.99.0.1"});
  CHECK_FALSE(none.ok);
  CHECK_THAT(none.why_not, Catch::Contains("10.99.0.1") && Catch::Contains("ipam"));
}

TEST_CASE("The covering prefix is the smallest that holds every address") {
  CHECK(CoveringPrefix({"10.9.1.3"}) == "10.9.1.3/32");
  CHECK(CoveringPrefix({"10.0.0.1", "10.0.0.2"}) == "10.0.0.0/30");
  CHECK(CoveringPrefix({"10.10.1.3", "10.10.2.3"}) == "10.10.0.0/22");
  CHECK(CoveringPrefix({"1.0.0.0", "200.0.0.0"}) == "0.0.0.0/0");
  CHECK(CoveringPrefix({"10.0.0.1", "nonsense"}).empty());
  CHECK(CoveringPrefix({}).empty());
}

TEST_CASE(
    "Every value printed for eval comes back as it was, whatever it holds, and runs nothing") {
  char dir_tmpl[] = "/tmp/kuberdma-quote-XXXXXX";
  std::string dir = mkdtemp(dir_tmpl);
  std::string marker = dir + "/ran";
  GidEnvPlan plan;
  const std::string hostile =
      "=mlx5_0:1,it's $(touch " + marker + ") `touch " + marker + "` \"\\\n;touch " + marker;
  plan.vars = {{"NCCL_IB_HCA", hostile}, {"NCCL_IB_GID_INDEX", "3"}};
  std::string text = FormatExports(plan);
  CHECK_THAT(text, Catch::StartsWith("export NCCL_IB_HCA='=mlx5_0:1,it'\\''s $(touch"));
  CHECK_THAT(text, Catch::Contains("export NCCL_IB_GID_INDEX='3'\n"));
  std::string script = dir + "/env.sh";
  REQUIRE(WriteFileAtomic(script, text));
  std::string cmd = "sh -c '. " + script + " && printf %s \"$NCCL_IB_HCA\"'";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string got;
  char buf[256];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) got.append(buf, n);
  CHECK(::pclose(p) == 0);
  CHECK(got == hostile);
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK(ShellQuote("") == "''");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kuberdma::validator
