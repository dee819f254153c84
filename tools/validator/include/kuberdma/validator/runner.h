// SPDX-License-Identifier: Apache-2.0
// The NCCL runner, one loop for every collective (collective.h). Each local rank runs in a forked
// process (so a hung NCCL can be killed) with the environment the validator chose; it initialises
// a non-blocking communicator with a deadline (ncclCommAbort on timeout), and for each size runs
// the collective out of place and in place: warm-up, timed phases, then once more on fresh
// deterministic data whose result it checks element by element. Compiled only where CUDA and NCCL
// are found; elsewhere NcclAvailable() says why.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "kuberdma/validator/collective.h"

namespace kuberdma::validator {

struct CollectiveParams {
  int nranks = 1;
  std::vector<int> ranks;     // global ranks run by this process
  std::vector<int> gpus;      // the local GPU of each
  CollectiveSpec spec;        // all_reduce of floats, summed, unless told
  size_t bytes = 256u << 20;  // the size when `sizes` is empty
  std::vector<size_t> sizes;  // a sweep, in order
  bool check = true;          // count wrong elements after each size
  int warmup = 3;
  int iters = 20;
  int repeats = 1;     // timed phases of `iters`; seconds_per_iter is the median phase's
  int timeout_s = 60;  // communicator init and each collective phase
  std::map<std::string, std::string> env;  // NCCL_* for the ranks (NCCL_DEBUG_FILE is set per rank)
  std::string log_dir;
  // Names this collective's log files (<log_dir>/nccl.<tag>.rank<r>.log) when several run at once;
  // empty: <log_dir>/nccl.rank<r>.log.
  std::string tag;
};

struct RankOutcome {
  int rank = -1;
  bool reported = false;  // the rank process answered at all
  bool init_ok = false;   // the communicator came up before the deadline
  bool ok = false;
  bool verified = false;
  double seconds_per_iter = 0;  // the last size's, out of place
  std::vector<SizeResult> sizes;
  std::string error;
};

struct CollectiveOutcome {
  std::vector<RankOutcome> ranks;
  bool timed_out = false;
  std::vector<std::string> log_files;
};

// How many phases, each under its own `timeout_s` deadline, a rank of `p` goes through: the
// communicator's init, then per size and place the warm-up, the timed phases and the checked call.
// The process watchdog behind those deadlines waits this many timeouts (and 15 s).
inline int Phases(const CollectiveParams& p) {
  auto sizes = static_cast<int>(p.sizes.empty() ? 1 : p.sizes.size());
  return 1 + sizes * 2 * (std::max(1, p.repeats) + (p.check ? 2 : 1));
}

// Whether NCCL can run here at all (this build has the runner, libnccl.so.2 loads, a GPU is
// visible); kUnsupported saying what is missing when not.
Result<void> NcclAvailable();
// Loads libnccl.so.2 once (KUBERDMA_NCCL_LIBRARY, else LD_LIBRARY_PATH and the loader cache, else
// pip's wheel): rdma-validate does not need it to start. Builds with the runner only.
// kUnsupported saying why it did not load.
Result<void> LoadNccl();
// The file of the NCCL that was loaded, or "".
std::string NcclLibrary();
// When a library was found but lacks an NCCL entry point the runner calls: what is missing and
// what to do (rdma-validate exits 2 with it); "" otherwise.
std::string NcclUnusable();
// Visible CUDA devices (0 without CUDA).
int GpuCount();
// The version of the NCCL that was loaded ("2.28.3"), or "" when none could be.
std::string NcclVersion();
CollectiveOutcome RunCollective(const CollectiveParams& p);
// Runs several collectives at the same time, each its own communicator with its ranks in their
// own processes (ranks of different collectives may share a GPU); the outcomes in `jobs`' order.
std::vector<CollectiveOutcome> RunCollectives(const std::vector<CollectiveParams>& jobs);

}  // namespace kuberdma::validator
