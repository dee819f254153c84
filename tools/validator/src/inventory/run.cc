// SPDX-License-Identifier: Apache-2.0
// Validator::Run: the steps in order, with the NCCL runner. Kept apart from the core library so
// that unit tests of inventory and judgement link no CUDA.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "kuberdma/base/files.h"
#include "kuberdma/base/host.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/sock/stream.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

namespace {

// A free TCP port on the loopback for single mode's bootstrap root.
int FreePort() {
  auto fd = sock::ListenTcp("127.0.0.1", 0);
  auto port = fd ? sock::LocalPort(fd->get()) : Result<uint16_t>(29500);
  return port ? *port : 29500;
}

// Local rank i runs on GPU i mod the GPUs there are: with fewer GPUs than ranks they share
// (each rank keeps its own NCCL_HOSTID, so its traffic still goes through the NICs).
void AssignGpus(int local, const std::vector<int>& ranks, CollectiveParams& p, Report& r) {
  int count = std::max(1, GpuCount());
  for (int i = 0; i < local; ++i) {
    p.ranks.push_back(ranks[static_cast<size_t>(i)]);
    p.gpus.push_back(i % count);
  }
  if (local > count) {
    r.warnings.push_back(std::to_string(local) + " local ranks share " + std::to_string(count) +
                         " GPU(s) (rank i on GPU i mod " + std::to_string(count) + ")");
  }
}

}  // namespace

std::string Validator::LogDir() const {
  if (!opts_.log_dir.empty()) return opts_.log_dir;
  char tmpl[] = "/tmp/rdma-validate-XXXXXX";
  return ::mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
}

Report Validator::Skip(Report r, const std::string& why, int exit_code) const {
  r.problems.push_back(why);
  r.verdict = exit_code == 2 ? "error" : "fail";
  r.exit_code = exit_code;
  return r;
}

Result<CollectiveParams> Validator::Plan(Report& r, const Result<RankInfo>& ri) {
  CollectiveParams p{.spec = opts_.spec,
                     .bytes = opts_.bytes,
                     .sizes = opts_.sizes,
                     .check = opts_.check,
                     .warmup = opts_.warmup,
                     .iters = opts_.iters,
                     .repeats = std::max(1, opts_.repeats),
                     .timeout_s = opts_.timeout_s,
                     .env = NcclEnv(r)};
  int local = opts_.gpus > 0 ? opts_.gpus : std::max(1, GpuCount());
  std::vector<int> ranks;
  if (opts_.mode == Mode::kSingle) {
    if (local < 2) {
      return Fail(ErrorCode::kInvalidArgument,
                  "single mode needs at least two local ranks (found " + std::to_string(local) +
                      " GPU(s)); pass --gpus 2 to share one, or use multi-pod mode");
    }
    for (int i = 0; i < local; ++i) ranks.push_back(i);
    p.nranks = r.world_size = local;
    p.env["NCCL_COMM_ID"] = "127.0.0.1:" + std::to_string(FreePort());
  } else {
    const char* env_comm = getenv_("NCCL_COMM_ID");
    std::string comm =
        !opts_.comm_id.empty() ? opts_.comm_id : (env_comm != nullptr ? env_comm : "");
    if (!ri) return Fail(ri.error());
    if (comm.empty()) {
      return Fail(ErrorCode::kInvalidArgument,
                  "multi-pod mode needs NCCL_COMM_ID=<rank-0 address>:<port> (or --comm-id)");
    }
    // One rank per local GPU: pod `rank` of `world_size` pods holds global ranks
    // rank*local .. rank*local+local-1 (the usual hand-written StatefulSet: 8 GPUs a pod).
    for (int i = 0; i < local; ++i) ranks.push_back(ri->rank * local + i);
    r.rank = ri->rank;
    p.nranks = r.world_size = ri->world_size * local;
    p.env["NCCL_COMM_ID"] = comm;
  }
  AssignGpus(local, ranks, p, r);
  r.local_ranks = local;
  return p;
}

namespace {

// A collective's table: for each size, the slowest rank's time and every rank's wrong elements.
CollectiveRun Fold(const CollectiveParams& p, const CollectiveOutcome& run) {
  CollectiveRun out{.spec = p.spec, .nranks = p.nranks};
  for (const auto& rk : run.ranks) {
    for (size_t i = 0; i < rk.sizes.size(); ++i) {
      if (out.sizes.size() <= i)
        out.sizes.push_back({.bytes = rk.sizes[i].bytes, .count = rk.sizes[i].count});
      SizeResult& s = out.sizes[i];
      s.out_of_place.seconds = std::max(s.out_of_place.seconds, rk.sizes[i].out_of_place.seconds);
      s.out_of_place.wrong += rk.sizes[i].out_of_place.wrong;
      if (rk.sizes[i].in_place) {
        if (!s.in_place) s.in_place = PlaceResult{};
        s.in_place->seconds = std::max(s.in_place->seconds, rk.sizes[i].in_place->seconds);
        s.in_place->wrong += rk.sizes[i].in_place->wrong;
        s.in_place->checked = rk.sizes[i].in_place->checked;
      }
    }
  }
  return out;
}

// `run` into `all`: a rank is ok and up only if it was in every collective; the first
// collective's time is the one judged.
void Merge(const CollectiveOutcome& run, CollectiveOutcome& all) {
  bool first = all.ranks.empty() && all.log_files.empty();
  all.timed_out = all.timed_out || run.timed_out;
  all.log_files.insert(all.log_files.end(), run.log_files.begin(), run.log_files.end());
  if (first) {
    all.ranks = run.ranks;
    return;
  }
  for (auto& a : all.ranks) {
    for (const auto& b : run.ranks) {
      if (a.rank != b.rank) continue;
      a.init_ok = a.init_ok && b.init_ok;
      a.verified = a.verified && b.verified;
      if (a.ok && !b.ok) a.error = b.error;
      a.ok = a.ok && b.ok;
    }
  }
}

}  // namespace

