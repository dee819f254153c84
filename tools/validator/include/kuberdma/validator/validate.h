// SPDX-License-Identifier: Apache-2.0
// rdma-validate's judgement: inventory of what the pod has against what it should have, traffic
// counters before and after an NCCL AllReduce, NCCL's own account of the devices it chose, and a
// verdict with every problem named. The report's JSON schema is in docs/validator.md.
//
//   Validator v(opts, SysfsRoot::FromEnv(), links, getenv);
//   Report r = v.Run();          // inventory; the NCCL run when possible; the verdict
//   std::puts(r.Table().c_str());
//   return r.exit_code;          // 0 pass, 1 validation failed, 2 environment/usage, 3 timeout
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/link/link_ops.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/validator/checks.h"
#include "kuberdma/validator/collective.h"
#include "kuberdma/validator/nccl_log.h"
#include "kuberdma/validator/runner.h"

namespace kuberdma::validator {

// kVerbs: no NCCL; an RC QP per rail with the peer pod's HCA (the verbs module).
// kUcx, kMpi, kGloo: not NCCL but that library, through its own transport (lib_run.h).
enum class Transport { kIb, kSocket, kVerbs, kUcx, kMpi, kGloo };
inline const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kIb:
      return "ib";
    case Transport::kSocket:
      return "socket";
    case Transport::kVerbs:
      return "verbs";
    case Transport::kUcx:
      return "ucx";
    case Transport::kMpi:
      return "mpi";
    case Transport::kGloo:
      return "gloo";
  }
  return "?";
}
// The transports whose devices are netdevs (TCP), not HCAs.
inline bool OverNetdevs(Transport t) { return t == Transport::kSocket || t == Transport::kGloo; }
enum class Mode { kSingle, kMultiPod, kAcceptance };

// The default line-rate floor: half of each HCA's port rate. Healthy NDR InfiniBand and 400G RoCE
// ports reach 0.9 and more of it (docs/validator.md#line-rate has the figures); half is a node
// that is broken, not one that is slow on the day.
inline constexpr double kDefaultLineRateFloor = 0.5;

struct Options {
  Mode mode = Mode::kSingle;
  Transport transport = Transport::kIb;
  std::string expect;         // comma list of HCAs (ib) or netdevs (socket); else from env
  std::string nccl_devices;   // what NCCL is told to use, when it should differ from `expect`
                              // (reproduces a workload's misconfiguration); default: expected
  size_t bytes = 256u << 20;  // the size without a sweep: large enough to be bandwidth-bound
  // What runs: each collective in turn (all_reduce by default), over `sizes` (a sweep, nccl-tests'
  // -b/-e/-f/-i; empty: `bytes`), in `spec`'s datatype, op and root, each result checked.
  std::vector<Collective> collectives = {Collective::kAllReduce};
  CollectiveSpec spec;
  std::vector<size_t> sizes;
  bool check = true;
  int warmup = 3;
  int iters = 20;
  int repeats = 0;  // timed phases of `iters` each, a figure their median; 0: 1 (3 in acceptance)
  int timeout_s = 60;
  double min_busbw_gbps = 0;  // absolute threshold; 0: none
  // Each HCA's share of the largest size's bandwidth must reach this fraction of its port rate
  // (docs/validator.md#line-rate; 0: none). Devices with no known rate (netdevs, Soft-RoCE) skip
  // it with a warning.
  double min_line_rate = kDefaultLineRateFloor;
  // NCCL staging an HCA's channels through host memory while a GPU sits on its PCIe switch is a
  // warning instead of a failure (platforms without nvidia-peermem or DMA-BUF).
  bool allow_no_gdr = false;
  double min_share = 0.5;  // each device carries >= min_share of an even split of the bytes
  int gpus = -1;           // single mode: local ranks (-1: every visible GPU)
  int rank = -1;           // multi-pod overrides
  int world_size = -1;
  std::string comm_id;  // NCCL_COMM_ID for multi-pod (else from the environment)
  std::string log_dir;  // where NCCL logs go (a temp dir by default)
  bool inventory_only = false;
  // NCCL must run: a node or build where it cannot (no CUDA device, no libnccl, an
  // inventory-only build) fails the run instead of passing on the inventory alone.
  bool require_nccl = false;
  // Acceptance mode (docs/validator.md): the node's name in the report, where the coordinator
  // listens (default: the NCCL_COMM_ID port + 1), pair rounds, fleet and baseline thresholds,
  // the Pushgateway.
  std::string node_name;  // default: $NODE_NAME, else the host name
  int coord_port = 0;
  std::string pairs = "always";  // always, auto, never
  double min_fleet_fraction = 0.8;
  std::string baseline_file;
  double baseline_tolerance = 0.1;
  std::string push_gateway;  // http://host:port
  // Opt-in: write this node's HCAs the pass named slow to <taint_dir>/acceptance-verdicts.json
  // (contract::RecordVerdicts, the allocations directory), which the DRA driver taints until the
  // next pass rewrites it.
  std::string taint_dir;
  std::string taint_effect = "NoSchedule";  // or None
  // Where the node's device plugin records its rails' LLDP neighbours (the node contract's
  // cabling.json, rdma-device-plugin --lldp): sent to rank 0, which judges the fleet's cabling. "":
  // none.
  std::string cabling_dir;
  int join_timeout_s = 0;  // 0: max(120, 5 x timeout)
  // --transport ucx: one process over every HCA at once (a KV-cache server's layout) instead of
  // each rail on its own (one process per GPU).
  bool one_process = false;
  std::string control_interface = "eth0";  // the libraries' control interface (--env's)
};

