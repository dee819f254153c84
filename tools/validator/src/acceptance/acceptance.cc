// SPDX-License-Identifier: Apache-2.0
// Fleet acceptance logic: pair rounds, localisation, thresholds, baselines, the report.
#include "kuberdma/validator/acceptance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "../format.h"

namespace kuberdma::validator::acceptance {

using nlohmann::json;

namespace {

std::string NameOf(const std::map<int, NodeInfo>& nodes, int rank) {
  auto it = nodes.find(rank);
  return it == nodes.end() || it->second.name.empty() ? "node " + std::to_string(rank)
                                                      : it->second.name;
}

std::string HcaOf(const std::map<int, NodeInfo>& nodes, int rank, int rail) {
  auto it = nodes.find(rank);
  if (it == nodes.end() || rail < 0 || static_cast<size_t>(rail) >= it->second.hcas.size())
    return "";
  return it->second.hcas[static_cast<size_t>(rail)].name;
}

double RateOf(const std::map<int, NodeInfo>& nodes, int rank, int rail) {
  auto it = nodes.find(rank);
  if (it == nodes.end() || rail < 0 || static_cast<size_t>(rail) >= it->second.hcas.size())
    return 0;
  return it->second.hcas[static_cast<size_t>(rail)].rate_gbps;
}

bool IsSlow(const RailMeasurement& m, const Localisation& loc, const std::map<int, NodeInfo>& nodes,
            const Thresholds& t) {
  if (!m.ok) return true;
  auto thr = loc.rail_threshold_gbps.find(m.rail);
  if (thr != loc.rail_threshold_gbps.end() && m.busbw_gbps < thr->second) return true;
  double rate = std::min(RateOf(nodes, m.pair.a, m.rail), RateOf(nodes, m.pair.b, m.rail));
  return t.min_link_fraction > 0 && rate > 0 && m.busbw_gbps < t.min_link_fraction * rate / 8;
}

// The figure rails are compared with: the median of the rail medians (the best rail's with two
// rails or fewer, where a median of two is their mean), and the spread of every measurement.
std::pair<double, double> RailReference(const std::map<int, std::vector<double>>& by_rail,
                                        const std::map<int, double>& medians) {
  std::vector<double> meds;
  std::vector<double> all;
  for (const auto& [rail, med] : medians) meds.push_back(med);
  for (const auto& [rail, v] : by_rail) all.insert(all.end(), v.begin(), v.end());
  double ref = meds.size() >= 3 ? *Median(meds) : *std::max_element(meds.begin(), meds.end());
  auto med_all = Median(all);
  return {ref, med_all ? Spread(all, *med_all) : 0};
}

// The reference figures: rail medians; rails slow on every node (measured across at least three
// nodes, every measurement below the threshold of the rails' reference); the pooled median and
// spread of the other rails (with fewer than three nodes, the rails' reference and no spread: one
// pair per round says nothing about the fleet); and each rail's threshold (a slow rail's from its
// own median).
void References(const std::vector<RailMeasurement>& m, const Thresholds& t, Localisation& loc) {
  std::map<int, std::vector<double>> by_rail;
  std::map<int, std::set<int>> rail_nodes;
  std::set<int> nodes;
  for (const auto& x : m) {
    if (!x.ok) continue;
    by_rail[x.rail].push_back(x.busbw_gbps);
    rail_nodes[x.rail].insert({x.pair.a, x.pair.b});
    nodes.insert({x.pair.a, x.pair.b});
  }
  if (by_rail.empty()) return;
  for (const auto& [rail, v] : by_rail) loc.rail_median_gbps[rail] = *Median(v);
  auto [ref, spread_all] = RailReference(by_rail, loc.rail_median_gbps);
  std::vector<double> pooled;
  double slow_below = SlowThreshold(ref, spread_all, t);
  for (const auto& [rail, v] : by_rail) {
    // Every pair slow on it, across three nodes or more: no one node explains that.
    bool everywhere = rail_nodes[rail].size() >= 3 && by_rail.size() > 1 &&
                      std::all_of(v.begin(), v.end(), [&](double x) { return x < slow_below; });
    if (everywhere) {
      loc.slow_rails.push_back(rail);
    } else {
      pooled.insert(pooled.end(), v.begin(), v.end());
    }
  }
  loc.fleet_median_gbps = nodes.size() >= 3 ? Median(pooled).value_or(0) : ref;
  loc.spread_gbps = nodes.size() >= 3 ? Spread(pooled, loc.fleet_median_gbps) : 0;
  for (const auto& [rail, v] : by_rail) {
    bool slow_rail =
        std::find(loc.slow_rails.begin(), loc.slow_rails.end(), rail) != loc.slow_rails.end();
    double med = slow_rail ? loc.rail_median_gbps[rail] : loc.fleet_median_gbps;
    double spread = slow_rail ? Spread(v, med) : loc.spread_gbps;
    loc.rail_threshold_gbps[rail] = SlowThreshold(med, spread, t);
  }
}

struct RailStat {
  int total = 0;
  int slow = 0;
  std::vector<const RailMeasurement*> seen;
  std::vector<bool> seen_slow;  // whether each of `seen` was slow
};
using Stats = std::map<std::pair<int, int>, RailStat>;  // (node, rail)

std::string Why(const std::pair<int, int>& nk, const Stats& stats,
                const std::map<int, NodeInfo>& nodes, const Localisation& loc) {
  std::string out = "rail " + std::to_string(nk.second + 1);
  if (auto h = HcaOf(nodes, nk.first, nk.second); !h.empty()) out += " (" + h + ")";
  out += " measured";
  for (const RailMeasurement* m : stats.at(nk).seen) {
    int peer = m->pair.a == nk.first ? m->pair.b : m->pair.a;
    out += " " + (m->ok ? Gb(m->busbw_gbps) + " GB/s" : "a failure") + " with " +
           NameOf(nodes, peer) + " (round " + std::to_string(m->round + 1) + "),";
  }
  bool own =
      std::find(loc.slow_rails.begin(), loc.slow_rails.end(), nk.second) != loc.slow_rails.end();
  double median = own ? loc.rail_median_gbps.at(nk.second) : loc.fleet_median_gbps;
  auto thr = loc.rail_threshold_gbps.find(nk.second);
  return out + " against " + (own ? "its slow rail's median of " : "a fleet median of ") +
         Gb(median) + " GB/s" +
         (thr == loc.rail_threshold_gbps.end() ? "" : " (slow below " + Gb(thr->second) + ")");
}

void AddCulprit(Localisation& loc, const std::pair<int, int>& nk, bool certain, const Stats& stats,
                const std::map<int, NodeInfo>& nodes) {
  for (auto& c : loc.culprits) {
    if (c.node == nk.first && c.rail == nk.second) {
      c.certain = c.certain || certain;
      return;
    }
  }
  loc.culprits.push_back({.node = nk.first,
                          .rail = nk.second,
                          .hca = HcaOf(nodes, nk.first, nk.second),
                          .certain = certain,
                          .why = Why(nk, stats, nodes, loc)});
}

// A node whose every rail is a culprit is one culprit: the node (GPU, PCIe, host), not a rail.
void MergeWholeNodes(Localisation& loc, const std::map<int, NodeInfo>& nodes) {
  for (const auto& entry : nodes) {
    // Not a structured binding: the lambdas below capture it (clang 14, our lint, cannot).
    const int rank = entry.first;
    size_t rails = entry.second.hcas.size();
    size_t hit = 0;
    for (const auto& c : loc.culprits) hit += c.node == rank ? 1u : 0u;
    if (rails < 2 || hit < rails) continue;
    bool certain = std::all_of(loc.culprits.begin(), loc.culprits.end(),
                               [&](const Culprit& c) { return c.node != rank || c.certain; });
    loc.culprits.erase(std::remove_if(loc.culprits.begin(), loc.culprits.end(),
                                      [&](const Culprit& c) { return c.node == rank; }),
                       loc.culprits.end());
    char median[32];
    std::snprintf(median, sizeof median, "%.2f", loc.fleet_median_gbps);
    loc.culprits.push_back({.node = rank,
                            .rail = -1,
                            .certain = certain,
                            .why = "every rail of it was slow (fleet median " +
                                   std::string(median) +
                                   " GB/s) against partners that were fast elsewhere"});
  }
}

}  // namespace

std::optional<double> Median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Round PairRound(const std::vector<int>& nodes, int r) {
  std::vector<int> list = nodes;
  if (list.size() % 2 == 1) list.push_back(-1);  // a bye
  size_t n = list.size();
  Round out;
  if (n < 2) return out;
  std::vector<int> at(n);
  at[0] = list[0];
  for (size_t i = 1; i < n; ++i) {
    at[i] = list[1 + (i - 1 + static_cast<size_t>(r)) % (n - 1)];
  }
  for (size_t i = 0; i < n / 2; ++i) {
    int a = at[i];
    int b = at[n - 1 - i];
    if (a < 0 || b < 0) continue;
    out.push_back({std::min(a, b), std::max(a, b)});
  }
  return out;
}

double Spread(const std::vector<double>& v, double median) {
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::abs(x - median));
  return 1.4826 * Median(dev).value_or(0);
}

