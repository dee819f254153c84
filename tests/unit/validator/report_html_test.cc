// SPDX-License-Identifier: Apache-2.0
// The fleet report page from reports Evaluate() makes: which cells are marked for a node's rail,
// a whole node and a rail slow everywhere; names escaped; baselines; what is refused. (The page in
// a browser: tests/page/fleet_report_page_test.py.)
#include "kuberdma/validator/report_html.h"

#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <string>

#include "kuberdma/validator/acceptance.h"

namespace kuberdma::validator {
namespace {

using nlohmann::json;

// K nodes x 2 rails over two pair rounds: 2 GB/s a rail, 0.2 where an end is in `slow`.
json Fleet(int k, const std::set<std::pair<int, int>>& slow, const std::string& name = "node-") {
  acceptance::Inputs in;
  in.date = "2026-12-01T12:00:00Z";
  in.transport = "socket";
  std::vector<int> ranks;
  for (int n = 0; n < k; ++n) {
    in.nodes[n] = {
        .rank = n, .name = name + std::to_string(n + 1), .hcas = {{"mlx5_0"}, {"mlx5_1"}}};
    ranks.push_back(n);
  }
  in.ring = {.ran = true, .ok = true, .busbw_gbps = 1.5, .algbw_gbps = 1, .ranks = k};
  for (int r = 0; r < 2; ++r) {
    in.rounds.push_back(acceptance::PairRound(ranks, r));
    for (const auto& p : in.rounds.back()) {
      for (int rail = 0; rail < 2; ++rail) {
        bool s = slow.count({p.a, rail}) > 0 || slow.count({p.b, rail}) > 0;
        in.measurements.push_back(
            {.round = r, .pair = p, .rail = rail, .busbw_gbps = s ? 0.2 : 2.0, .ok = true});
      }
    }
  }
  return acceptance::Evaluate(in).ToJson();
}

// (node, rail) of every cell marked as a culprit's.
std::set<std::pair<std::string, std::string>> Marked(const std::string& page) {
  std::set<std::pair<std::string, std::string>> out;
  std::regex cell(R"re(<td class="cell[^"]* culprit" data-node="([^"]*)" data-rail="(\d+)")re");
  for (std::sregex_iterator it(page.begin(), page.end(), cell), end; it != end; ++it)
    out.insert({(*it)[1], (*it)[2]});
  return out;
}

TEST_CASE("The culprit's cell, and only it, is marked, with its evidence") {
  auto page = FleetReportHtml(Fleet(4, {{2, 1}}), nullptr);
  REQUIRE(page);
  CHECK(Marked(*page) == std::set<std::pair<std::string, std::string>>{{"node-3", "2"}});
  CHECK_THAT(*page, Catch::Contains("<b>culprit</b> node-3, rail 2 (mlx5_1)"));
  CHECK_THAT(*page, Catch::Contains("id=\"verdict\">fail<"));
  CHECK_THAT(*page, !Catch::Contains("vs baseline"));
}

TEST_CASE("A node links to its cabling, the miscabled rail marked, hostile names escaped") {
  json r = Fleet(4, {});
  for (size_t i = 0; i < 4; ++i) {
    r["nodes"][i]["cabling"] = json::array({{{"rail", 1},
                                             {"hca", "mlx5_0"},
                                             {"netdev", "net1"},
                                             {"switch", "leaf-1"},
                                             {"port", "swp1"}}});
  }
  r["nodes"][2]["cabling"][0]["switch"] = "leaf-<2>";
  r["nodes"][2]["cabling"][0]["finding"] = "node-3 rail 1 (mlx5_0) is cabled to leaf-<2>";
  auto page = FleetReportHtml(r, nullptr);
  REQUIRE(page);
  CHECK_THAT(*page, Catch::Contains("<a class=\"cabling fail\" href=\"#cabling-2\">"));
  CHECK_THAT(*page, Catch::Contains("<a class=\"cabling\" href=\"#cabling-0\">"));
  CHECK_THAT(*page, Catch::Contains("<tr id=\"cabling-2\">"));
  CHECK_THAT(*page, Catch::Contains("class=\"fail miscabled\">leaf-&lt;2&gt;</td>"));
  CHECK_THAT(*page, !Catch::Contains("leaf-<2>"));
  r["nodes"][1]["cabling"][0]["port"] = 7;
  auto bad = FleetReportHtml(r, nullptr);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message(), Catch::Contains("nodes[1].cabling[0].port is number"));
}

TEST_CASE("A verbs rail sweep's page says so, with no ring, and keeps small figures readable") {
  json r = Fleet(4, {{2, 1}});
  r["transport"] = "verbs";
  r["ring"]["ran"] = false;
  r["fleetMedianGBps"] = 0.0047;  // Soft-RoCE under emulation
  auto page = FleetReportHtml(r, nullptr);
  REQUIRE(page);
  CHECK_THAT(*page, Catch::Contains("rail sweep (RDMA writes, no NCCL)"));
  CHECK_THAT(*page, Catch::Contains("fleet median pair RDMA write 0.0047 GB/s"));
  CHECK_THAT(*page, !Catch::Contains("ring busbw"));
  CHECK(Marked(*page) == std::set<std::pair<std::string, std::string>>{{"node-3", "2"}});
}

