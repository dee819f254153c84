// SPDX-License-Identifier: Apache-2.0
// --transport ucx: UCX proven between two pods through its own transport (rdma-validate-ucx.so,
// the job image's libucp), on the pod's NICs as `--env ucx` plans them: each rail on its own (one
// process per GPU: UCX_NET_DEVICES that rail, one rail a rendezvous) or, with --one-process, every
// rail at once (a KV-cache server: striped over all). Per rail or once: a tag phase (rendezvous)
// and an RMA phase (puts), each between counter snapshots, UCX's own ep_cfg lines (UCX_LOG_LEVEL
// info into a file of the log directory) naming the lanes it chose. Judged by JudgeLibRuns.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "kuberdma/base/files.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/validator/comm_plan.h"
#include "kuberdma/validator/lib_run.h"
#include "kuberdma/validator/module.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

using nlohmann::json;

Report Validator::RunUcx(Report r) {
  auto ri = Rank(r);
  if (!ri || ri->world_size != 2 || opts_.comm_id.empty()) {
    return Skip(r,
                "--transport ucx runs between two pods: --mode multi-pod with world size 2 and "
                "--comm-id <rank 0's address>:<port> (the probe listens on port + 20)" +
                    (ri ? "" : ": " + ri.error().message()),
                2);
  }
  auto hcas = ApplyLibraryPlan(root_, r, opts_, contract::Library::kUcx,
                               opts_.one_process ? contract::ProcessLayout::kOneForAll
                                                 : contract::ProcessLayout::kOnePerGpu);
  if (!hcas) return Skip(r, "ucx: " + hcas.error().message(), 1);
  std::vector<std::string> devices;  // "hca:port", as UCX_NET_DEVICES takes them
  for (const auto& h : *hcas) devices.push_back(h.name + ":" + std::to_string(h.port));
  const std::string dir = LogDir();
  // UCX reads these once, when it loads: before the module does. A more verbose level asked for
  // (debug, trace) is kept.
  const char* level = std::getenv("UCX_LOG_LEVEL");
  const std::string kept = level == nullptr ? "" : level;
  if (kept != "debug" && kept.rfind("trace", 0) != 0) ::setenv("UCX_LOG_LEVEL", "info", 1);
  auto colon = opts_.comm_id.rfind(':');
  std::string peer = opts_.comm_id.substr(0, colon) + ":" +
                     std::to_string(std::atoi(opts_.comm_id.c_str() + colon + 1) + 20);
  std::vector<std::string> rails = devices;
  if (opts_.one_process) {
    std::string all;
    for (const auto& d : devices) all += (all.empty() ? "" : ",") + d;
    rails = {all};
  }
  std::vector<LibRun> runs;
  for (const auto& rail : rails) {
    for (const char* phase : {"tag", "rma"}) {
      json request = {{"role", ri->rank == 0 ? "server" : "client"},
                      {"peer", peer},
                      {"devices", rail},
                      {"phase", phase},
                      {"bytes", std::min<size_t>(opts_.bytes, size_t{64} << 20)},
                      {"iters", opts_.iters},
                      {"timeoutS", opts_.timeout_s}};
      // A log file per phase: UCX opens it anew (truncating) in each process.
      std::string rail_name = rail.substr(0, rail.find(':'));
      if (opts_.one_process) rail_name = "all";
      const std::string log = dir + "/ucx-" + rail_name + "-" + phase + ".log";
      ::setenv("UCX_LOG_FILE", log.c_str(), 1);
      r.log_files.push_back(log);
      Snapshot before = ReadCounters(r);
      // Each phase its own process, UCX loaded there alone: one context's state never meets the
      // next's (in one process, UCX 1.13's puts on a second rail hung over rxe).
      auto out = CallInChild("rdma-validate-ucx.so", "kuberdma_ucx_probe",
                             "UCX (libucp.so.0) in the job's image", request.dump(),
                             4 * opts_.timeout_s + 10);
      if (!out && out.error().code() == ErrorCode::kUnsupported) {
        return Skip(r, "ucx: " + out.error().message(), 2);
      }
      Snapshot after = ReadCounters(r);
      json answer =
          out ? json::parse(*out, nullptr, false) : json{{"error", out.error().message()}};
      LibRun run = LibRunFrom("ucx", phase, answer);
      run.rail = opts_.one_process ? "" : rail;
      run.lanes = UcxLanes(ReadFile(log).value_or(""));
      if (auto v = AnswerField(answer, "version", std::string()); !v.empty()) {
        r.library_version = "UCX " + v;
      }
      NoteMoved(run, r, before, after);
      runs.push_back(std::move(run));
    }
  }
  JudgeLibRuns(r, runs);
  return r;
}

}  // namespace kuberdma::validator
