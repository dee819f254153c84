// SPDX-License-Identifier: Apache-2.0
// Fleet acceptance logic on synthetic per-node results: pairing rounds, localisation of a slow
// rail or node, thresholds (absolute, link rate, fleet median, shares), baselines, the report.
#include "kuberdma/validator/acceptance.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

namespace kuberdma::validator::acceptance {
namespace {

std::map<int, NodeInfo> Fleet(int k, int rails) {
  std::map<int, NodeInfo> out;
  for (int n = 0; n < k; ++n) {
    NodeInfo info{.rank = n,
                  .name = "node-" + std::to_string(n + 1),
                  .address = "10.10.1." + std::to_string(n + 1)};
    for (int r = 0; r < rails; ++r)
      info.hcas.push_back({.name = "net" + std::to_string(r + 1), .rate_gbps = 0});
    out[n] = info;
  }
  return out;
}

std::vector<int> Ranks(int k) {
  std::vector<int> v;
  for (int i = 0; i < k; ++i) v.push_back(i);
  return v;
}

// Measurements of rounds 0..rounds-1: 2 GB/s per rail, 0.2 where either end's rail is degraded.
std::vector<RailMeasurement> Measure(int k, int rails, int rounds,
                                     const std::set<std::pair<int, int>>& degraded) {
  std::vector<RailMeasurement> out;
  for (int r = 0; r < rounds; ++r) {
    for (const Pair& p : PairRound(Ranks(k), r)) {
      for (int rail = 0; rail < rails; ++rail) {
        bool slow = degraded.count({p.a, rail}) > 0 || degraded.count({p.b, rail}) > 0;
        out.push_back(
            {.round = r, .pair = p, .rail = rail, .busbw_gbps = slow ? 0.2 : 2.0, .ok = true});
      }
    }
  }
  return out;
}

TEST_CASE("Pair rounds are disjoint and, over K-1 rounds, pair every two nodes exactly once") {
  for (int k : {2, 3, 4, 5, 8}) {
    INFO("K = " << k);
    std::map<std::pair<int, int>, int> met;
    int rounds = k % 2 == 0 ? k - 1 : k;
    for (int r = 0; r < rounds; ++r) {
      std::set<int> busy;
      Round round = PairRound(Ranks(k), r);
      CHECK(round.size() == static_cast<size_t>(k / 2));
      for (const Pair& p : round) {
        CHECK(p.a < p.b);
        CHECK(busy.insert(p.a).second);
        CHECK(busy.insert(p.b).second);
        ++met[{p.a, p.b}];
      }
    }
    CHECK(met.size() == static_cast<size_t>(k * (k - 1) / 2));
    for (const auto& [pair, times] : met) CHECK(times == 1);
  }
  CHECK(PairRound({7}, 0).empty());
}

TEST_CASE("The HCAs a pass names for DRA taints: only certain culprits, only the node's own") {
  auto nodes = Fleet(4, 2);
  FleetReport rep;
  rep.in.nodes = nodes;
  rep.localisation = Localise(Measure(4, 2, 1, {{2, 1}}), nodes, Thresholds{});
  CHECK(SlowHcas(rep, 2).empty());  // ambiguous after one round: nobody tainted on a guess
  rep.localisation = Localise(Measure(4, 2, 2, {{2, 1}}), nodes, Thresholds{});
  auto slow = SlowHcas(rep, 2);
  REQUIRE(slow.size() == 1);
  CHECK(slow[0].first == "net2");
  CHECK_THAT(slow[0].second, Catch::Contains("rail 2 (net2)"));
  CHECK(SlowHcas(rep, 1).empty());
  CHECK(SlowHcas(rep, 9).empty());  // no such node
}

TEST_CASE("One slow rail is ambiguous after one round and named for certain after two") {
  auto nodes = Fleet(4, 2);
  Thresholds t;
  auto one = Localise(Measure(4, 2, 1, {{2, 1}}), nodes, t);
  CHECK(one.ambiguous);
  CHECK(one.fleet_median_gbps == Approx(2.0));
  REQUIRE(one.culprits.size() == 2);  // node 2 and its first partner, either could be it
  CHECK_FALSE(one.culprits[0].certain);
  auto two = Localise(Measure(4, 2, 2, {{2, 1}}), nodes, t);
  CHECK_FALSE(two.ambiguous);
  REQUIRE(two.culprits.size() == 1);
  const Culprit& c = two.culprits[0];
  CHECK(c.node == 2);
  CHECK(c.rail == 1);
  CHECK(c.hca == "net2");
  CHECK(c.certain);
  CHECK_THAT(c.why, Catch::Contains("rail 2 (net2)") && Catch::Contains("0.20 GB/s") &&
                        Catch::Contains("fleet median of 2.00"));
}

TEST_CASE(
    "A node slow on every rail is one culprit, the node, a slow path between two healthy "
    "nodes names neither") {
  auto nodes = Fleet(4, 2);
  auto whole = Localise(Measure(4, 2, 2, {{1, 0}, {1, 1}}), nodes, Thresholds{});
  REQUIRE(whole.culprits.size() == 1);
  CHECK(whole.culprits[0].node == 1);
  CHECK(whole.culprits[0].rail == -1);
  auto m = Measure(4, 2, 2, {});
  m[0].busbw_gbps = 0.1;  // round 0, first pair, rail 0 only
  auto path = Localise(m, nodes, Thresholds{});
  CHECK(path.slow.size() == 1);
  CHECK(path.culprits.empty());
  CHECK_FALSE(path.ambiguous);
}

TEST_CASE("A failed or link-rate-starved measurement is slow even when the median agrees") {
  auto nodes = Fleet(2, 1);
  nodes[0].hcas[0].rate_gbps = nodes[1].hcas[0].rate_gbps = 400;
  std::vector<RailMeasurement> m = {
      {.round = 0, .pair = {0, 1}, .rail = 0, .busbw_gbps = 10, .ok = true}};
  Thresholds t{.min_link_fraction = 0.5};  // 400 Gb/s -> 50 GB/s; 0.5 of it is 25
  CHECK(Localise(m, nodes, t).slow.size() == 1);
  m[0].ok = false;
  CHECK(Localise(m, nodes, Thresholds{}).slow.size() == 1);
}

TEST_CASE(
    "The ring calls for pairs when it failed, is slow, an HCA carried too little, or it "
    "regressed") {
  auto nodes = Fleet(2, 2);
  RingResult ring{.ran = true, .ok = true, .busbw_gbps = 4};
  for (int n : {0, 1}) ring.traffic[n] = {{"net1", {100, 0.5}}, {"net2", {100, 0.5}}};
  CHECK_FALSE(RingNeedsPairs(ring, nodes, Thresholds{}, std::nullopt));
  CHECK(RingNeedsPairs(ring, nodes, Thresholds{.min_busbw_gbps = 5}, std::nullopt));
  CHECK(RingNeedsPairs(ring, nodes, Thresholds{}, 5.0));  // 4 < 0.9 * 5
  CHECK_FALSE(RingNeedsPairs(ring, nodes, Thresholds{}, 4.2));
  ring.traffic[1]["net2"].share = 0.1;  // below half of an even split (0.25)
  CHECK(RingNeedsPairs(ring, nodes, Thresholds{}, std::nullopt));
  ring.ok = false;
  CHECK(RingNeedsPairs(RingResult{}, nodes, Thresholds{}, std::nullopt));
}

TEST_CASE("The ring's line rate counts every rank of a node: each hop crosses one of its NICs") {
  auto nodes = Fleet(2, 2);
  for (auto& [rank, n] : nodes) n.hcas[0].rate_gbps = n.hcas[1].rate_gbps = 400;  // 100 GB/s
  RingResult ring{.ran = true, .ok = true, .busbw_gbps = 40, .local_ranks = 1};
  for (int n : {0, 1}) ring.traffic[n] = {{"net1", {100, 0.5}}, {"net2", {100, 0.5}}};
  Thresholds t{.min_link_fraction = 0.5};
  CHECK(RingNeedsPairs(ring, nodes, t, std::nullopt));  // one rank: 40 of 100 GB/s
  ring.local_ranks = 2;                                 // two ranks: 80 of 100
  CHECK_FALSE(RingNeedsPairs(ring, nodes, t, std::nullopt));
}

Inputs Run(int k, int rails, int rounds, const std::set<std::pair<int, int>>& degraded) {
  Inputs in{.nodes = Fleet(k, rails), .date = "2026-12-01T12:00:00Z", .transport = "socket"};
  in.ring = {.ran = true, .ok = true, .busbw_gbps = 1.5, .algbw_gbps = 1, .ranks = k};
  for (int n = 0; n < k; ++n) {
    for (int r = 0; r < rails; ++r)
      in.ring.traffic[n]["net" + std::to_string(r + 1)] = {1000, 1.0 / rails};
  }
  for (int r = 0; r < rounds; ++r) in.rounds.push_back(PairRound(Ranks(k), r));
  in.measurements = Measure(k, rails, rounds, degraded);
  return in;
}

TEST_CASE("Each HCA's median is reported against its line rate, and unknown rates are said once") {
  Inputs in = Run(4, 2, 2, {});
  in.thresholds.min_link_fraction = 0.5;
  for (auto& [rank, n] : in.nodes) n.hcas[0].rate_gbps = 32;  // 4 GB/s: 2 GB/s is 0.50
  in.nodes[3].hcas[0].rate_gbps = 40;                         // 5 GB/s: 2 GB/s is 0.40
  FleetReport rep = Evaluate(in);
  CHECK(rep.nodes.at(3).verdict == "fail");
  CHECK_THAT(rep.nodes.at(3).problems.back(),
             Catch::Equals("net1: busbw 2.00 GB/s is 0.40 of its 40 Gb/s line rate (floor 0.50)"));
  for (int n = 0; n < 3; ++n) CHECK(rep.nodes.at(n).verdict == "pass");
  auto doc = rep.ToJson();
  CHECK(doc["nodes"][0]["hcas"][0]["lineRateFraction"] == Approx(0.5));
  CHECK_FALSE(doc["nodes"][0]["hcas"][1].contains("lineRateFraction"));
  REQUIRE(rep.notes.size() == 1);
  CHECK_THAT(rep.notes[0], Catch::StartsWith("line-rate floor not applied to 4 HCA(s) with no "
                                             "known port rate"));
  CHECK_THAT(rep.Table(), Catch::Contains("net1 2.00 GB/s (0.50 of line rate)"));
}

TEST_CASE("Three nodes, one rail cut on one and another rail slow on another: both named") {
  // The VM tier's fleet (tests/vm/guest-fleet.sh): node 3's rail 1 fails, node 2's rail 2 is
  // policed; each rail is still fast between the other two.
  Inputs in = Run(3, 2, 3, {{1, 1}});
  for (auto& m : in.measurements) {
    if (m.rail == 0 && (m.pair.a == 2 || m.pair.b == 2)) {
      m.ok = false;
      m.busbw_gbps = 0;
      m.error = "the peer's writes did not finish within 60 s";
    }
  }
  FleetReport rep = Evaluate(in);
  INFO(rep.Table());
  REQUIRE(rep.localisation.culprits.size() == 2);
  std::set<std::pair<int, int>> named;
  for (const auto& c : rep.localisation.culprits) {
    named.insert({c.node, c.rail});
    CHECK(c.certain);
  }
  CHECK(named == std::set<std::pair<int, int>>{{1, 1}, {2, 0}});
  CHECK(rep.nodes.at(0).verdict == "pass");
}

TEST_CASE("What a node found in its own ring run fails it, by name (NCCL left an HCA out)") {
  Inputs in = Run(4, 2, 2, {});
  in.nodes[1].problems.push_back("net2: NCCL did not use it in the ring");
  FleetReport rep = Evaluate(in);
  CHECK(rep.nodes.at(1).verdict == "fail");
  CHECK(rep.nodes.at(1).problems.front() == "net2: NCCL did not use it in the ring");
  CHECK(rep.nodes.at(0).verdict == "pass");
  CHECK(rep.verdict == "fail");
}

// Node `k`'s rails as LLDP heard them: rail r on "leaf-r", or on `leaf` for rail `wrong`.
std::vector<rails::RailNeighbor> Cabled(int node, int rails, int wrong = 0, int leaf = 0) {
  std::vector<rails::RailNeighbor> out;
  for (int r = 1; r <= rails; ++r) {
    std::string sw = "leaf-" + std::to_string(r == wrong ? leaf : r);
    out.push_back(
        {.rail = r,
         .hca = "net" + std::to_string(r),
         .netdev = "net" + std::to_string(r),
         .neighbor = lldp::Neighbor{
             .chassis_id = sw, .port_id = "swp" + std::to_string(node), .system_name = sw}});
  }
  return out;
}

TEST_CASE("A rail on another rail's leaf fails its node, named with the evidence, nothing else") {
  Inputs in = Run(4, 2, 2, {});
  for (auto& [rank, n] : in.nodes) n.cabling = Cabled(rank + 1, 2, rank == 1 ? 1 : 0, 2);
  FleetReport rep = Evaluate(in);
  CHECK(rep.verdict == "fail");
  CHECK(rep.nodes.at(1).verdict == "fail");
  for (int n : {0, 2, 3}) CHECK(rep.nodes.at(n).verdict == "pass");
  REQUIRE(rep.cabling.size() == 1);
  CHECK_THAT(rep.nodes.at(1).problems.back(),
             Catch::Equals("cabling: node-2 rail 1 (net1) is cabled to leaf-2 (rail 2's switch), "
                           "not leaf-1"));
  auto doc = rep.ToJson();
  CHECK(doc["nodes"][1]["cabling"][0]["switch"] == "leaf-2");
  CHECK(doc["nodes"][1]["cabling"][0]["expected"] == "leaf-1");
  CHECK(doc["nodes"][1]["cabling"][0]["port"] == "swp2");
  CHECK_FALSE(doc["nodes"][1]["cabling"][1].contains("finding"));
  CHECK_FALSE(doc["nodes"][0]["cabling"][0].contains("finding"));
}

TEST_CASE("Cabling: a fleet without records is judged as before, one without a majority noted") {
  Inputs in = Run(2, 2, 1, {});
  CHECK(Evaluate(in).ToJson()["nodes"][0].contains("cabling") == false);
  // Two nodes that disagree on rail 1: no majority, so neither fails; each is noted.
  in.nodes[0].cabling = Cabled(1, 2);
  in.nodes[1].cabling = Cabled(2, 2, 1, 2);
  in.nodes[1].cabling_note = "";
  FleetReport rep = Evaluate(in);
  CHECK(rep.verdict == "pass");
  for (const auto& f : rep.cabling) CHECK_FALSE(f.certain);
  // A node whose device plugin recorded nothing says so, and is not failed for it.
  in.nodes[0].cabling.clear();
  in.nodes[0].cabling_note = "no cabling recorded in /run/kube-rdma/cabling";
  FleetReport quiet = Evaluate(in);
  CHECK(quiet.verdict == "pass");
  CHECK_THAT(quiet.ToJson()["notes"].dump(), Catch::Contains("node-1: no cabling recorded"));
}

TEST_CASE("The report fails the culprit's node and only it, naming node and HCA") {
  FleetReport rep = Evaluate(Run(4, 2, 2, {{2, 1}}));
  CHECK(rep.verdict == "fail");
  CHECK(rep.ExitCode() == 1);
  CHECK(rep.nodes.at(2).verdict == "fail");
  for (int n : {0, 1, 3}) CHECK(rep.nodes.at(n).verdict == "pass");
  CHECK(*rep.nodes.at(0).busbw_gbps == Approx(4.0));  // both rails of its pairs, per round
  CHECK(*rep.nodes.at(0).hca_busbw.at("net2") == Approx(2.0));
  CHECK_THAT(rep.Summary(), Catch::Contains("culprit node-3 net2 (rail 2)"));
  auto doc = rep.ToJson();
  CHECK(doc["kind"] == "kuberdma-acceptance");
  REQUIRE(doc["culprits"].size() == 1);
  CHECK(doc["culprits"][0]["node"] == "node-3");
  CHECK(doc["culprits"][0]["hca"] == "net2");
  CHECK(doc["rounds"].size() == 2);
  CHECK(doc["nodes"][2]["hcas"][1]["busbwGBps"] == Approx(0.2));
  CHECK(doc["nodes"][0]["hcas"][0]["share"] == Approx(0.5));
}

TEST_CASE(
    "Relative to the fleet: a node far below the median is flagged even without a "
    "baseline, a tight fleet is held closer with a higher fraction") {
  Inputs in = Run(8, 2, 2, {});
  for (auto& m : in.measurements) {
    if (m.pair.a == 7 || m.pair.b == 7) m.busbw_gbps = 1.9;  // 95% of the others: within 0.8
  }
  CHECK(Evaluate(in).verdict == "pass");
  in.thresholds.min_fleet_fraction = 0.97;  // a tight fleet (no spread) is held to 0.97
  FleetReport strict = Evaluate(in);
  CHECK(strict.nodes.at(7).verdict == "fail");
  REQUIRE_FALSE(strict.nodes.at(7).problems.empty());
  CHECK_THAT(strict.nodes.at(7).problems.front(), Catch::Contains("fleet median"));
  for (int n = 0; n < 7; ++n) CHECK(strict.nodes.at(n).verdict == "pass");
}

TEST_CASE("A run's report is the next run's baseline, drops beyond the tolerance are regressions") {
  FleetReport first = Evaluate(Run(4, 2, 1, {}));
  REQUIRE(first.verdict == "pass");
  auto baseline = ParseBaseline(first.ToJson());
  REQUIRE(baseline);
  CHECK(baseline->nodes.at("node-1") == Approx(4.0));
  CHECK(baseline->hcas.at("node-1").at("net2") == Approx(2.0));
  CHECK(*baseline->ring_gbps == Approx(1.5));
  Inputs later = Run(4, 2, 1, {});
  for (auto& m : later.measurements) m.busbw_gbps *= 0.85;  // 15% slower everywhere
  later.ring.busbw_gbps = 1.2;
  later.baseline = baseline;
  FleetReport second = Evaluate(later);
  CHECK(second.verdict == "fail");
  std::string all;
  for (const auto& p : second.problems) all += p + "\n";
  CHECK_THAT(all, Catch::Contains("regression: ring busbw 1.20 GB/s against 1.50 GB/s"));
  CHECK_THAT(all, Catch::Contains("node-2: regression: busbw 3.40 GB/s against 4.00 GB/s"));
  later.thresholds.baseline_tolerance = 0.25;
  CHECK(Evaluate(later).verdict == "pass");
  CHECK_FALSE(ParseBaseline(nlohmann::json{{"verdict", "pass"}}));
}

TEST_CASE("A baseline is compared only with a run of the same collective and size") {
  Inputs in = Run(4, 2, 1, {});
  in.collective = "all_gather";
  in.bytes = 1 << 30;
  FleetReport first = Evaluate(in);
  auto baseline = ParseBaseline(first.ToJson());
  REQUIRE(baseline);
  CHECK(baseline->collective == "all_gather");
  CHECK(baseline->bytes == (1u << 30));
  Inputs later = Run(4, 2, 1, {});
  for (auto& m : later.measurements) m.busbw_gbps *= 0.5;  // far slower, but another collective
  later.ring.busbw_gbps = 0.7;
  later.baseline = baseline;
  later.collective = "all_reduce";
  later.bytes = 1 << 30;
  FleetReport other = Evaluate(later);
  CHECK(other.verdict == "pass");
  REQUIRE(other.notes.size() == 1);
  CHECK_THAT(other.notes[0],
             Catch::Contains("measured all_gather") && Catch::Contains("not compared"));
  later.collective = "all_gather";  // like with like: the halving is a regression
  CHECK(Evaluate(later).verdict == "fail");
  later.bytes = 1 << 20;  // another size: not compared
  CHECK(Evaluate(later).verdict == "pass");
}

TEST_CASE("A node that never reached the coordinator fails, and says why") {
  Inputs in = Run(3, 1, 1, {});
  in.nodes[2].ok = false;
  in.nodes[2].problems = {"never connected to the coordinator at 10.10.1.1:29501"};
  FleetReport rep = Evaluate(in);
  CHECK(rep.nodes.at(2).verdict == "fail");
  CHECK_THAT(rep.problems.back(), Catch::Contains("node-3: did not take part: never connected"));
}

// A simulated fleet as the coordinator runs it (AnotherRound: MinRounds rounds, then more, up
// to kMaxRounds, until the slow measurements are explained). A pair's rail measures the slower
// end's factor of `base` (GB/s), times (1 + noise * a standard normal) from `seed`.
struct ModelFleet {
  int k = 4;
  int rails = 2;
  double base = 0.19;
  std::map<std::pair<int, int>, double> factor;  // (node, rail) -> fraction of full speed
  double noise = 0;
  unsigned seed = 1;

