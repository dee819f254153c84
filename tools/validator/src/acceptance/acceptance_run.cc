// SPDX-License-Identifier: Apache-2.0
// This pod's part in a fleet acceptance: its inventory as the coordinator sees it, and the NCCL
// jobs it is told to run, with traffic counters read around them.
#include "kuberdma/validator/acceptance_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "kuberdma/base/files.h"
#include "kuberdma/base/host.h"
#include "kuberdma/base/json.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/validator/coordinator.h"
#include "kuberdma/validator/verbs.h"

namespace kuberdma::validator {

namespace {

using acceptance::JobResult;
using acceptance::NodeInfo;
using acceptance::Task;
using acceptance::TaskResult;
using nlohmann::json;

// The device plugin's record of this node's rails' LLDP neighbours (--cabling), for rank 0's
// judgement of the fleet's cabling. Nothing recorded yet is said, never a failure.
void AddCabling(const std::string& dir, NodeInfo& n) {
  if (dir.empty()) return;
  auto recs = contract::ListCabling(dir);
  if (!recs) {
    n.cabling_note = recs.error().code() == ErrorCode::kNotFound
                         ? "no cabling recorded in " + dir +
                               " (rdma-device-plugin --lldp is off, "
                               "or has not heard a switch yet)"
                         : "cabling not read: " + recs.error().message();
    return;
  }
  n.cabling = contract::RailNeighbors(*recs);
}

// This node as the coordinator sees it: its inventory's verdict and, rail by rail, each HCA's
// firmware and port rate (none for a software device: the line-rate floor cannot apply).
NodeInfo DescribeNode(const Validator& v, const Report& inv, const std::string& node) {
  NodeInfo n{
      .name = node, .ok = inv.exit_code == 0 && inv.problems.empty(), .problems = inv.problems};
  for (const auto& d : inv.devices) {
    acceptance::HcaSpec h{.name = d.name};
    if (auto hca = sysfs::ReadHca(v.root(), d.name, sysfs::HcaDetail::kPorts)) {
      h.firmware = hca->fw_version;
      for (const auto& p : hca->ports) {
        if (hca->bus != sysfs::BusKind::kVirtual) h.rate_gbps += p.rate_gbps;
      }
    }
    n.hcas.push_back(h);
  }
  AddCabling(v.options().cabling_dir, n);
  return n;
}

// Each device's bytes over a task and its share of the node's.
void FoldTraffic(const Report& inv, const Snapshot& before, const Snapshot& after, TaskResult& r) {
  uint64_t total = 0;
  for (const auto& d : inv.devices) total += BytesMoved(before, after, d.name);
  for (const auto& d : inv.devices) {
    uint64_t b = BytesMoved(before, after, d.name);
    r.traffic[d.name] = {b, total > 0 ? static_cast<double>(b) / static_cast<double>(total) : 0};
  }
}

class NcclAgent final : public acceptance::NodeAgent {
 public:
  NcclAgent(Validator& v, Report inventory, std::string node, std::string log_dir)
      : v_(v), inv_(std::move(inventory)), node_(std::move(node)), log_dir_(std::move(log_dir)) {}

  NodeInfo Describe() override {
    NodeInfo n = DescribeNode(v_, inv_, node_);
    if (auto nccl = n.ok ? NcclAvailable() : Result<void>{}; !nccl) {
      n.ok = false;
      n.problems.push_back(nccl.error().message());
    }
    return n;
  }

  TaskResult Execute(const Task& task) override {
    std::vector<CollectiveParams> params;
    for (const auto& job : task.jobs) params.push_back(Params(job));
    Snapshot before = v_.ReadCounters(inv_);
    auto outcomes = RunCollectives(params);
    Snapshot after = v_.ReadCounters(inv_);
    TaskResult r;
    for (size_t i = 0; i < task.jobs.size(); ++i)
      r.jobs.push_back(Fold(task.jobs[i], params[i], outcomes[i]));
    FoldTraffic(inv_, before, after, r);
    for (size_t i = 0; i < task.jobs.size(); ++i) {
      if (task.jobs[i].tag == "ring") CheckChoice(outcomes[i], r);
    }
    return r;
  }

