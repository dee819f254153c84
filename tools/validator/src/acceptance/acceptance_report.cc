// SPDX-License-Identifier: Apache-2.0
// Fleet acceptance verdicts and the report document (the baseline of the next run).
#include <algorithm>
#include <cstdio>
#include <set>

#include "../format.h"
#include "kuberdma/validator/acceptance.h"

namespace kuberdma::validator::acceptance {

using nlohmann::json;

namespace {

// Whether the other end of `m` (seen from `rank`) is a certain culprit on m's rail: then the
// measurement says nothing about `rank`.
bool ExplainedByPeer(const RailMeasurement& m, int rank, const Localisation& loc) {
  int peer = m.pair.a == rank ? m.pair.b : m.pair.a;
  return std::any_of(loc.culprits.begin(), loc.culprits.end(), [&](const Culprit& c) {
    return c.certain && c.node == peer && (c.rail == m.rail || c.rail < 0);
  });
}

bool Involves(const RailMeasurement& m, int rank) { return m.pair.a == rank || m.pair.b == rank; }

// Median over the rounds of the node's pair throughput (its rails together), leaving out the
// pairs a culprit partner slowed down. The ring's figure only when no pair round ran at all: a
// ring figure is never compared with pair figures.
std::optional<double> NodeBusbw(const Inputs& in, const Localisation& loc, int rank,
                                std::string* from) {
  *from = "pairs";
  if (in.measurements.empty()) {
    *from = "ring";
    return in.ring.ok ? std::optional<double>(in.ring.busbw_gbps) : std::nullopt;
  }
  std::map<int, double> per_round;
  std::set<int> spoiled;
  for (const auto& m : in.measurements) {
    if (!Involves(m, rank)) continue;
    per_round[m.round] += m.ok ? m.busbw_gbps : 0;
    if (ExplainedByPeer(m, rank, loc)) spoiled.insert(m.round);
  }
  for (int r : spoiled) per_round.erase(r);
  std::vector<double> v;
  for (const auto& [r, sum] : per_round) v.push_back(sum);
  return Median(v);
}

std::optional<double> HcaBusbw(const Inputs& in, const Localisation& loc, int rank, int rail) {
  std::vector<double> v;
  for (const auto& m : in.measurements) {
    if (m.rail != rail || !Involves(m, rank) || ExplainedByPeer(m, rank, loc)) continue;
    v.push_back(m.ok ? m.busbw_gbps : 0);
  }
  return Median(v);
}

void RingProblems(FleetReport& rep) {
  const Inputs& in = rep.in;
  // The verbs rail sweep has no ring: pair rounds of RDMA writes are all it runs.
  if (!in.ring.ran && in.transport != "verbs")
    rep.problems.emplace_back("the ring AllReduce across the fleet did not run");
  for (const auto& p : in.ring.problems) rep.problems.push_back("ring: " + p);
  const Thresholds& t = in.thresholds;
  if (in.ring.ok && t.min_busbw_gbps > 0 && in.ring.busbw_gbps < t.min_busbw_gbps) {
    rep.problems.push_back("ring busbw " + GbUnit(in.ring.busbw_gbps) + " is below the threshold " +
                           GbUnit(t.min_busbw_gbps));
  }
  auto comparable = BaselineComparable(in);
  if (in.baseline && !comparable) rep.notes.push_back(comparable.error().message());
  if (in.baseline && comparable && in.baseline->ring_gbps && in.ring.ok &&
      in.ring.busbw_gbps < (1 - t.baseline_tolerance) * *in.baseline->ring_gbps) {
    rep.problems.push_back("regression: ring busbw " + GbUnit(in.ring.busbw_gbps) + " against " +
                           GbUnit(*in.baseline->ring_gbps) + " in the baseline of " +
                           in.baseline->date);
  }
}

void ShareProblems(const Inputs& in, const NodeInfo& info, NodeVerdict& v) {
  auto tr = in.ring.traffic.find(info.rank);
  if (tr == in.ring.traffic.end() || info.hcas.empty()) return;
  double fair = in.thresholds.min_share / static_cast<double>(info.hcas.size());
  for (const auto& h : info.hcas) {
    auto it = tr->second.find(h.name);
    double share = it == tr->second.end() ? 0 : it->second.share;
    if (share < fair) {
      v.problems.push_back(h.name + " carried " + Pct(share) + " of the node's ring bytes (needs " +
                           Pct(fair) + ")");
    }
  }
}

// Nodes against each other (pair figures only, the same robust threshold as the measurements),
// and each HCA against its rail's threshold.
void RelativeProblems(FleetReport& rep) {
  const Thresholds& t = rep.in.thresholds;
  std::vector<double> node_bw;
  for (const auto& [rank, v] : rep.nodes) {
    if (v.busbw_gbps && v.busbw_from == "pairs") node_bw.push_back(*v.busbw_gbps);
  }
  auto node_median = Median(node_bw);
  double node_thr = node_median ? SlowThreshold(*node_median, Spread(node_bw, *node_median), t) : 0;
  for (auto& [rank, v] : rep.nodes) {
    if (node_median && v.busbw_gbps && v.busbw_from == "pairs" && *v.busbw_gbps < node_thr) {
      v.problems.push_back("busbw " + GbUnit(*v.busbw_gbps) + " is " +
                           Pct(*v.busbw_gbps / *node_median) + " of the fleet's median " +
                           GbUnit(*node_median));
    }
    const NodeInfo& info = rep.in.nodes.at(rank);
    for (size_t k = 0; k < info.hcas.size(); ++k) {
      const auto& bw = v.hca_busbw[info.hcas[k].name];
      auto thr = rep.localisation.rail_threshold_gbps.find(static_cast<int>(k));
      if (!bw || thr == rep.localisation.rail_threshold_gbps.end() || *bw >= thr->second) continue;
      v.problems.push_back(info.hcas[k].name + ": busbw " + GbUnit(*bw) + " is below its rail's " +
                           GbUnit(thr->second) + " (the fleet's median " +
                           GbUnit(rep.localisation.fleet_median_gbps) + ")");
    }
  }
}

// Each HCA's median against its port rate (the line-rate floor), and the HCAs it cannot apply
// to said once for the fleet.
void LineRateProblems(FleetReport& rep) {
  double floor = rep.in.thresholds.min_link_fraction;
  if (floor <= 0) return;
  std::vector<std::string> unknown;
  for (const auto& [rank, info] : rep.in.nodes) {
    NodeVerdict& v = rep.nodes[rank];
    for (const auto& h : info.hcas) {
      if (h.rate_gbps <= 0) {
        unknown.push_back(info.name + "/" + h.name);
        continue;
      }
      const auto& bw = v.hca_busbw[h.name];
      if (bw && *bw < floor * h.rate_gbps / 8) {
        char line[200];
        std::snprintf(
            line, sizeof line, "%s: busbw %s is %.2f of its %.0f Gb/s line rate (floor %.2f)",
            h.name.c_str(), GbUnit(*bw).c_str(), *bw / (h.rate_gbps / 8), h.rate_gbps, floor);
        v.problems.emplace_back(line);
      }
    }
  }
  if (unknown.empty()) return;
  std::string list;
  for (size_t i = 0; i < unknown.size() && i < 8; ++i) list += (i > 0 ? ", " : "") + unknown[i];
  if (unknown.size() > 8) list += " and " + std::to_string(unknown.size() - 8) + " more";
  rep.notes.push_back("line-rate floor not applied to " + std::to_string(unknown.size()) +
                      " HCA(s) with no known port rate (netdevs, software RDMA): " + list);
}

void BaselineProblems(const Inputs& in, const NodeInfo& info, NodeVerdict& v) {
  if (!BaselineComparable(in)) return;
  double keep = 1 - in.thresholds.baseline_tolerance;
  auto was = in.baseline->nodes.find(info.name);
  if (v.busbw_gbps && was != in.baseline->nodes.end() && *v.busbw_gbps < keep * was->second) {
    v.problems.push_back("regression: busbw " + GbUnit(*v.busbw_gbps) + " against " +
                         GbUnit(was->second) + " in the baseline of " + in.baseline->date);
  }
  auto hcas = in.baseline->hcas.find(info.name);
  if (hcas == in.baseline->hcas.end()) return;
  for (const auto& [h, bw] : v.hca_busbw) {
    auto b = hcas->second.find(h);
    if (bw && b != hcas->second.end() && *bw < keep * b->second) {
      v.problems.push_back("regression: " + h + " busbw " + GbUnit(*bw) + " against " +
                           GbUnit(b->second) + " in the baseline");
    }
  }
}

NodeVerdict JudgeNode(const FleetReport& rep, const NodeInfo& info) {
  NodeVerdict v;
  if (!info.ok) {
    for (const auto& p : info.problems) v.problems.push_back("did not take part: " + p);
    if (info.problems.empty()) v.problems.emplace_back("did not take part");
    return v;
  }
  // What the node found in its own runs (NCCL left an HCA out of the ring, staged it through host
  // memory, a task it could not answer).
  v.problems = info.problems;
  v.busbw_gbps = NodeBusbw(rep.in, rep.localisation, info.rank, &v.busbw_from);
  for (size_t k = 0; k < info.hcas.size(); ++k) {
    v.hca_busbw[info.hcas[k].name] =
        HcaBusbw(rep.in, rep.localisation, info.rank, static_cast<int>(k));
  }
  ShareProblems(rep.in, info, v);
  for (const auto& c : rep.localisation.culprits) {
    if (c.node != info.rank) continue;
    std::string what =
        c.rail < 0 ? "every rail" : c.hca + " (rail " + std::to_string(c.rail + 1) + ")";
    v.problems.push_back((c.certain ? "culprit: " : "suspect: ") + what + ": " + c.why);
  }
  return v;
}

// Each rail against the switch most of the fleet's same rail reaches: a certain finding fails
// its node, an uncertain one is a note. Nodes whose device plugin recorded nothing are left out.
void CablingProblems(FleetReport& rep) {
  std::vector<rails::NodeCabling> fleet;
  std::map<std::string, int> rank_of;
  for (const auto& [rank, info] : rep.in.nodes) {
    if (!info.cabling_note.empty()) rep.notes.push_back(info.name + ": " + info.cabling_note);
    if (info.cabling.empty()) continue;
    fleet.push_back({.node = info.name, .rails = info.cabling});
    rank_of[info.name] = rank;
  }
  if (fleet.size() < 2) return;
  rep.cabling = rails::JudgeFleetCabling(fleet);
  for (const auto& f : rep.cabling) {
    std::string what = "cabling: " + f.Message();
    if (f.certain) {
      rep.nodes[rank_of[f.node]].problems.push_back(what);
    } else {
      rep.notes.push_back(what);
    }
  }
}

}  // namespace

FleetReport Evaluate(Inputs in) {
  FleetReport rep;
  rep.in = std::move(in);
  rep.localisation = Localise(rep.in.measurements, rep.in.nodes, rep.in.thresholds);
  RingProblems(rep);
  for (const auto& c : rep.localisation.culprits) {
    if (c.node < 0)
      rep.problems.push_back("culprit: every node's rail " + std::to_string(c.rail + 1) + ": " +
                             c.why);
  }
  for (const auto& [rank, info] : rep.in.nodes) rep.nodes[rank] = JudgeNode(rep, info);
  RelativeProblems(rep);
  LineRateProblems(rep);
  CablingProblems(rep);
  for (const auto& [rank, info] : rep.in.nodes) {
    NodeVerdict& v = rep.nodes[rank];
    BaselineProblems(rep.in, info, v);
    if (!v.problems.empty()) v.verdict = "fail";
    for (const auto& p : v.problems) rep.problems.push_back(info.name + ": " + p);
  }
  rep.verdict = rep.problems.empty() ? "pass" : "fail";
  return rep;
}

namespace {

json OptionalNumber(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Who a culprit is, for people: a node's name, or every node for a rail slow everywhere.
std::string Who(const Inputs& in, const Culprit& c) {
  if (c.node < 0) return "every node";
  return in.nodes.contains(c.node) ? in.nodes.at(c.node).name : "?";
}

std::string Where(const Culprit& c) {
  if (c.rail < 0) return " (every rail)";
  return (c.hca.empty() ? "" : " " + c.hca) + " (rail " + std::to_string(c.rail + 1) + ")";
}

json RoundsJson(const Inputs& in) {
  json rounds = json::array();
  for (size_t r = 0; r < in.rounds.size(); ++r) {
    json pairs = json::array();
    for (const auto& p : in.rounds[r]) {
      json rails = json::array();
      for (const auto& m : in.measurements) {
        if (m.round != static_cast<int>(r) || !(m.pair == p)) continue;
        rails.push_back(
            {{"rail", m.rail + 1}, {"busbwGBps", m.busbw_gbps}, {"ok", m.ok}, {"error", m.error}});
      }
      pairs.push_back(
          {{"a", in.nodes.at(p.a).name}, {"b", in.nodes.at(p.b).name}, {"rails", rails}});
    }
    rounds.push_back({{"round", r + 1}, {"pairs", pairs}});
  }
  return rounds;
}

json SlowRailsJson(const Localisation& loc) {
  json out = json::array();
  for (int r : loc.slow_rails) out.push_back(r + 1);
  return out;
}

// A node's rails as LLDP heard them, each with what the fleet's judgement says of it.
json CablingJson(const FleetReport& rep, const NodeInfo& info) {
  json out = json::array();
  for (const auto& r : info.cabling) {
    json j = {{"rail", r.rail}, {"hca", r.hca}, {"netdev", r.netdev}};
    if (r.neighbor) {
      j["switch"] = r.neighbor->Switch();
      j["port"] = r.neighbor->Port();
    }
    for (const auto& f : rep.cabling) {
      if (f.node != info.name || f.hca != r.hca) continue;
      j["expected"] = f.expected;
      j["certain"] = f.certain;
      j["finding"] = f.Message();
    }
    out.push_back(j);
  }
  return out;
}

json NodeJson(const FleetReport& rep, const NodeInfo& info) {
  const NodeVerdict& v = rep.nodes.at(info.rank);
  json hcas = json::array();
  auto tr = rep.in.ring.traffic.find(info.rank);
  for (size_t k = 0; k < info.hcas.size(); ++k) {
    const HcaSpec& h = info.hcas[k];
    json j = {{"name", h.name},
              {"rail", k + 1},
              {"rateGbps", h.rate_gbps},
              {"firmware", h.firmware},
              {"busbwGBps", OptionalNumber(v.hca_busbw.contains(h.name) ? v.hca_busbw.at(h.name)
                                                                        : std::nullopt)}};
    const auto& bw = v.hca_busbw.contains(h.name) ? v.hca_busbw.at(h.name) : std::nullopt;
    if (bw && h.rate_gbps > 0) j["lineRateFraction"] = *bw / (h.rate_gbps / 8);
    if (tr != rep.in.ring.traffic.end() && tr->second.contains(h.name)) {
      j["bytes"] = tr->second.at(h.name).bytes;
      j["share"] = tr->second.at(h.name).share;
    }
    hcas.push_back(j);
  }
  json out = {{"name", info.name},
              {"rank", info.rank},
              {"address", info.address},
              {"verdict", v.verdict},
              {"busbwGBps", OptionalNumber(v.busbw_gbps)},
              {"busbwFrom", v.busbw_from},
              {"hcas", hcas},
              {"problems", v.problems}};
  if (!info.cabling.empty()) out["cabling"] = CablingJson(rep, info);
  return out;
}

}  // namespace

namespace {

json CulpritsJson(const Inputs& in, const Localisation& loc) {
  json culprits = json::array();
  for (const auto& c : loc.culprits) {
    culprits.push_back({{"node", c.node < 0 ? json(nullptr) : json(Who(in, c))},
                        {"rank", c.node},
                        {"rail", c.rail < 0 ? json(nullptr) : json(c.rail + 1)},
                        {"hca", c.hca},
                        {"certain", c.certain},
                        {"why", c.why}});
  }
  return culprits;
}

json ThresholdsJson(const Thresholds& t) {
  return {{"minBusbwGBps", t.min_busbw_gbps},
          {"minLinkFraction", t.min_link_fraction},
          {"minFleetFraction", t.min_fleet_fraction},
          {"floorFraction", t.floor_fraction},
          {"outlierZ", t.outlier_z},
          {"minShare", t.min_share},
          {"baselineTolerance", t.baseline_tolerance}};
}

json BaselineJson(const Inputs& in) {
  if (!in.baseline) return nullptr;
  return {{"date", in.baseline->date},
          {"collective", in.baseline->collective},
          {"bytes", in.baseline->bytes}};
}

}  // namespace

json FleetReport::ToJson() const {
  json nodes_json = json::array();
  for (const auto& [rank, info] : in.nodes) nodes_json.push_back(NodeJson(*this, info));
  return {{"version", 1},
          {"kind", "kuberdma-acceptance"},
          {"date", in.date},
          {"verdict", verdict},
          {"transport", in.transport},
          {"ncclVersion", in.nccl_version},
          {"collective", {{"name", in.collective}, {"bytes", in.bytes}}},
          {"thresholds", ThresholdsJson(in.thresholds)},
          {"ring",
           {{"ran", in.ring.ran},
            {"ok", in.ring.ok},
            {"ranks", in.ring.ranks},
            {"busbwGBps", in.ring.busbw_gbps},
            {"algbwGBps", in.ring.algbw_gbps}}},
          {"rounds", RoundsJson(in)},
          {"fleetMedianGBps", localisation.fleet_median_gbps},
          {"fleetSpreadGBps", localisation.spread_gbps},
          {"slowRails", SlowRailsJson(localisation)},
          {"culprits", CulpritsJson(in, localisation)},
          {"ambiguous", localisation.ambiguous},
          {"baseline", BaselineJson(in)},
          {"notes", notes},
          {"nodes", nodes_json},
          {"problems", problems}};
}

std::string FleetReport::Summary() const {
  char ring[64];
  std::snprintf(ring, sizeof ring, "%.2f", in.ring.busbw_gbps);
  std::string s = "rdma-acceptance: " + verdict + ", " + std::to_string(in.nodes.size()) +
                  " node(s), " +
                  (!in.ring.ran && in.transport == "verbs"
                       ? "rail sweep of " + std::to_string(in.rounds.size()) + " round(s)"
                       : "ring busbw " + std::string(ring) + " GB/s");
  for (const auto& c : localisation.culprits) {
    s += std::string(c.certain ? "; culprit " : "; suspect ") + Who(in, c) + Where(c);
  }
  if (!problems.empty() && localisation.culprits.empty()) {
    s += ": " + problems.front() +
         (problems.size() > 1 ? " (+" + std::to_string(problems.size() - 1) + " more)" : "");
  }
  return s;
}

namespace {

// The pair rounds, a line each: every pair's rails in order ("failed" where a measurement failed).
std::string RoundLines(const Inputs& in) {
  std::string o;
  for (size_t r = 0; r < in.rounds.size(); ++r) {
    o += "  round " + std::to_string(r + 1) + ":";
    for (const auto& p : in.rounds[r]) {
      o += "  " + in.nodes.at(p.a).name + "+" + in.nodes.at(p.b).name + " [";
      for (const auto& m : in.measurements) {
        if (m.round != static_cast<int>(r) || !(m.pair == p)) continue;
        o += (m.rail == 0 ? "" : " ") + (m.ok ? Gb(m.busbw_gbps) : std::string("failed"));
      }
      o += "]";
    }
    o += "\n";
  }
  return o;
}

// A node's line: its verdict, its figure, each HCA's median and (with a known rate) its fraction
// of line rate.
std::string NodeLine(const NodeInfo& info, const NodeVerdict& v) {
  char line[256];
  std::snprintf(line, sizeof line, "  %-20s %-5s busbw %s", info.name.c_str(), v.verdict.c_str(),
                v.busbw_gbps ? GbUnit(*v.busbw_gbps).c_str() : "-");
  std::string o = line;
  for (const auto& h : info.hcas) {
    auto it = v.hca_busbw.find(h.name);
    double bw = it != v.hca_busbw.end() && it->second ? *it->second : -1;
    o += "  " + h.name + " " + (bw >= 0 ? GbUnit(bw) : "-");
    if (bw >= 0 && h.rate_gbps > 0) {
      std::snprintf(line, sizeof line, " (%.2f of line rate)", bw / (h.rate_gbps / 8));
      o += line;
    }
  }
  return o + "\n";
}

}  // namespace

std::string FleetReport::Table() const {
  char line[256];
  std::string o =
      "rdma-validate acceptance: " + std::to_string(in.nodes.size()) + " node(s), " + in.transport +
      (in.transport == "verbs" ? " (no NCCL)"
                               : ", NCCL " + (in.nccl_version.empty() ? "?" : in.nccl_version)) +
      "\n";
  if (in.ring.ran || in.transport != "verbs") {
    std::snprintf(line, sizeof line, "  ring: %d ranks, busbw %.2f GB/s%s\n", in.ring.ranks,
                  in.ring.busbw_gbps, in.ring.ok ? " (verified)" : " (FAILED)");
    o += line;
  } else {
    o += "  rail sweep (verbs): RDMA write GB/s per rail of each pair, no NCCL\n";
  }
  o += RoundLines(in);
  for (const auto& [rank, info] : in.nodes) o += NodeLine(info, nodes.at(rank));
  for (const auto& c : localisation.culprits) {
    o += std::string(c.certain ? "  culprit: " : "  suspect: ") + Who(in, c) + Where(c) + ": " +
         c.why + "\n";
  }
  for (const auto& p : problems) o += "  problem: " + p + "\n";
  for (const auto& n : notes) o += "  note: " + n + "\n";
  return o + "  verdict: " + verdict + " (exit " + std::to_string(ExitCode()) + ")\n";
}

}  // namespace kuberdma::validator::acceptance