namespace {

// (node, rail) slow in exactly half of the measurements no certain culprit explains: one more
// measurement would decide it.
void FindUndecided(const Stats& stats, Localisation& loc) {
  auto culprit = [&](int n, int rail) {
    return std::any_of(loc.culprits.begin(), loc.culprits.end(), [&](const Culprit& c) {
      return c.certain && (c.node == n || c.node < 0) && (c.rail == rail || c.rail < 0);
    });
  };
  for (const auto& [nk, st] : stats) {
    if (culprit(nk.first, nk.second)) continue;
    int total = 0;
    int slow = 0;
    for (size_t i = 0; i < st.seen.size(); ++i) {
      const RailMeasurement* m = st.seen[i];
      int peer = m->pair.a == nk.first ? m->pair.b : m->pair.a;
      if (culprit(peer, m->rail)) continue;
      ++total;
      slow += st.seen_slow[i] ? 1 : 0;
    }
    if (slow > 0 && 2 * slow == total) loc.undecided.push_back(nk);
  }
}

}  // namespace

int MinRounds(size_t nodes) {
  if (nodes < 2) return 0;
  if (nodes == 2) return 1;
  return nodes % 2 == 0 ? 2 : 3;
}

double SlowThreshold(double median, double spread, const Thresholds& t) {
  double adaptive = median - t.outlier_z * spread;
  double hi = t.min_fleet_fraction * median;
  double lo = std::min(t.floor_fraction * median, hi);  // a lower --min-fleet-fraction wins
  return std::clamp(adaptive, lo, hi);
}