struct DeviceResult {
  std::string name;
  std::string link_layer;  // "Ethernet" (RoCE), "InfiniBand"; "" for a Socket netdev
  bool present = false;
  std::string state;    // port state, or netdev oper state
  bool usable = false;  // present, port/link up, device node openable (IB)
  std::string uverbs;
  bool uverbs_openable = false;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  double share = 0;             // of all expected devices' bytes
  bool chosen_by_nccl = false;  // NCCL's log named it (--transport ucx|mpi: a lane of UCX's log)
  int nccl_channels = 0;
  bool carried_traffic = false;
  std::map<std::string, uint64_t> error_deltas;
  // Line rate: the ports' rate (Gb/s, 0 unknown), this HCA's part of the largest size's busbw
  // (busbw x local ranks x its share of the bytes: every hop of the validator's runs crosses a
  // NIC) and the fraction of line rate that is; negative when not judged.
  double line_rate_gbps = 0;
  double achieved_gbps = 0;
  double line_rate_fraction = -1;
  // GPUDirect RDMA: "yes" (every NCCL channel through it moved GPU memory directly), "partly",
  // "no" (staged through host memory), "" when not judged (Socket, no channel); the nearest
  // GPU's PCI distance ("PIX") when one was found.
  std::string gpu_direct;
  std::string nearest_gpu_distance;
  // RoCE: the GID NCCL's queue pairs used (from its INFO log), and its type in the pod's table.
  int gid_index = -1;
  std::string gid_address;
  std::string gid_type;  // "RoCE v2", "IB/RoCE v1", "" when the table does not say
  std::vector<std::string> notes;
};

// One collective's figures over its sizes (the slowest rank's time, every rank's wrong elements).
struct CollectiveRun {
  CollectiveSpec spec;
  int nranks = 0;
  std::vector<SizeResult> sizes;
};

struct Report {
  std::string verdict = "error";  // pass, fail, error, timeout
  int exit_code = 2;
  Options opts;
  int rank = 0;
  int world_size = 1;
  int local_ranks = 1;  // the ranks this pod ran
  std::string expected_source;
  std::vector<DeviceResult> devices;
  std::vector<std::string> unexpected;  // visible but not ours
  std::string nccl_version;
  std::string nccl_library;     // the libnccl.so.2 this run loaded (the job image's)
  nlohmann::json verbs;         // --transport verbs: each rail's probe (null otherwise)
  nlohmann::json library_runs;  // --transport ucx|mpi|gloo: each phase (lib_run.h; null otherwise)
  std::string library_version;  // --transport ucx|mpi|gloo: the library as it named itself
  // --transport ucx|mpi|gloo: what the library was told ("UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1"),
  // the plan's variables as `--env` prints them, and the plan's notes.
  std::vector<std::string> library_env;
  std::string nccl_network;
  std::vector<std::string> nccl_devices;
  std::vector<std::string> nccl_bypasses;
  std::vector<std::string> log_files;
  bool ran_collective = false;
  bool verified = false;
  double seconds_per_iter = 0;
  Bandwidth bandwidth;              // the first collective's largest size, out of place
  std::vector<CollectiveRun> runs;  // every collective, every size
  double threshold_gbps = 0;
  std::vector<std::string> problems;  // each one fails the validation
  std::vector<std::string>
      warnings;  // reported, not failing: leaked HCAs, error counters that moved

  nlohmann::json ToJson() const;
  std::string Table() const;
  std::string CollectiveLines() const;  // what NCCL chose, the figure, nccl-tests' tables
  std::string Summary() const;          // one line, for /dev/termination-log
};

// The line rate HCA `name` is held to: its ports' rates summed (Gb/s), above 0. kUnsupported when
// there is none to hold it to, its message the warning that says so ("mlx5_0: a software RDMA
// device (rxe): its line-rate floor is not applied"). The single run, the verbs probe and their
// tests share it.
Result<double> LineRateGbps(const sysfs::SysfsRoot& root, const std::string& name);

