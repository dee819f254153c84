// SPDX-License-Identifier: Apache-2.0
// InfiniBand's side of the cabling: the directed-route SMPs one hop out as IBA 14.2.1.2 lays them
// out, the answers read (a switch's NodeInfo and NodeDescription) and refused (short, another
// class, another attribute, an error status), hostile descriptions escaped, and the rails filled
// from a probe.
#include "kuberdma/smp/smp.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace kuberdma::smp {
namespace {

// The GetResp a switch sends to HopQuery(attr, port, tid), `data` its 64 attribute bytes.
std::array<uint8_t, kMadSize> Answer(Attr attr, uint8_t port, const std::vector<uint8_t>& data) {
  auto m = HopQuery(attr, port, 7);
  m[3] = 0x81;  // GetResp
  m[4] = 0x80;  // direction bit: returning
  m[6] = 2;     // hop pointer past the hop count
  for (size_t i = 0; i < data.size() && i < 64; ++i) m[64 + i] = data[i];
  return m;
}

std::vector<uint8_t> SwitchNodeInfo(uint64_t guid, uint8_t local_port) {
  std::vector<uint8_t> d(64, 0);
  d[0] = 1;
  d[1] = 1;
  d[2] = 2;   // switch
  d[3] = 65;  // ports
  for (int i = 0; i < 8; ++i) {
    d[static_cast<size_t>(12 + i)] = static_cast<uint8_t>(guid >> (56 - 8 * i));
    d[static_cast<size_t>(20 + i)] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  }
  d[36] = local_port;
  return d;
}

TEST_CASE("The query is a directed-route Get one hop out of the port, with permissive LIDs") {
  auto q = HopQuery(Attr::kNodeInfo, 1, 0x0102030405060708ULL);
  CHECK(q[0] == 1);
  CHECK(q[1] == 0x81);
  CHECK(q[2] == 1);
  CHECK(q[3] == 0x01);
  CHECK(q[7] == 1);  // hop count
  CHECK(q[8] == 0x01);
  CHECK(q[15] == 0x08);
  CHECK((q[16] << 8 | q[17]) == 0x0011);
  CHECK((q[32] << 8 | q[33]) == 0xffff);
  CHECK((q[34] << 8 | q[35]) == 0xffff);
  CHECK(q[128] == 0);
  CHECK(q[129] == 1);  // InitialPath[1]: out of port 1
  CHECK(HopQuery(Attr::kNodeDescription, 2, 0)[129] == 2);
}

TEST_CASE("A switch's answers name its GUID, the port the cable lands on, and its name") {
  auto info = ParseNodeInfo(Answer(Attr::kNodeInfo, 1, SwitchNodeInfo(0x0c42a10300aabb01, 17)));
  REQUIRE(info);
  CHECK(info->node_type == 2);
  CHECK(info->num_ports == 65);
  CHECK(info->node_guid == 0x0c42a10300aabb01ULL);
  CHECK(info->local_port == 17);
  std::string name = "MF0;ib-leaf-3:MQM9700/U1";
  auto desc = ParseNodeDescription(
      Answer(Attr::kNodeDescription, 1, std::vector<uint8_t>(name.begin(), name.end())));
  REQUIRE(desc);
  CHECK(*desc == name);
  lldp::Neighbor n = ToNeighbor(*info, *desc);
  CHECK(n.Switch() == name);
  CHECK(n.chassis_id == "0x0c42a10300aabb01");
  CHECK(n.Port() == "17");
  CHECK(ToNeighbor(*info, "").Switch() == "0x0c42a10300aabb01");
}

TEST_CASE("Answers that are not ours are refused, a hostile description escaped") {
  auto ok = Answer(Attr::kNodeInfo, 1, SwitchNodeInfo(1, 1));
  CHECK_FALSE(ParseNodeInfo(std::span(ok).first(100)));
  auto other = ok;
  other[1] = 0x01;  // LID-routed class
  CHECK_THAT(ParseNodeInfo(other).error().message(), Catch::Contains("class 0x01"));
  CHECK_THAT(ParseNodeDescription(ok).error().message(), Catch::Contains("attribute 0x0011"));
  auto refused = ok;
  refused[5] = 0x1c;  // status: invalid attribute
  CHECK_THAT(ParseNodeInfo(refused).error().message(), Catch::Contains("status 0x001c"));
  auto asked = HopQuery(Attr::kNodeInfo, 1, 1);  // a Get, not its answer
  CHECK_FALSE(ParseNodeInfo(asked));
  std::vector<uint8_t> hostile(64, 0x1b);  // 64 ESCs, no NUL: read to the end, escaped
  auto desc = ParseNodeDescription(Answer(Attr::kNodeDescription, 1, hostile));
  REQUIRE(desc);
  CHECK(desc->size() == 64 * 4);
  CHECK(desc->rfind("\\x1b", 0) == 0);
}

class FakeProbe final : public HopProbe {
 public:
  std::map<std::string, lldp::Neighbor> answers;
  Result<lldp::Neighbor> Neighbor(const std::string& hca, int port,
                                  std::chrono::milliseconds) override {
    asked.push_back(hca + ":" + std::to_string(port));
    auto it = answers.find(hca);
    if (it == answers.end()) return Fail(ErrorCode::kTimeout, "no SMP answer within 1000 ms");
    return it->second;
  }
  std::vector<std::string> asked;
};

TEST_CASE("Only InfiniBand rails are asked, each out of its port, the first failure said") {
  FakeProbe p;
  p.answers["mlx5_0"] =
      lldp::Neighbor{.chassis_id = "0x1", .port_id = "3", .system_name = "leaf-1"};
  std::vector<rails::RailNeighbor> rails = {
      {.rail = 1, .hca = "mlx5_0", .infiniband = true, .port = 1},
      {.rail = 2, .hca = "mlx5_1", .infiniband = true, .port = 2},
      {.rail = 3, .hca = "mlx5_2", .netdev = "ens3f0np0"}};
  auto heard = HearInfiniband(p, rails, std::chrono::seconds(1));
  CHECK(p.asked == std::vector<std::string>{"mlx5_0:1", "mlx5_1:2"});
  REQUIRE(rails[0].neighbor);
  CHECK(rails[0].neighbor->Switch() == "leaf-1");
  CHECK_FALSE(rails[1].neighbor);
  CHECK_FALSE(rails[2].neighbor);
  REQUIRE_FALSE(heard);
  CHECK(heard.error().message() == "mlx5_1 port 2: no SMP answer within 1000 ms");
  rails[1].infiniband = false;  // every rail left to ask answers
  CHECK(HearInfiniband(p, rails, std::chrono::seconds(1)));
}

}  // namespace
}  // namespace kuberdma::smp
