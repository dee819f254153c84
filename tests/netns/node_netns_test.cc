// SPDX-License-Identifier: Apache-2.0
// The node library against this kernel: DCB queries on links without DCB support, addresses and
// routes on a real link.
#include <catch2/catch.hpp>

#include "kuberdma/dcb/dcb_ops.h"
#include "kuberdma/sim/sim_node.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

TEST_CASE("DCB on a veth is unsupported, named as such, an absent netdev is not found") {
  SimNode node(kRoce8, {"ens1f0np0"});
  dcb::NetlinkDcbOps dcb;
  auto st = dcb.Get(node.node(), "ens1f0np0");
  REQUIRE_FALSE(st);
  CHECK(st.error().code() == ErrorCode::kUnsupported);
  CHECK_THAT(st.error().message(), Catch::Contains("ens1f0np0") && Catch::Contains("no DCB"));
  auto none = dcb.Get(node.node(), "ens9f0np0");
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == ErrorCode::kNotFound);
}

TEST_CASE("Addresses and routes are added, listed and removed on a real link") {
  SimNode node(kRoce8, {"ens1f0np0"});
  auto l = node.links().GetByName(node.node(), "ens1f0np0");
  REQUIRE(l);
  REQUIRE(node.links().Change(node.node(), l->ifindex, {.up = true}));
  auto ip = *link::ParsePrefix("10.70.0.2/24");
  REQUIRE(node.addrs().AddAddress(node.node(), l->ifindex, ip));
  CHECK(node.addrs().AddAddress(node.node(), l->ifindex, ip).error().code() ==
        ErrorCode::kAlreadyExists);
  auto v6 = *link::ParsePrefix("fd00:70::2/64");
  REQUIRE(node.addrs().AddAddress(node.node(), l->ifindex, v6));
  auto have = *node.addrs().ListAddresses(node.node(), l->ifindex);
  CHECK(std::count(have.begin(), have.end(), ip) == 1);
  CHECK(std::count(have.begin(), have.end(), v6) == 1);
  link::Route r{
      .dst = *link::ParsePrefix("10.80.0.0/16"), .gateway = "10.70.0.1", .ifindex = l->ifindex};
  REQUIRE(node.addrs().AddRoute(node.node(), r));
  auto routes = *node.addrs().ListRoutes(node.node(), l->ifindex);
  CHECK(std::count(routes.begin(), routes.end(), r) == 1);
  REQUIRE(node.addrs().DeleteAddress(node.node(), l->ifindex, ip));
  REQUIRE(node.addrs().DeleteAddress(node.node(), l->ifindex, ip));  // already gone: fine
  have = *node.addrs().ListAddresses(node.node(), l->ifindex);
  CHECK(std::count(have.begin(), have.end(), ip) == 0);
}

}  // namespace
}  // namespace kuberdma::sim