 private:
  CollectiveParams Params(const acceptance::Job& job) const {
    const Options& o = v_.options();
    CollectiveSpec spec = o.spec;
    spec.kind = o.collectives.empty() ? Collective::kAllReduce : o.collectives.front();
    CollectiveParams p{.nranks = job.nranks,
                       .spec = spec,
                       .bytes = o.bytes,
                       .sizes = o.sizes,
                       .check = o.check,
                       .warmup = o.warmup,
                       .iters = o.iters,
                       // Each pair figure is the median of three timed phases unless told.
                       .repeats = o.repeats > 0 ? o.repeats : 3,
                       .timeout_s = o.timeout_s,
                       .env = v_.NcclEnv(inv_, &job.devices),
                       .log_dir = log_dir_,
                       .tag = job.tag};
    p.env["NCCL_COMM_ID"] = job.comm_id;
    p.env["NCCL_HOSTID"] = node_;
    int count = std::max(1, GpuCount());
    for (size_t i = 0; i < job.ranks.size(); ++i) {
      p.ranks.push_back(job.ranks[i]);
      // A rail's pair job runs on that rail's GPU (GPU-NIC pairing), the ring's ranks on each GPU.
      p.gpus.push_back(static_cast<int>((job.rail >= 0 ? static_cast<size_t>(job.rail) : i) %
                                        static_cast<size_t>(count)));
    }
    return p;
  }

  static JobResult Fold(const acceptance::Job& job, const CollectiveParams& p,
                        const CollectiveOutcome& out) {
    JobResult r{
        .tag = job.tag, .ok = !out.ranks.empty() && !out.timed_out, .timed_out = out.timed_out};
    double seconds = 0;
    size_t bytes = p.sizes.empty() ? p.bytes : p.sizes.back();
    for (const auto& rk : out.ranks) {
      if (!rk.ok) {
        r.ok = false;
        if (r.error.empty()) r.error = "rank " + std::to_string(rk.rank) + ": " + rk.error;
      }
      seconds = std::max(seconds, rk.seconds_per_iter);
      if (!rk.sizes.empty()) bytes = rk.sizes.back().bytes;  // after the shape's rounding
    }
    if (out.ranks.empty()) r.error = "no rank ran (is NCCL available?)";
    if (r.ok && seconds > 0) {
      // The largest size's figure, with the collective's own bus factor.
      Bandwidth bw = CollectiveBandwidth(p.spec.kind, bytes, seconds, p.nranks);
      r.busbw_gbps = bw.busbw_gbps;
      r.algbw_gbps = bw.algbw_gbps;
    }
    return r;
  }

  // The ring must have gone through every device of this node, as NCCL's own log says.
  void CheckChoice(const CollectiveOutcome& out, TaskResult& r) const {
    NcclLog log;
    for (const auto& f : out.log_files) (void)log.AddFile(f);  // unreadable: judged as unseen
    auto chosen = log.devices();
    for (const auto& d : inv_.devices) {
      if (!log.device_list().empty() && !chosen.contains(d.name)) {
        r.problems.push_back(d.name + ": NCCL did not use it in the ring");
      }
    }
    if (!log.bypasses().empty()) r.problems.emplace_back("the ring bypassed the NICs");
    // GPUDirect RDMA, judged as a single run judges it (--allow-no-gdr makes it a warning).
    Report gdr = inv_;
    gdr.problems.clear();
    v_.JudgeGdr(gdr, log);
    for (const auto& p : gdr.problems) r.problems.push_back("ring: " + p);
  }

  Validator& v_;
  Report inv_;
  std::string node_;
  std::string log_dir_;
};

// --transport verbs: the rail sweep. Every job is one rail of one pair: the verbs probe between
// the two nodes' HCAs of that rail (the job's first rank listens on its bootstrap port, the other
// connects), all of a task's rails at once; its figure is the RDMA write bandwidth, and a rail
// whose port counters did not move the bytes it wrote failed (the traffic went elsewhere).
class VerbsAgent final : public acceptance::NodeAgent {
 public:
  VerbsAgent(Validator& v, Report inventory, std::string node)
      : v_(v), inv_(std::move(inventory)), node_(std::move(node)) {}

  NodeInfo Describe() override { return DescribeNode(v_, inv_, node_); }