TEST_CASE("A whole slow node marks its row, one rail slow everywhere marks the column") {
  auto node = FleetReportHtml(Fleet(4, {{1, 0}, {1, 1}}), nullptr);
  REQUIRE(node);
  CHECK(Marked(*node) ==
        std::set<std::pair<std::string, std::string>>{{"node-2", "1"}, {"node-2", "2"}});
  auto rail = FleetReportHtml(Fleet(4, {{0, 1}, {1, 1}, {2, 1}, {3, 1}}), nullptr);
  REQUIRE(rail);
  auto marked = Marked(*rail);
  CHECK(marked.size() == 4);
  for (const auto& [n, r] : marked) CHECK(r == "2");
}

TEST_CASE("Names are escaped, a baseline adds each cell's change, non-reports are refused") {
  json report = Fleet(2, {}, "<img src=x>");
  auto page = FleetReportHtml(report, nullptr);
  REQUIRE(page);
  CHECK_THAT(*page, !Catch::Contains("<img") && Catch::Contains("&lt;img src=x&gt;1"));
  json before = report;
  before["nodes"][0]["hcas"][0]["busbwGBps"] = 4.0;  // the same node and rail, twice as fast
  auto compared = FleetReportHtml(report, &before);
  REQUIRE(compared);
  CHECK_THAT(*compared, Catch::Contains("<span class=\"delta down\">-50% vs baseline</span>"));
  CHECK_THAT(*compared, Catch::Contains("&plusmn;0% vs baseline"));
  auto bad = FleetReportHtml(json{{"verdict", "pass"}}, nullptr);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
  json not_a_report = json::array();
  CHECK_FALSE(FleetReportHtml(report, &not_a_report));
}

TEST_CASE("A field of the wrong type is refused, naming it") {
  json report = Fleet(2, {});
  json bad = report;
  bad["nodes"][1]["hcas"][0]["rail"] = "1";
  auto r = FleetReportHtml(bad, nullptr);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("nodes[1].hcas[0].rail is string, not a number"));
  bad = report;
  bad["rounds"][0]["pairs"][0]["rails"][1]["ok"] = "yes";
  r = FleetReportHtml(bad, nullptr);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(),
             Catch::Contains("rounds[0].pairs[0].rails[1].ok is string, not a boolean"));
  bad = report;
  bad["culprits"] = json::array({json{{"node", "node-1"}, {"certain", 1}}});
  r = FleetReportHtml(bad, nullptr);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("culprits[0].certain is number"));
  json base = report;
  base["nodes"] = json::array({42});
  r = FleetReportHtml(report, &base);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(),
             Catch::Contains("the baseline: nodes[0] is number, not an object"));
}

TEST_CASE("A rail outside 1..64 or too many nodes is refused, naming it") {
  json report = Fleet(2, {});
  report["nodes"][0]["hcas"][1]["rail"] = 100000;
  auto r = FleetReportHtml(report, nullptr);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("nodes[0].hcas[1].rail is 100000"));
  json many = Fleet(2, {});
  for (size_t i = 0; i < kMaxNodes; ++i) many["nodes"].push_back(many["nodes"][0]);
  r = FleetReportHtml(many, nullptr);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("at most 10000"));
}

// The page of a report with `nodes` nodes on 8 rails and one rail named on every node, with a
// long explanation: its size.
size_t PageBytes(int nodes, size_t why_bytes) {
  json report = Fleet(2, {});
  json node = report["nodes"][0];
  node["hcas"] = json::array();
  for (int r = 1; r <= 8; ++r) {
    node["hcas"].push_back(
        {{"name", "mlx5_" + std::to_string(r - 1)}, {"rail", r}, {"busbwGBps", 2.0}});
  }
  report["nodes"] = json::array();
  for (int i = 0; i < nodes; ++i) {
    node["name"] = "node-" + std::to_string(i);
    report["nodes"].push_back(node);
  }
  report["culprits"] = json::array(
      {json{{"rail", 3}, {"certain", true}, {"why", std::string(why_bytes, 'w')}},
       json{{"node", "node-1"}, {"certain", true}, {"why", std::string(why_bytes, 'v')}}});
  auto page = FleetReportHtml(report, nullptr);
  REQUIRE(page);
  return page->size();
}

TEST_CASE(
    "The page grows linearly with the report: a rail's culprit is not copied into every row") {
  // Twice the nodes: about twice the page (not four times); a 20 KB explanation costs its own
  // size a few times (the list, one row of 8 cells at most 400 characters each), not nodes x it.
  size_t small = PageBytes(100, 100);
  size_t large = PageBytes(200, 100);
  CHECK(large < small * 21 / 10);
  size_t wordy = PageBytes(200, 20000);
  INFO(small << " " << large << " " << wordy);
  CHECK(wordy - large < 3 * 20000 + 8 * 400 + 1000);
}

}  // namespace
}  // namespace kuberdma::validator
