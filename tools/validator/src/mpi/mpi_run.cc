// SPDX-License-Identifier: Apache-2.0
// --transport mpi: Open MPI (or HPC-X) proven through pml ucx on the pod's NICs, each pod's
// rdma-validate a rank under the job's own mpirun (rdma-validate-mpi.so, the image's libmpi):
// Open MPI told `--env mpi --one-process`'s plan (pml and osc ucx, its device gate opened where
// the HCAs are not mlx*, UCX on every HCA striped), an allreduce and an alltoall between counter
// snapshots, UCX's ep_cfg lines naming the lanes pml ucx chose. Judged by JudgeLibRuns: every
// HCA of this pod carried its share, no lane fell back to TCP.
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

Report Validator::RunMpi(Report r) {
  if (auto applied = ApplyLibraryPlan(root_, r, opts_, contract::Library::kOpenMpi,
                                      contract::ProcessLayout::kOneForAll);
      !applied) {
    return Skip(r, "mpi: " + applied.error().message(), 1);
  }
  const std::string log = LogDir() + "/ucx.log";
  ::setenv("UCX_LOG_LEVEL", "info", 1);  // pml ucx's UCX prints its ep_cfg lines here
  ::setenv("UCX_LOG_FILE", log.c_str(), 1);
  auto sym = ModuleSymbol("rdma-validate-mpi.so", "kuberdma_mpi_probe",
                          "Open MPI (libmpi.so.40) in the job's image, run under its mpirun");
  if (!sym) return Skip(r, "mpi: " + sym.error().message(), 2);
  auto call = [&](const json& request) {
    std::string out(1 << 16, '\0');
    reinterpret_cast<ProbeFn> (*sym)(request.dump().c_str(), out.data(), out.size());
    json answer = json::parse(out.c_str(), nullptr, false);
    return answer.is_object() ? answer : json{{"error", "the MPI module answered nonsense"}};
  };
  std::vector<LibRun> runs;
  for (const char* phase : {"allreduce", "alltoall"}) {
    size_t log_at = ReadFile(log).value_or("").size();
    Snapshot before = ReadCounters(r);
    json a = call({{"phase", phase},
                   {"bytes", std::min<size_t>(opts_.bytes, size_t{64} << 20)},
                   {"iters", opts_.iters}});
    Snapshot after = ReadCounters(r);
    LibRun run = LibRunFrom("mpi", phase, a);
    run.lanes = UcxLanes(ReadFile(log).value_or("").substr(log_at));
    NoteMoved(run, r, before, after);
    if (a.contains("rank")) {
      r.rank = AnswerField(a, "rank", 0);
      r.world_size = AnswerField(a, "size", 1);
    }
    if (a.contains("version")) r.library_version = AnswerField(a, "version", std::string());
    runs.push_back(std::move(run));
    if (!runs.back().ok) break;  // MPI with a failed collective cannot go on
  }
  (void)call({{"phase", "finalize"}});
  r.log_files.push_back(log);
  JudgeLibRuns(r, runs);
  return r;
}

}  // namespace kuberdma::validator
