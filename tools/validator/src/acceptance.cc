// SPDX-License-Identifier: Apache-2.0
// Fleet acceptance logic: pair rounds, localisation, thresholds, baselines, the report.
#include "kuberdma/validator/acceptance.h"

#include <algorithm>
#include <cstdio>

#include "format.h"

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

bool IsSlow(const RailMeasurement& m, double median, const std::map<int, NodeInfo>& nodes,
            const Thresholds& t) {
  if (!m.ok) return true;
  if (m.busbw_gbps < t.min_fleet_fraction * median) return true;
  double rate = std::min(RateOf(nodes, m.pair.a, m.rail), RateOf(nodes, m.pair.b, m.rail));
  return t.min_link_fraction > 0 && rate > 0 && m.busbw_gbps < t.min_link_fraction * rate / 8;
}

struct RailStat {
  int total = 0;
  int slow = 0;
  std::vector<const RailMeasurement*> seen;
};
using Stats = std::map<std::pair<int, int>, RailStat>;  // (node, rail)

std::string Why(const std::pair<int, int>& nk, const Stats& stats,
                const std::map<int, NodeInfo>& nodes, double median) {
  std::string out = "rail " + std::to_string(nk.second + 1);
  if (auto h = HcaOf(nodes, nk.first, nk.second); !h.empty()) out += " (" + h + ")";
  out += " measured";
  for (const RailMeasurement* m : stats.at(nk).seen) {
    int peer = m->pair.a == nk.first ? m->pair.b : m->pair.a;
    out += " " + (m->ok ? Gb(m->busbw_gbps) + " GB/s" : "a failure") + " with " +
           NameOf(nodes, peer) + " (round " + std::to_string(m->round + 1) + "),";
  }
  return out + " against a fleet median of " + Gb(median) + " GB/s";
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
                          .why = Why(nk, stats, nodes, loc.fleet_median_gbps)});
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

Localisation Localise(const std::vector<RailMeasurement>& m, const std::map<int, NodeInfo>& nodes,
                      const Thresholds& t) {
  Localisation loc;
  std::vector<double> ok;
  for (const auto& x : m) {
    if (x.ok) ok.push_back(x.busbw_gbps);
  }
  loc.fleet_median_gbps = Median(ok).value_or(0);
  Stats stats;
  for (const auto& x : m) {
    bool slow = IsSlow(x, loc.fleet_median_gbps, nodes, t);
    if (slow) loc.slow.push_back(x);
    for (int n : {x.pair.a, x.pair.b}) {
      auto& s = stats[{n, x.rail}];
      ++s.total;
      s.slow += slow ? 1 : 0;
      s.seen.push_back(&x);
    }
  }
  auto candidate = [&](int n, int rail) {
    const auto& s = stats[{n, rail}];
    return s.total > 0 && s.slow == s.total;
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
  return loc;
}

bool RingNeedsPairs(const RingResult& ring, const std::map<int, NodeInfo>& nodes,
                    const Thresholds& t, std::optional<double> baseline_ring_gbps) {
  if (!ring.ok) return true;
  if (t.min_busbw_gbps > 0 && ring.busbw_gbps < t.min_busbw_gbps) return true;
  for (const auto& [rank, info] : nodes) {
    double rate = 0;
    for (const auto& h : info.hcas) rate += h.rate_gbps;
    if (t.min_link_fraction > 0 && rate > 0 && ring.busbw_gbps < t.min_link_fraction * rate / 8) {
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

std::optional<Baseline> ParseBaseline(const json& report) {
  if (!report.is_object() || report.value("kind", "") != "kuberdma-acceptance") return std::nullopt;
  Baseline b;
  b.date = report.value("date", "");
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

}  // namespace kuberdma::validator::acceptance
