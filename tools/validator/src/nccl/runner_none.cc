// SPDX-License-Identifier: Apache-2.0
// The runner of a build without CUDA/NCCL: the validator can only take inventory.
#include "kuberdma/validator/runner.h"

namespace kuberdma::validator {

Result<void> NcclAvailable() {
  return Fail(ErrorCode::kUnsupported,
              "this rdma-validate was built without CUDA and NCCL (they were not found at build "
              "time): it can only take inventory, not prove traffic");
}

std::string NcclVersion() { return ""; }

std::string NcclLibrary() { return ""; }

std::string NcclUnusable() { return ""; }

int GpuCount() { return 0; }

CollectiveOutcome RunCollective(const CollectiveParams& /*unused*/) { return {}; }

std::vector<CollectiveOutcome> RunCollectives(const std::vector<CollectiveParams>& jobs) {
  return std::vector<CollectiveOutcome>(jobs.size());
}

}  // namespace kuberdma::validator
