// SPDX-License-Identifier: Apache-2.0
// Fleet acceptance, the logic: pure functions over per-node results, so that CI tests it on
// synthetic results and the GPU machines test the runs (acceptance_run.cc).
//
// A ring AllReduce across every node comes first. When it (or any node or HCA in it) is below a
// threshold or a baseline, rounds of disjoint node pairs run in parallel, one 2-rank AllReduce per
// rail at the same time, so that every (node, rail) is measured against different partners; a
// (node, rail) whose every measurement is slow while its partners are fast elsewhere is the
// culprit. Every node meets at least two partners whatever the parity of the fleet (MinRounds:
// the bye rotates), and at most kMaxRounds rounds follow the ring.
//
// Slow is relative to the fleet's own figures: a measurement is slow below
// clamp(median - outlier_z * 1.4826 * MAD, floor_fraction * median, min_fleet_fraction * median)
// of its reference (the median of every pair measurement, or a rail's own median when that rail
// is slow on every node: a leaf switch, named as the rail). A tight fleet is held to 0.8 of its
// median, a noisy one gets up to its spread's worth of slack, and half speed (0.5) is slow
// however noisy the fleet is.
//
//   Round r = PairRound(participants, 0);                    // [(0,1), (2,3)]
//   Localisation loc = Localise(measurements, nodes, thresholds);
//   FleetReport rep = Evaluate(inputs);                        // verdicts, culprits, baselines
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/rails/cabling.h"

