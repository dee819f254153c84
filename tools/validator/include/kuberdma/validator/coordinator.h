// SPDX-License-Identifier: Apache-2.0
// Fleet acceptance, the exchange: rank 0's pod coordinates, every pod (its own too) takes part,
// over one TCP connection each (newline-delimited JSON on <rank-0 address>:<NCCL port + 1>). No MPI
// and no Kubernetes API: each pod says who it is, runs the NCCL jobs it is told to (the ring, then
// rounds of per-rail pair AllReduces, each bootstrapped by its own NCCL_COMM_ID), and hears its
// verdict. The coordinator decides everything with the pure logic of acceptance.h.
//
//   Coordinator rank 0:   auto report = Coordinate(cfg, agent);   // FleetReport
//   every other rank:     auto mine = Participate(cfg, rank, agent);
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/validator/acceptance.h"

namespace kuberdma::validator::acceptance {

// One NCCL AllReduce a node runs: its own communicator, its global ranks, the devices it may use.
struct Job {
  std::string tag;      // "ring", "r1-n0-n1-rail2"
  std::string comm_id;  // NCCL_COMM_ID: the bootstrap root, host:port
  int nranks = 0;
  std::vector<int> ranks;            // the global ranks this node runs
  std::vector<std::string> devices;  // NCCL's device list for this job, in rail order
  int round = -1;                    // pair jobs: which round, pair and rail
  Pair pair;
  int rail = -1;
};

// Everything a node runs at once.
struct Task {
  std::vector<Job> jobs;
};

struct JobResult {
  std::string tag;
  bool ok = false;
  bool timed_out = false;
  double busbw_gbps = 0;
  double algbw_gbps = 0;
  std::string error;
};

struct TaskResult {
  std::vector<JobResult> jobs;
  std::map<std::string, Traffic> traffic;  // per device over the whole task
  std::vector<std::string> problems;       // e.g. NCCL did not choose a device in the ring
};

// A node's side: what it is, and running what it is told (NCCL in rdma-validate; synthetic in
// tests).
class NodeAgent {
 public:
  virtual ~NodeAgent() = default;
  virtual NodeInfo Describe() = 0;
  virtual TaskResult Execute(const Task& task) = 0;
};

struct Config {
  int world = 1;           // nodes (pods), one coordinator among them
  int rank = 0;            // this pod's
  int local_ranks = 1;     // ring ranks per node (a rank per GPU; GPUs may be shared)
  std::string comm_host;   // rank 0's address as the others reach it
  int nccl_port = 29500;   // the ring's NCCL_COMM_ID port; pair rounds use nccl_port + 16*r + rail
  int coord_port = 29501;  // the coordinator's listening port
  int timeout_s = 60;      // NCCL phases; a task's wait is derived from it
  int task_phases = 3;     // phases of timeout_s a task's ranks may take (runner.h's Phases)
  int join_timeout_s = 0;  // how long rank 0 waits for the pods to arrive; 0: max(120, 5 x timeout)
  int welcome_timeout_s = 30;  // how long a pod waits for rank 0 to take its hello
  Thresholds thresholds;
  PairPolicy pairs = PairPolicy::kAlways;  // a baseline for every node, not only for a slow ring
  int max_rounds = kMaxRounds;
  std::optional<Baseline> baseline;
  std::string transport;
  std::string nccl_version;
  std::string collective = "all_reduce";  // what every job runs, and at what size, for the report
  uint64_t bytes = 0;
};

// What a node hears at the end.
struct NodeOutcome {
  std::string verdict;  // the node's own: pass or fail
  std::vector<std::string> problems;
  std::string fleet_summary;
  std::vector<std::pair<std::string, std::string>> slow_hcas;  // acceptance::SlowHcas of it
};

// Rank 0: serves the exchange, runs its own node through `local` like any other, and returns
// the fleet's report. Nodes that do not arrive within the wait are reported, not waited for.
Result<FleetReport> Coordinate(const Config& cfg, NodeAgent& local);

// Every other rank: connects (retrying until the coordinator is up), says hello and waits for
// the coordinator's welcome (whatever else listens on that port is named, not waited on for the
// whole run), then runs what it is told.
Result<NodeOutcome> Participate(const Config& cfg, int rank, NodeAgent& agent);

// The wire forms (tested for round trips).
nlohmann::json ToJson(const Job& j);
Job JobFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const TaskResult& r);
TaskResult TaskResultFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const NodeInfo& n);
NodeInfo NodeInfoFromJson(const nlohmann::json& j);

// The jobs each node runs for the ring over `participants` (rank order) and for pair round `r`.
std::map<int, Task> RingTasks(const Config& cfg, const std::map<int, NodeInfo>& nodes,
                              const std::vector<int>& participants);
std::map<int, Task> RoundTasks(const Config& cfg, const std::map<int, NodeInfo>& nodes,
                               const Round& round, int r);

}  // namespace kuberdma::validator::acceptance