// The counters of every expected device at one moment.
struct Snapshot {
  std::map<std::string, std::pair<uint64_t, uint64_t>> bytes;  // name -> (sent, received)
  std::map<std::string, bool> word_counters;                   // IB: counts 4-byte words
  std::map<std::string, std::map<std::string, uint64_t>> errors;
};

// The bytes device `dev` moved between two snapshots (sent + received; IB words made bytes; one
// 32-bit wrap accounted for).
uint64_t BytesMoved(const Snapshot& before, const Snapshot& after, const std::string& dev);
// Of those, the bytes it sent.
uint64_t BytesSent(const Snapshot& before, const Snapshot& after, const std::string& dev);

class Validator {
 public:
  Validator(Options opts, sysfs::SysfsRoot root, link::LinkOps& links,
            std::function<const char*(const char*)> getenv);

  // The whole validation: inventory, counters, the collective (when possible), the verdict.
  // (Acceptance mode runs through RunAcceptance in acceptance_run.h instead.)
  Report Run();

  // The steps, public for tests.
  Report Inventory();
  Snapshot ReadCounters(const Report& inv);
  // Folds counters, NCCL's log and the collective's outcome into `r` and sets the verdict.
  void Judge(Report& r, const Snapshot& before, const Snapshot& after, const CollectiveOutcome& run,
             const NcclLog& log);
  // --transport verbs: each rail's probe result (the verbs module's "rails") and the counters
  // around it into `r`: the probe completed, the port counters show its bytes, --min-busbw.
  void JudgeVerbs(Report& r, const nlohmann::json& rails, const Snapshot& before,
                  const Snapshot& after) const;
  // judge_hardware.cc, what the hardware could give per HCA: GPUDirect RDMA by NCCL's log (also
  // the fleet ring's), and each HCA's part of the bandwidth against its line rate.
  void JudgeGdr(Report& r, const NcclLog& log);
  void JudgeLineRate(Report& r);
  // A DRA claim of GPU+NIC pairs (KUBERDMA_CLAIM_PCIE_ROOTS from its CDI spec): each HCA on the
  // PCIe root it was allocated for, with a GPU of the node under that root; noted per HCA.
  void JudgeClaim(Report& r);
  // The NCCL environment the ranks get; `only` (when given) narrows NCCL's device list to those.
  std::map<std::string, std::string> NcclEnv(const Report& inv,
                                             const std::vector<std::string>* only = nullptr) const;
  const Options& options() const { return opts_; }
  // The IPv4 addresses of this pod's own interfaces, which decide which GID entries are its own
  // on an HCA several pods share (names collide across pods, addresses do not). Default: the
  // addresses of this network namespace (getifaddrs), read when the GIDs are judged.
  void SetOwnAddresses(std::vector<std::string> ipv4) { own_ipv4_ = std::move(ipv4); }
  const sysfs::SysfsRoot& root() const { return root_; }
  // Where NCCL's logs go: --log-dir, else a new /tmp/rdma-validate-XXXXXX (/tmp if that fails).
  std::string LogDir() const;

 private:
  void InventoryIb(Report& r, const Expected& e);
  // Judge's steps.
  std::vector<std::string> JudgeCollective(Report& r, const CollectiveOutcome& run);
  void JudgeChoice(Report& r, const CollectiveOutcome& run);
  void JudgeTraffic(Report& r, const Snapshot& before, const Snapshot& after);
  void JudgeShares(Report& r, const NcclLog& log);
  void JudgeGids(Report& r, const NcclLog& log);
  void JudgeGidOwner(Report& r, const DeviceResult& d, const GidUse& g,
                     const std::vector<sysfs::Gid>& gids);
  void JudgeThreshold(Report& r);
  // Run's steps (run.cc).
  Report Skip(Report r, const std::string& why, int exit_code) const;
  // The report when NCCL is not to run (--inventory-only) or cannot (failed under
  // --require-nccl, inventory-only otherwise); nullopt when it runs.
  std::optional<Report> WithoutNccl(Report& r) const;
  Result<CollectiveParams> Plan(Report& r, const Result<RankInfo>& ri);
  void RunAndJudge(Report& r, CollectiveParams p);
  void InventorySocket(Report& r, const Expected& e);
  // Who this pod is in multi-pod mode (recorded in `r`); an error in single mode.
  Result<RankInfo> Rank(Report& r) const;
  // --transport verbs (verbs_run.cc): the probe with the peer pod, judged by JudgeVerbs.
  Report RunVerbs(Report r);
  // --transport ucx|mpi|gloo (ucx_run.cc, mpi_run.cc, gloo_run.cc): the library's probe, judged
  // by JudgeLibRuns.
  Report RunUcx(Report r);
  Report RunMpi(Report r);
  Report RunGloo(Report r);
  Options opts_;
  std::optional<std::vector<std::string>> own_ipv4_;
  sysfs::SysfsRoot root_;
  link::LinkOps& links_;
  std::function<const char*(const char*)> getenv_;
};

}  // namespace kuberdma::validator
