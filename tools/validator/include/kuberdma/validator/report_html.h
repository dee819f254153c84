// SPDX-License-Identifier: Apache-2.0
// A fleet report as a page: one self-contained HTML file (inline style and script, nothing
// fetched) from a kuberdma-acceptance report, as rdma-validate --mode acceptance writes it, and
// optionally an earlier report to compare with:
//   - a node x rail heatmap of each HCA's pair busbw against the fleet's median (the cell's colour
//     is the ratio), the culprits' cells marked (class "culprit") with the evidence;
//   - the culprits, slow rails and problems in words; each pair round's measurements;
//   - with a baseline: each cell's and node's change against the same node and rail there.
//
//   auto page = FleetReportHtml(report_json, baseline_json_or_nullptr);
//   if (page) WriteFileAtomic("fleet.html", *page);
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kuberdma/base/error.h"

namespace kuberdma::validator {

// kInvalidArgument when `report` (or `baseline`) is not a kuberdma-acceptance report.
Result<std::string> FleetReportHtml(const nlohmann::json& report, const nlohmann::json* baseline);

}  // namespace kuberdma::validator