namespace {

// A rail slow on every node: one culprit for the rail, not one per node.
void AddSlowRails(Localisation& loc) {
  for (int rail : loc.slow_rails) {
    double best = 0;
    for (const auto& [r, med] : loc.rail_median_gbps) best = std::max(best, med);
    loc.culprits.push_back(
        {.node = -1,
         .rail = rail,
         .certain = true,
         .why = "rail " + std::to_string(rail + 1) + " measured a median of " +
                Gb(loc.rail_median_gbps.at(rail)) + " GB/s on every pair, against " + Gb(best) +
                " GB/s on the best rail: the rail's switch or cabling, not one node"});
  }
}

}  // namespace

Localisation Localise(const std::vector<RailMeasurement>& m, const std::map<int, NodeInfo>& nodes,
                      const Thresholds& t) {
  Localisation loc;
  References(m, t, loc);
  Stats stats;
  for (const auto& x : m) {
    bool slow = IsSlow(x, loc, nodes, t);
    if (slow) loc.slow.push_back(x);
    for (int n : {x.pair.a, x.pair.b}) {
      auto& s = stats[{n, x.rail}];
      ++s.total;
      s.slow += slow ? 1 : 0;
      s.seen.push_back(&x);
      s.seen_slow.push_back(slow);
    }
  }
  // Slow in most of its measurements (all of two, two of three, ...): one noisy figure neither
  // makes a culprit nor hides one.
  auto candidate = [&](int n, int rail) {
    const auto& s = stats[{n, rail}];
    return s.total > 0 && 2 * s.slow > s.total;
  };
  for (const auto& x : loc.slow) {
    bool a = candidate(x.pair.a, x.rail);
    bool b = candidate(x.pair.b, x.rail);
    if (a != b) AddCulprit(loc, {a ? x.pair.a : x.pair.b, x.rail}, true, stats, nodes);
    if (a && b) {
      loc.ambiguous = true;  // never measured apart yet: either could be it
      AddCulprit(loc, {x.pair.a, x.rail}, false, stats, nodes);
      AddCulprit(loc, {x.pair.b, x.rail}, false, stats, nodes);
    }
  }
  MergeWholeNodes(loc, nodes);
  AddSlowRails(loc);
  FindUndecided(stats, loc);
  return loc;
}

bool Settled(const Localisation& loc) {
  if (loc.slow.empty()) return true;
  if (loc.ambiguous) return false;
  return loc.undecided.empty() && std::all_of(loc.culprits.begin(), loc.culprits.end(),
                                              [](const Culprit& c) { return c.certain; });
}