  double Value(const Pair& p, int rail, std::mt19937& rng) const {
    auto f = [&](int n) {
      auto it = factor.find({n, rail});
      return it == factor.end() ? 1.0 : it->second;
    };
    std::normal_distribution<double> z(0, 1);
    return base * std::min(f(p.a), f(p.b)) * std::max(0.05, 1 + noise * z(rng));
  }

  Inputs Run() const {
    Inputs in{.nodes = Fleet(k, rails), .date = "2026-12-01T12:00:00Z", .transport = "socket"};
    in.ring = {.ran = true, .ok = true, .busbw_gbps = base, .algbw_gbps = base, .ranks = k};
    std::mt19937 rng(seed);
    Localisation loc;
    for (int r = 0; AnotherRound(r, static_cast<size_t>(k), kMaxRounds, loc); ++r) {
      Round round = PairRound(Ranks(k), r);
      for (const Pair& p : round) {
        for (int rail = 0; rail < rails; ++rail) {
          in.measurements.push_back(
              {.round = r, .pair = p, .rail = rail, .busbw_gbps = Value(p, rail, rng), .ok = true});
        }
      }
      in.rounds.push_back(round);
      loc = Localise(in.measurements, in.nodes, in.thresholds);
    }
    return in;
  }
};

std::set<std::pair<int, int>> Culprits(const FleetReport& rep) {
  std::set<std::pair<int, int>> out;
  for (const auto& c : rep.localisation.culprits) {
    if (c.certain) out.insert({c.node, c.rail});
  }
  return out;
}

TEST_CASE("Every node meets at least two partners in MinRounds rounds, odd or even K (2..64)") {
  CHECK(MinRounds(1) == 0);
  CHECK(MinRounds(2) == 1);
  for (int k = 3; k <= 64; ++k) {
    INFO("K = " << k);
    std::map<int, std::set<int>> partners;
    for (int r = 0; r < MinRounds(static_cast<size_t>(k)); ++r) {
      for (const Pair& p : PairRound(Ranks(k), r)) {
        partners[p.a].insert(p.b);
        partners[p.b].insert(p.a);
      }
    }
    CHECK(static_cast<int>(partners.size()) == k);
    for (const auto& [n, ps] : partners) CHECK(ps.size() >= 2);
  }
}

TEST_CASE("The issue's odd fleet: 5 x 2, node 1's rail 2 slow, is named whoever has the bye") {
  // Round 1 gives node 1 (rank 0) or another node the bye; MinRounds measures everyone twice.
  for (int slow_node = 0; slow_node < 5; ++slow_node) {
    ModelFleet f{.k = 5, .rails = 2, .base = 0.85, .factor = {{{slow_node, 1}, 0.28}}};
    FleetReport rep = Evaluate(f.Run());
    INFO("slow node " << slow_node << ": " << rep.Table());
    CHECK(Culprits(rep) == std::set<std::pair<int, int>>{{slow_node, 1}});
    CHECK(rep.nodes.at(slow_node).verdict == "fail");
    CHECK(rep.nodes.at(slow_node).busbw_from == "pairs");  // never the ring's figure
    for (int n = 0; n < 5; ++n) {
      if (n != slow_node) CHECK(rep.nodes.at(n).verdict == "pass");
    }
  }
}

TEST_CASE("The issue's half-speed rail: 6 x 3, node 4's rail 3 at 0.10 of 0.19 GB/s, is named") {
  ModelFleet f{.k = 6, .rails = 3, .base = 0.19, .factor = {{{3, 2}, 0.10 / 0.19}}, .noise = 0.03};
  for (unsigned seed = 1; seed <= 20; ++seed) {
    f.seed = seed;
    FleetReport rep = Evaluate(f.Run());
    INFO("seed " << seed << ": " << rep.Table());
    CHECK(rep.verdict == "fail");
    CHECK(Culprits(rep) == std::set<std::pair<int, int>>{{3, 2}});
    CHECK_THAT(rep.Summary(), Catch::Contains("culprit node-4 net3 (rail 3)"));
  }
}

TEST_CASE("Odd and even fleets from 2 to 64: one half-speed rail is named, node and rail") {
  for (int k = 3; k <= 64; k += (k < 12 ? 1 : 7)) {
    for (int node : {0, k / 2, k - 1}) {  // rank 0's node, a middle one, the last (bye-prone)
      ModelFleet f{.k = k,
                   .rails = 2,
                   .factor = {{{node, 1}, 0.5}},
                   .noise = 0.02,
                   .seed = static_cast<unsigned>(k * 100 + node)};
      FleetReport rep = Evaluate(f.Run());
      INFO("K " << k << ", node " << node << ": " << rep.Summary());
      CHECK(Culprits(rep) == std::set<std::pair<int, int>>{{node, 1}});
    }
  }
  // Two nodes: one pair is all there is; the rail is slow, which end cannot be told.
  ModelFleet two{.k = 2, .rails = 2, .factor = {{{1, 1}, 0.5}}};
  FleetReport rep = Evaluate(two.Run());
  CHECK(rep.verdict == "fail");
  CHECK(rep.localisation.ambiguous);
}

TEST_CASE("Two faults on different nodes at once are both named") {
  ModelFleet f{.k = 8, .rails = 4, .factor = {{{1, 0}, 0.5}, {{6, 3}, 0.4}}, .noise = 0.02};
  FleetReport rep = Evaluate(f.Run());
  INFO(rep.Table());
  CHECK(Culprits(rep) == std::set<std::pair<int, int>>{{1, 0}, {6, 3}});
  for (int n : {0, 2, 3, 4, 5, 7}) CHECK(rep.nodes.at(n).verdict == "pass");
}

TEST_CASE("One rail slow on every node (a leaf switch) names the rail, not every node") {
  ModelFleet f{.k = 6, .rails = 4, .noise = 0.02};
  for (int n = 0; n < 6; ++n) f.factor[{n, 2}] = 0.5;
  FleetReport rep = Evaluate(f.Run());
  INFO(rep.Table());
  CHECK(Culprits(rep) == std::set<std::pair<int, int>>{{-1, 2}});
  CHECK(rep.localisation.slow_rails == std::vector<int>{2});
  for (int n = 0; n < 6; ++n) CHECK(rep.nodes.at(n).verdict == "pass");
  CHECK(rep.verdict == "fail");
  CHECK_THAT(rep.Summary(), Catch::Contains("culprit every node (rail 3)"));
  CHECK_THAT(rep.problems.front(), Catch::Contains("switch or cabling"));
  // And a node slow on that rail too is still found, against the rail's own median.
  f.factor[{4, 2}] = 0.2;
  FleetReport both = Evaluate(f.Run());
  INFO(both.Table());
  CHECK(Culprits(both) == std::set<std::pair<int, int>>{{-1, 2}, {4, 2}});
}

TEST_CASE("A whole node slow (PCIe, NUMA) is one culprit, the node") {
  ModelFleet f{.k = 7, .rails = 4, .noise = 0.02};
  for (int r = 0; r < 4; ++r) f.factor[{5, r}] = 0.6;
  FleetReport rep = Evaluate(f.Run());
  INFO(rep.Table());
  CHECK(Culprits(rep) == std::set<std::pair<int, int>>{{5, -1}});
  CHECK_THAT(rep.Summary(), Catch::Contains("culprit node-6 (every rail)"));
}

TEST_CASE("Noisy healthy fleets name no culprit (false positives over 2000 seeded fleets)") {
  // 5% and 10% run-to-run noise (per measurement, after the repeat median), K from 3 to 32.
  int fleets = 0, false_culprits = 0, failed = 0;
  std::string bad;
  for (double noise : {0.05, 0.10}) {
    for (int k : {3, 4, 5, 8, 9, 16, 17, 32}) {
      for (unsigned seed = 0; seed < 125; ++seed) {
        ModelFleet f{.k = k, .rails = 4, .noise = noise, .seed = seed * 7919u + unsigned(k)};
        FleetReport rep = Evaluate(f.Run());
        ++fleets;
        false_culprits += rep.localisation.culprits.empty() ? 0 : 1;
        if (!rep.localisation.culprits.empty())
          bad += "noise " + std::to_string(noise) + " K " + std::to_string(k) + ": " + rep.Table();
        failed += rep.verdict == "pass" ? 0 : 1;
      }
    }
  }
  INFO(false_culprits << " of " << fleets << " healthy fleets named a culprit, " << failed
                      << " failed");
  CHECK(fleets == 2000);
  INFO(bad);
  CHECK(false_culprits == 0);
  CHECK(failed == 0);
}

TEST_CASE("Half speed is slow however noisy the fleet, the threshold follows the spread") {
  Thresholds t;
  CHECK(SlowThreshold(1.0, 0.0, t) == Approx(0.8));   // tight: 0.8 of the median
  CHECK(SlowThreshold(1.0, 0.1, t) == Approx(0.65));  // 10% spread: 3.5 spreads below
  CHECK(SlowThreshold(1.0, 0.5, t) == Approx(0.6));   // however noisy: never below 0.6
  CHECK(Spread({1, 1, 1, 1, 10}, 1) == Approx(0));    // one wild figure does not widen it
  ModelFleet f{.k = 9, .rails = 2, .factor = {{{8, 0}, 0.5}}, .noise = 0.12};
  for (unsigned seed = 1; seed <= 10; ++seed) {
    f.seed = seed;
    FleetReport rep = Evaluate(f.Run());
    INFO("seed " << seed << ": " << rep.Table());
    CHECK(Culprits(rep) == std::set<std::pair<int, int>>{{8, 0}});
  }
}

}  // namespace
}  // namespace kuberdma::validator::acceptance