  TaskResult Execute(const Task& task) override {
    std::vector<JobResult> results(task.jobs.size());
    std::vector<uint64_t> written(task.jobs.size(), 0);
    Snapshot before = v_.ReadCounters(inv_);
    {
      std::vector<std::jthread> rails;
      for (size_t i = 0; i < task.jobs.size(); ++i)
        rails.emplace_back([&, i] { results[i] = Probe(task.jobs[i], &written[i]); });
    }
    Snapshot after = v_.ReadCounters(inv_);
    TaskResult r;
    for (size_t i = 0; i < task.jobs.size(); ++i) {
      const auto& devices = task.jobs[i].devices;
      uint64_t moved = devices.empty() ? 0 : BytesMoved(before, after, devices.front());
      if (results[i].ok && moved < written[i]) {
        results[i].ok = false;
        results[i].error = devices.front() + ": its port counters moved " + std::to_string(moved) +
                           " bytes, less than the " + std::to_string(written[i]) +
                           " the probe wrote: the traffic did not go through this HCA";
      }
    }
    r.jobs = std::move(results);
    FoldTraffic(inv_, before, after, r);
    return r;
  }

 private:
  JobResult Probe(const acceptance::Job& job, uint64_t* written) const {
    const Options& o = v_.options();
    JobResult r{.tag = job.tag};
    bool server = !job.ranks.empty() && job.ranks.front() == 0;
    auto answer = VerbsProbe({{"role", server ? "server" : "client"},
                              {"peer", job.comm_id},
                              {"hcas", job.devices},
                              {"bytes", std::min<size_t>(o.bytes, size_t{8} << 20)},
                              {"iters", o.iters},
                              {"latencyIters", 20},
                              {"timeoutS", o.timeout_s}});
    if (!answer) {
      r.error = answer.error().message();
      return r;
    }
    const auto& rails = (*answer)["rails"];
    nlohmann::json rail = rails.is_array() && !rails.empty() ? rails[0] : nlohmann::json::object();
    r.ok = rail.value("ok", false);
    r.error = rail.value("error", r.ok ? "" : "no result for the rail");
    r.busbw_gbps = r.algbw_gbps = rail.value("writeGBps", 0.0);
    *written = rail.value("bytes", uint64_t{0});
    return r;
  }

