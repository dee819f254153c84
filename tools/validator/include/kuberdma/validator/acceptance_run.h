// SPDX-License-Identifier: Apache-2.0
// rdma-validate --mode acceptance: this pod's part in a fleet acceptance. Rank 0 coordinates
// (coordinator.h) and writes the fleet report; every pod runs the NCCL jobs it is told through
// the runner, with counters read around each task, and exits with its own node's verdict.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kuberdma/validator/acceptance.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

struct AcceptanceOutcome {
  int exit_code = 2;    // 0 pass, 1 fail (this node's; the fleet's on rank 0), 2 usage/environment
  std::string text;     // readable, for stdout
  std::string summary;  // one line, for the termination log
  nlohmann::json document;  // rank 0: the fleet report; others: their own outcome
  std::optional<acceptance::FleetReport> fleet;                // rank 0 only
  std::vector<std::pair<std::string, std::string>> slow_hcas;  // this node's, named by the pass
};

AcceptanceOutcome RunAcceptance(Validator& v,
                                const std::function<const char*(const char*)>& getenv);

}  // namespace kuberdma::validator