namespace kuberdma::validator::acceptance {

inline constexpr int kMaxRounds = 4;

// Rounds that give every one of `nodes` at least two different partners: 2 for an even fleet, 3
// for an odd one (each round's bye meets two partners in the others), 1 for two nodes (one pair
// is all there is), 0 for fewer.
int MinRounds(size_t nodes);

enum class PairPolicy { kAuto, kAlways, kNever };

struct Thresholds {
  double min_busbw_gbps = 0;  // the ring's busbw, absolute; 0: none
  // Of the port rate: a pair rail's busbw against its HCA's rate; the ring's busbw times the
  // ranks per node against the node's HCAs together (every hop crosses a NIC). 0: none.
  double min_link_fraction = 0;
  double min_fleet_fraction = 0.8;  // below this fraction of the median is slow, at least
  double floor_fraction = 0.6;      // ... and below this one always, however noisy the fleet
  double outlier_z = 3.5;           // robust z-score (median/MAD) beyond which a figure is slow
  double min_share = 0.5;           // each HCA's share of an even split of its node's ring bytes
  double baseline_tolerance = 0.1;  // a drop beyond this fraction of the baseline is a regression
};

struct HcaSpec {
  std::string name;  // "mlx5_3" (IB) or "net2" (Socket)
  double rate_gbps = 0;
  std::string firmware;
};

// What a node reported before any collective: its inventory, rail by rail.
struct NodeInfo {
  int rank = 0;
  std::string name;           // the Kubernetes node (NODE_NAME), else the pod's host name
  std::string address;        // where its pair bootstraps listen
  std::vector<HcaSpec> hcas;  // index = rail
  bool ok = true;             // inventory passed and the node reached the coordinator
  std::vector<std::string> problems;
  // Each rail's LLDP neighbour as the node's device plugin recorded it (--cabling), judged
  // across the fleet (rails/cabling.h); why there is none when asked for and unreadable.
  std::vector<rails::RailNeighbor> cabling;
  std::string cabling_note;
};

struct Traffic {
  uint64_t bytes = 0;
  double share = 0;  // of the node's bytes
};

struct RingResult {
  bool ran = false;
  bool ok = false;  // verified on every node
  double busbw_gbps = 0;
  double algbw_gbps = 0;
  int ranks = 0;
  int local_ranks = 1;                                    // ranks per node
  std::map<int, std::map<std::string, Traffic>> traffic;  // node rank -> HCA -> bytes
  std::vector<std::string> problems;
};

struct Pair {
  int a = 0;  // node ranks, a < b
  int b = 0;
  bool operator==(const Pair&) const = default;
};
using Round = std::vector<Pair>;

// Round `r` (0-based) of the circle method over `nodes`: disjoint pairs, each node at most once,
// a different partner every round (one node sits out when there is an odd number).
Round PairRound(const std::vector<int>& nodes, int r);

// One rail of one pair in one round: a 2-rank AllReduce over that rail only.
struct RailMeasurement {
  int round = 0;
  Pair pair;
  int rail = 0;
  double busbw_gbps = 0;
  bool ok = false;
  std::string error;
};

struct Culprit {
  int node = -1;         // -1: every node (a rail slow everywhere: its switch or cabling)
  int rail = -1;         // -1: every rail of the node
  std::string hca;       // the node's HCA on that rail ("" for every rail)
  bool certain = false;  // a partner of it was fast on the same rail elsewhere
  std::string why;
};

// 1.4826 * the median absolute deviation of `v` from `median`: the standard deviation's robust
// estimate (a few slow figures do not move it).
double Spread(const std::vector<double>& v, double median);
// Where "slow" starts for a set of figures with this median and spread (1.4826 * MAD).
double SlowThreshold(double median, double spread, const Thresholds& t);

struct Localisation {
  double fleet_median_gbps = 0;  // the reference: every pair measurement on rails not slow
  double spread_gbps = 0;        // 1.4826 * their MAD
  std::map<int, double> rail_median_gbps;
  std::map<int, double> rail_threshold_gbps;  // slow below this, rail by rail
  std::vector<int> slow_rails;                // slow on every node (each also a culprit)
  std::vector<RailMeasurement> slow;
  std::vector<Culprit> culprits;
  // Slow measurements no single (node, rail) explains yet: more rounds would tell.
  bool ambiguous = false;
  // (node, rail) slow in exactly half of their measurements: one more would decide.
  std::vector<std::pair<int, int>> undecided;
};

// The median of `v` (the mean of the middle two for an even count); nullopt when empty.
std::optional<double> Median(std::vector<double> v);

// Which (node, rail) the measurements point at.
Localisation Localise(const std::vector<RailMeasurement>& m, const std::map<int, NodeInfo>& nodes,
                      const Thresholds& t);

// Whether more rounds would tell no more: nothing slow, or every culprit certain and no (node,
// rail) slow in exactly half of its measurements.
bool Settled(const Localisation& loc);

// Whether to run round `done` (0-based) after `done` rounds over `nodes` nodes: always until
// MinRounds, never from max(MinRounds, min(max_rounds, kMaxRounds)) on, and in between while the
// measurements so far (`loc`) are not Settled.
bool AnotherRound(int done, size_t nodes, int max_rounds, const Localisation& loc);

// Whether the ring calls for pair rounds (policy auto): not verified, below a threshold, an HCA
// that carried less than its share, or below the baseline's ring.
bool RingNeedsPairs(const RingResult& ring, const std::map<int, NodeInfo>& nodes,
                    const Thresholds& t, std::optional<double> baseline_ring_gbps);

// What an earlier report said, for regressions: node -> busbw, node/HCA -> busbw.
struct Baseline {
  std::optional<double> ring_gbps;
  std::map<std::string, double> nodes;
  std::map<std::string, std::map<std::string, double>> hcas;
  std::string date;
  std::string collective = "all_reduce";  // what it measured: only like is compared with like
  uint64_t bytes = 0;                     // 0: not recorded (a report from before sweeps)
};
// Reads a fleet report written by an earlier run. Empty on a document that is not one.
std::optional<Baseline> ParseBaseline(const nlohmann::json& report);

struct NodeVerdict {
  std::string verdict = "pass";      // pass, fail
  std::optional<double> busbw_gbps;  // median over its pairs (all rails); the ring's if none ran
  std::string busbw_from = "pairs";  // pairs or ring: only figures of one kind are compared
  std::map<std::string, std::optional<double>> hca_busbw;  // median over its rail measurements
  std::vector<std::string> problems;
};

struct Inputs {
  std::map<int, NodeInfo> nodes;
  RingResult ring;
  std::vector<std::vector<Pair>> rounds;
  std::vector<RailMeasurement> measurements;
  Thresholds thresholds;
  std::optional<Baseline> baseline;
  std::string nccl_version;
  std::string collective = "all_reduce";
  uint64_t bytes = 0;
  std::string date;  // ISO 8601
  std::string transport;
};

// Whether `in`'s baseline measured what this run measures (the collective and, where both say,
// the size): kNotFound when there is no baseline, kInvalidArgument saying what differs.
Result<void> BaselineComparable(const Inputs& in);

struct FleetReport {
  std::string verdict = "pass";
  Inputs in;
  Localisation localisation;
  std::map<int, NodeVerdict> nodes;
  std::vector<std::string> problems;  // every problem, fleet-wide and per node
  std::vector<std::string> notes;     // said, not failing (a baseline of another collective)
  std::vector<rails::CablingFinding> cabling;  // every node's cabling findings (node set)

  nlohmann::json ToJson() const;
  std::string Summary() const;  // one line, for the termination log
  std::string Table() const;    // readable, for rank 0's stdout
  int ExitCode() const { return verdict == "pass" ? 0 : 1; }
};

// Verdicts for the fleet and each node: thresholds (absolute, link rate, fleet median), shares,
// culprits, baseline regressions, and cabling: a rail that reaches another rail's switch than
// most of the fleet's (certain) fails its node; an uncertain one is a note.
FleetReport Evaluate(Inputs in);

// The HCAs of node `rank` that the report's certain culprits name (that node's rail, every rail
// of the node, or a rail slow on every node), each with why: what --taint-dir hands the DRA
// driver. An ambiguous pass's suspects are not named.
std::vector<std::pair<std::string, std::string>> SlowHcas(const FleetReport& rep, int rank);

}  // namespace kuberdma::validator::acceptance
