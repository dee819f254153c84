// SPDX-License-Identifier: Apache-2.0
// A communication library other than NCCL, proven through its own transport on the pod's NICs
// (`--transport ucx|mpi|gloo`): each phase of its probe (UCX's tag rendezvous and RMA, MPI's
// allreduce and alltoall, Gloo's allreduce), the devices the library's own log says it used, and
// what each expected device's counters moved during it. Judged like the NCCL run: the phase ran,
// no lane fell back to TCP where RDMA was expected, and every device carried its share.
//
//   std::vector<LibRun> runs = ...;      // ucx_run.cc, mpi_run.cc, gloo_run.cc
//   JudgeLibRuns(report, runs);           // problems name the library, the NIC and the fix
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kuberdma/contract/comm_env.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

struct LibRun {
  std::string library;  // "ucx", "mpi", "gloo"
  // The devices this phase was given: one rail's ("mlx5_3:1") when each rail is proven on its
  // own (one process per GPU), or "" for every expected device at once.
  std::string rail;
  std::string phase;  // "tag", "rma", "allreduce", "alltoall"
  bool ok = false;
  std::string error;
  double seconds = 0;
  uint64_t bytes = 0;  // what the phase moved from this pod (or to it)
  // The transport/device lanes the library's log named ("rc_verbs/rxe0:1", "tcp/eth0"); empty
  // when its log says nothing (Gloo: TCP by design).
  std::vector<std::string> lanes;
  std::map<std::string, uint64_t> moved;  // expected device -> bytes its counters moved
  std::map<std::string, uint64_t> sent;   // of those, the bytes it sent
  nlohmann::json ToJson() const;
};

// The lanes of UCX's `ep_cfg[N]: tag(rc_verbs/rxe0:1 rc_verbs/rxe1:1)` lines (UCX_LOG_LEVEL=info;
// also what Open MPI's pml ucx prints through UCX), in order, each once.
std::vector<std::string> UcxLanes(std::string_view log);

// Folds `runs` into `r` (r.library_runs; per device the bytes each way, its share of all runs'
// bytes, whether a lane named it (the table's "chosen"), a note per phase) and sets the verdict:
// a phase that failed, a lane over TCP where the devices are RDMA ones ("fell back to TCP"), a
// rail whose counters moved less than the phase's bytes (another device carried it), or, for a
// phase given every device, one whose share is below --min-share of an even split: each a problem
// naming the library, the device and what to do.
void JudgeLibRuns(Report& r, const std::vector<LibRun>& runs);

// `--env`'s plan for `lib` from this pod's HCAs and GIDs (as `root` shows them), set in this
// process's environment, overriding what is there (the probe proves the NICs as the plan tells
// the library to use them), each variable in r.library_env, the plan's notes in r.warnings.
// Returns the HCAs the plan names, in order. kUnsupported when the pod's HCAs cannot be planned.
Result<std::vector<contract::CommHca>> ApplyLibraryPlan(const sysfs::SysfsRoot& root, Report& r,
                                                        const Options& o, contract::Library lib,
                                                        contract::ProcessLayout layout);

// `answer[key]` where it is a T (bool, a number type, std::string), else `fallback`: a probe's
// answer comes from the job's library, and a field of another type counts as absent.
template <typename T>
T AnswerField(const nlohmann::json& answer, const char* key, T fallback) {
  if (!answer.is_object()) return fallback;
  auto it = answer.find(key);
  if (it == answer.end()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->get<bool>() : fallback;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->get<std::string>() : fallback;
  } else if constexpr (std::is_unsigned_v<T>) {
    return it->is_number_unsigned() ? it->get<T>() : fallback;
  } else {
    return it->is_number() ? it->get<T>() : fallback;
  }
}

// A phase's outcome from its probe's one JSON answer (`ok`, `error`, `seconds`, `bytes`; the probe
// is the job's library, so a field of another type counts as absent): an answer that is not an
// object, or that does not say ok, is a failed phase.
LibRun LibRunFrom(std::string library, std::string phase, const nlohmann::json& answer);

// What each of r's devices moved (and sent) between the snapshots, into run.moved / run.sent.
void NoteMoved(LibRun& run, const Report& r, const Snapshot& before, const Snapshot& after);

}  // namespace kuberdma::validator
