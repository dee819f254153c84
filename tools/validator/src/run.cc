// SPDX-License-Identifier: Apache-2.0
// Validator::Run: the steps in order, with the NCCL runner. Kept apart from the core library so
// that unit tests of inventory and judgement link no CUDA.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

namespace {

// A free TCP port on the loopback for single mode's bootstrap root.
int FreePort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 29500;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

}  // namespace

Report Validator::Run() {
  Report r = Inventory();
  if (r.exit_code == 2) return r;
  std::string why;
  if (opts_.inventory_only || !NcclAvailable(&why)) {
    // Said loudly, but not a failure of the pod: this build or node cannot run NCCL at all.
    if (!opts_.inventory_only) r.warnings.insert(r.warnings.begin(), "NCCL run skipped: " + why);
    r.verdict = r.problems.empty() ? "inventory-only" : "fail";
    r.exit_code = r.problems.empty() ? 0 : 1;
    return r;
  }
  // Multi-pod: who we are, once; reported even when the run stops early.
  Result<RankInfo> ri = Fail(ErrorCode::kInvalidArgument, "single mode");
  if (opts_.mode == Mode::kMultiPod) {
    char host[256] = "";
    ::gethostname(host, sizeof host - 1);
    ri = DetectRank(getenv_, host, opts_.rank, opts_.world_size);
    if (ri) {
      r.rank = ri->rank;
      r.world_size = ri->world_size;
    }
  }
  std::vector<std::string> unusable;
  for (const auto& d : r.devices) {
    if (!d.usable) unusable.push_back(d.name);
  }
  if (!unusable.empty()) {
    // NCCL would hang on a missing or down device until the timeout: say so at once instead.
    std::string list;
    for (const auto& u : unusable) list += (list.empty() ? "" : ",") + u;
    r.problems.push_back("NCCL run skipped: expected device(s) " + list +
                         " are not usable (see above)");
    r.verdict = "fail";
    r.exit_code = 1;
    return r;
  }
  CollectiveParams p;
  p.bytes = opts_.bytes;
  p.warmup = opts_.warmup;
  p.iters = opts_.iters;
  p.timeout_s = opts_.timeout_s;
  p.env = NcclEnv(r);
  if (opts_.mode == Mode::kSingle) {
    int n = opts_.gpus > 0 ? opts_.gpus : GpuCount();
    if (n < 2) {
      r.problems.push_back("single mode needs at least two local GPUs (found " + std::to_string(n) +
                           "); use multi-pod mode");
      r.verdict = "error";
      r.exit_code = 2;
      return r;
    }
    for (int i = 0; i < n; ++i) {
      p.ranks.push_back(i);
      p.gpus.push_back(i);
    }
    p.nranks = n;
    p.env["NCCL_COMM_ID"] = "127.0.0.1:" + std::to_string(FreePort());
    r.world_size = n;
  } else {
    std::string comm = !opts_.comm_id.empty()
                           ? opts_.comm_id
                           : (getenv_("NCCL_COMM_ID") ? getenv_("NCCL_COMM_ID") : "");
    if (!ri || comm.empty()) {
      r.problems.push_back(
          !ri ? ri.error().message()
              : "multi-pod mode needs NCCL_COMM_ID=<rank-0 address>:<port> (or --comm-id)");
      r.verdict = "error";
      r.exit_code = 2;
      return r;
    }
    // One rank per local GPU: pod `rank` of `world_size` pods holds global ranks
    // rank*local .. rank*local+local-1 (the seed's StatefulSet: 8 GPUs a pod).
    int local = opts_.gpus > 0 ? opts_.gpus : std::max(1, GpuCount());
    r.rank = ri->rank;
    r.world_size = ri->world_size * local;
    p.nranks = r.world_size;
    for (int i = 0; i < local; ++i) {
      p.ranks.push_back(ri->rank * local + i);
      p.gpus.push_back(i);
    }
    p.env["NCCL_COMM_ID"] = comm;
  }
  std::string dir = opts_.log_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/rdma-validate-XXXXXX";
    dir = ::mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
  }
  if (auto made = MakeDirs(dir); !made) {
    r.problems.push_back("cannot create the NCCL log directory: " + made.error().message());
    r.verdict = "error";
    r.exit_code = 2;
    return r;
  }
  p.log_dir = dir;
  Snapshot before = ReadCounters(r);
  CollectiveOutcome run = RunAllReduce(p);
  Snapshot after = ReadCounters(r);
  NcclLog log;
  for (const auto& f : run.log_files) {
    if (auto text = ReadFile(f)) log.AddText(*text);
  }
  if (r.nccl_version.empty()) r.nccl_version = NcclVersion();
  Judge(r, before, after, run, log);
  return r;
}

}  // namespace kuberdma::validator