void Validator::RunAndJudge(Report& r, CollectiveParams p) {
  std::string dir = LogDir();
  if (auto made = MakeDirs(dir); !made) {
    r = Skip(r, "cannot create the NCCL log directory: " + made.error().message(), 2);
    return;
  }
  p.log_dir = dir;
  Snapshot before = ReadCounters(r);
  CollectiveOutcome all;  // every collective's ranks and logs, judged together
  for (Collective kind : opts_.collectives) {
    p.spec.kind = kind;
    p.tag = opts_.collectives.size() > 1 ? std::string(Name(p.spec.kind)) : "";
    if (auto ok = Check(p.spec, p.nranks); !ok) {
      r.problems.push_back(std::string(Name(p.spec.kind)) + ": " + ok.error().message());
      continue;
    }
    CollectiveOutcome run = RunCollective(p);
    r.runs.push_back(Fold(p, run));
    Merge(run, all);
    if (run.timed_out) break;  // the next collective would wait on the same stalled peer
  }
  Snapshot after = ReadCounters(r);
  NcclLog log;
  for (const auto& f : all.log_files) (void)log.AddFile(f);  // unreadable: judged as unseen
  Judge(r, before, after, all, log);  // NCCL's file and version: read by WithoutNccl
}

std::optional<Report> Validator::WithoutNccl(Report& r) const {
  // Which NCCL this image gives the job (its file and version), when it has one.
  r.nccl_version = NcclVersion();
  r.nccl_library = NcclLibrary();
  std::string why;
  if (std::string bad = opts_.inventory_only ? "" : NcclUnusable(); !bad.empty()) {
    // A library that is not NCCL (a wrong KUBERDMA_NCCL_LIBRARY): the setup is wrong, not the node.
    r.problems.push_back(bad);
    r.verdict = "fail";
    r.exit_code = 2;
    return r;
  }
  auto nccl = opts_.inventory_only ? Result<void>{} : NcclAvailable();
  if (!nccl) why = nccl.error().message();
  if (!opts_.inventory_only && opts_.require_nccl && !nccl) {
    // An init container that proved nothing must not let the pod start.
    r.problems.push_back("NCCL is required (--require-nccl) but cannot run here: " + why +
                         "; run where the pod has a GPU and NCCL (the job's own image), or pass "
                         "--inventory-only to check only what was injected");
    r.verdict = "fail";
    r.exit_code = 1;
    return r;
  }
  if (!opts_.inventory_only && nccl) return std::nullopt;
  // Said loudly, but not a failure of the pod: this build or node cannot run NCCL at all.
  if (!opts_.inventory_only) r.warnings.insert(r.warnings.begin(), "NCCL run skipped: " + why);
  r.verdict = r.problems.empty() ? "inventory-only" : "fail";
  r.exit_code = r.problems.empty() ? 0 : 1;
  return r;
}

Result<RankInfo> Validator::Rank(Report& r) const {
  if (opts_.mode != Mode::kMultiPod) return Fail(ErrorCode::kInvalidArgument, "single mode");
  std::string host = HostName();
  auto ri = DetectRank(getenv_, host, opts_.rank, opts_.world_size);
  if (ri) {
    r.rank = ri->rank;
    r.world_size = ri->world_size;
  }
  return ri;
}

Report Validator::Run() {
  Report r = Inventory();
  if (r.exit_code == 2) return r;
  if (opts_.transport == Transport::kVerbs && !opts_.inventory_only) return RunVerbs(std::move(r));
  if (opts_.transport == Transport::kUcx && !opts_.inventory_only) return RunUcx(std::move(r));
  if (opts_.transport == Transport::kMpi && !opts_.inventory_only) return RunMpi(std::move(r));
  if (opts_.transport == Transport::kGloo && !opts_.inventory_only) return RunGloo(std::move(r));
  if (auto done = WithoutNccl(r)) return *done;
  // Multi-pod: who we are, once; reported even when the run stops early.
  Result<RankInfo> ri = Rank(r);
  std::vector<std::string> unusable;
  for (const auto& d : r.devices) {
    if (!d.usable) unusable.push_back(d.name);
  }
  if (!unusable.empty()) {
    // NCCL would hang on a missing or down device until the timeout: say so at once instead.
    std::string list;
    for (const auto& u : unusable) list += (list.empty() ? "" : ",") + u;
    return Skip(r, "NCCL run skipped: expected device(s) " + list + " are not usable (see above)",
                1);
  }
  auto p = Plan(r, ri);
  if (!p) return Skip(r, p.error().message(), 2);
  RunAndJudge(r, std::move(*p));
  return r;
}

}  // namespace kuberdma::validator