bool AnotherRound(int done, size_t nodes, int max_rounds, const Localisation& loc) {
  int least = MinRounds(nodes);
  if (done >= std::max(least, std::min(max_rounds, kMaxRounds))) return false;
  return done < least || !Settled(loc);
}

bool RingNeedsPairs(const RingResult& ring, const std::map<int, NodeInfo>& nodes,
                    const Thresholds& t, std::optional<double> baseline_ring_gbps) {
  if (!ring.ok) return true;
  if (t.min_busbw_gbps > 0 && ring.busbw_gbps < t.min_busbw_gbps) return true;
  for (const auto& [rank, info] : nodes) {
    double rate = 0;
    for (const auto& h : info.hcas) rate += h.rate_gbps;
    double node_gbps = ring.busbw_gbps * std::max(1, ring.local_ranks);
    if (t.min_link_fraction > 0 && rate > 0 && node_gbps < t.min_link_fraction * rate / 8) {
      return true;
    }
    auto tr = ring.traffic.find(rank);
    if (tr == ring.traffic.end() || info.hcas.empty()) continue;
    double fair = t.min_share / static_cast<double>(info.hcas.size());
    for (const auto& h : info.hcas) {
      auto it = tr->second.find(h.name);
      if (it == tr->second.end() || it->second.share < fair) return true;
    }
  }
  return baseline_ring_gbps && ring.busbw_gbps < (1 - t.baseline_tolerance) * *baseline_ring_gbps;
}

Result<void> BaselineComparable(const Inputs& in) {
  if (!in.baseline) return Fail(ErrorCode::kNotFound, "no baseline");
  const Baseline& b = *in.baseline;
  bool same =
      b.collective == in.collective && (b.bytes == 0 || in.bytes == 0 || b.bytes == in.bytes);
  if (!same) {
    return Fail(ErrorCode::kInvalidArgument,
                "the baseline of " + b.date + " measured " + b.collective +
                    (b.bytes > 0 ? " at " + std::to_string(b.bytes) + " bytes" : "") +
                    ", this run " + in.collective + " at " + std::to_string(in.bytes) +
                    " bytes: not compared");
  }
  return {};
}

std::optional<Baseline> ParseBaseline(const json& report) {
  if (!report.is_object() || report.value("kind", "") != "kuberdma-acceptance") return std::nullopt;
  Baseline b;
  b.date = report.value("date", "");
  if (report.contains("collective") && report["collective"].is_object()) {
    b.collective = report["collective"].value("name", "all_reduce");
    b.bytes = report["collective"].value("bytes", uint64_t{0});
  }
  if (report.contains("ring") && report["ring"].contains("busbwGBps") &&
      report["ring"]["busbwGBps"].is_number()) {
    b.ring_gbps = report["ring"]["busbwGBps"].get<double>();
  }
  for (const auto& n : report.value("nodes", json::array())) {
    std::string name = n.value("name", "");
    if (n.contains("busbwGBps") && n["busbwGBps"].is_number()) b.nodes[name] = n["busbwGBps"];
    for (const auto& h : n.value("hcas", json::array())) {
      if (h.contains("busbwGBps") && h["busbwGBps"].is_number()) {
        b.hcas[name][h.value("name", "")] = h["busbwGBps"];
      }
    }
  }
  return b;
}

std::vector<std::pair<std::string, std::string>> SlowHcas(const FleetReport& rep, int rank) {
  std::vector<std::pair<std::string, std::string>> out;
  auto node = rep.in.nodes.find(rank);
  if (node == rep.in.nodes.end()) return out;
  const auto& hcas = node->second.hcas;
  auto add = [&](size_t rail, const std::string& why) {
    if (rail >= hcas.size()) return;
    for (const auto& [h, w] : out) {
      if (h == hcas[rail].name) return;
    }
    out.emplace_back(hcas[rail].name, why);
  };
  for (const auto& c : rep.localisation.culprits) {
    // Only what the pass is sure of: an ambiguous pair's two suspects are not both tainted.
    if ((c.node != rank && c.node != -1) || !c.certain) continue;
    std::string why = c.node == -1 ? "slow on rail " + std::to_string(c.rail) + " fleet-wide"
                                   : c.why.substr(0, 120);
    if (c.rail >= 0) {
      add(static_cast<size_t>(c.rail), why);
    } else {
      for (size_t r = 0; r < hcas.size(); ++r) add(r, why);
    }
  }
  return out;
}

}  // namespace kuberdma::validator::acceptance