  Validator& v_;
  Report inv_;
  std::string node_;
};

// host:port of NCCL_COMM_ID ("[fd00::1]:29500" too).
bool SplitHostPort(const std::string& s, std::string* host, int* port) {
  auto colon = s.find_last_of(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = s.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  *port = std::atoi(s.c_str() + colon + 1);
  return *port > 0 && *port < 65536;
}

acceptance::PairPolicy Policy(const std::string& s) {
  if (s == "auto") return acceptance::PairPolicy::kAuto;
  if (s == "never") return acceptance::PairPolicy::kNever;
  return acceptance::PairPolicy::kAlways;
}

Result<std::optional<acceptance::Baseline>> LoadBaseline(const std::string& path) {
  if (path.empty()) return std::optional<acceptance::Baseline>{};
  auto text = ReadFile(path);
  if (!text && text.error().code() == ErrorCode::kNotFound) {
    // The Job mounts an optional ConfigMap there: before the first report is saved as the
    // baseline, there is none, and that is not an error.
    std::fprintf(stderr,
                 "rdma-validate: no baseline at %s yet: comparing with nothing (save this "
                 "run's report there to make it one)\n",
                 path.c_str());
    return std::optional<acceptance::Baseline>{};
  }
  if (!text) return Fail(text.error());
  auto b = acceptance::ParseBaseline(ParseUntrustedJson(*text, path).value_or(json()));
  if (!b) {
    return Fail(
        ErrorCode::kInvalidArgument,
        "--baseline " + path + " is not a fleet report written by rdma-validate --mode acceptance");
  }
  return b;
}

Result<acceptance::Config> MakeConfig(const Validator& v,
                                      const std::function<const char*(const char*)>& getenv) {
  const Options& o = v.options();
  KUBERDMA_ASSIGN_OR_RETURN(RankInfo ri, DetectRank(getenv, HostName(), o.rank, o.world_size));
  const char* env_comm = getenv("NCCL_COMM_ID");
  std::string comm = !o.comm_id.empty() ? o.comm_id : (env_comm != nullptr ? env_comm : "");
  bool verbs = o.transport == Transport::kVerbs;
  acceptance::Config cfg{
      .world = ri.world_size,
      .rank = ri.rank,
      .local_ranks = verbs ? 1 : (o.gpus > 0 ? o.gpus : std::max(1, GpuCount())),
      .timeout_s = o.timeout_s,
      .join_timeout_s = o.join_timeout_s,
      // The rail sweep is nothing but pair rounds.
      .pairs = verbs ? acceptance::PairPolicy::kAlways : Policy(o.pairs),
      .transport = TransportName(o.transport),
      .nccl_version = verbs ? "" : NcclVersion(),
      .collective = verbs ? "rdma_write"
                          : std::string(Name(o.collectives.empty() ? Collective::kAllReduce
                                                                   : o.collectives.front())),
      .bytes = verbs ? std::min<size_t>(o.bytes, size_t{8} << 20)
                     : (o.sizes.empty() ? o.bytes : o.sizes.back())};
  if (!SplitHostPort(comm, &cfg.comm_host, &cfg.nccl_port)) {
    return Fail(ErrorCode::kInvalidArgument,
                "acceptance mode needs NCCL_COMM_ID=<rank-0 address>:<port> (or --comm-id), got '" +
                    comm + "'");
  }
  cfg.coord_port = o.coord_port > 0 ? o.coord_port : cfg.nccl_port + 1;
  // As the agent builds its jobs (NcclAgent::Params): three repeats unless told.
  cfg.task_phases =
      Phases({.sizes = o.sizes, .check = o.check, .repeats = o.repeats > 0 ? o.repeats : 3});
  cfg.thresholds = {.min_busbw_gbps = o.min_busbw_gbps,
                    .min_link_fraction = o.min_line_rate,
                    .min_fleet_fraction = o.min_fleet_fraction,
                    .min_share = o.min_share,
                    .baseline_tolerance = o.baseline_tolerance};
  KUBERDMA_ASSIGN_OR_RETURN(cfg.baseline, LoadBaseline(o.baseline_file));
  return cfg;
}

std::string NodeName(const Options& o, const std::function<const char*(const char*)>& getenv) {
  if (!o.node_name.empty()) return o.node_name;
  const char* n = getenv("NODE_NAME");
  return n != nullptr && *n != '\0' ? n : HostName();
}

AcceptanceOutcome Error(const std::string& why, int exit_code) {
  return {.exit_code = exit_code,
          .text = "rdma-validate acceptance: " + why + "\n",
          .summary = "rdma-acceptance: error: " + why,
          .document = {{"verdict", "error"}, {"problems", {why}}}};
}

}  // namespace

AcceptanceOutcome RunAcceptance(Validator& v,
                                const std::function<const char*(const char*)>& getenv) {
  auto cfg = MakeConfig(v, getenv);
  if (!cfg) return Error(cfg.error().message(), 2);
  Report inv = v.Inventory();
  std::string dir = v.LogDir();
  if (auto made = MakeDirs(dir); !made) return Error(made.error().message(), 2);
  NcclAgent nccl(v, inv, NodeName(v.options(), getenv), dir);
  VerbsAgent verbs(v, inv, NodeName(v.options(), getenv));
  acceptance::NodeAgent& agent = v.options().transport == Transport::kVerbs
                                     ? static_cast<acceptance::NodeAgent&>(verbs)
                                     : nccl;
  if (cfg->rank == 0) {
    auto rep = acceptance::Coordinate(*cfg, agent);
    if (!rep) return Error(rep.error().message(), 2);
    return {.exit_code = rep->ExitCode(),
            .text = rep->Table(),
            .summary = rep->Summary(),
            .document = rep->ToJson(),
            .fleet = *rep,
            .slow_hcas = acceptance::SlowHcas(*rep, 0)};
  }
  auto mine = acceptance::Participate(*cfg, cfg->rank, agent);
  if (!mine)
    return Error(mine.error().message(), mine.error().code() == ErrorCode::kTimeout ? 3 : 2);
  std::string text =
      "rdma-validate acceptance (" + agent.Describe().name + "): " + mine->verdict + "\n";
  for (const auto& p : mine->problems) text += "  problem: " + p + "\n";
  text += "  fleet: " + mine->fleet_summary + "\n";
  return {.exit_code = mine->verdict == "pass" ? 0 : 1,
          .text = text,
          .summary = mine->fleet_summary,
          .document = {{"verdict", mine->verdict},
                       {"problems", mine->problems},
                       {"fleet", mine->fleet_summary}},
          .slow_hcas = mine->slow_hcas};
}

}  // namespace kuberdma::validator
