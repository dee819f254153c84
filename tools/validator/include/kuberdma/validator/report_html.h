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

// The page's bounds: rails are columns numbered 1..kMaxRails, nodes are rows, at most kMaxNodes.
// Within them the page is linear in the report: each row at most kMaxRails cells of bounded size
// (a culprit's words repeat only along its own row, at most 400 characters a cell), each list
// entry and pair round once.
inline constexpr int kMaxRails = 64;
inline constexpr size_t kMaxNodes = 10000;

// kInvalidArgument when `report` (or `baseline`) is not a kuberdma-acceptance report, names the
// first field of the wrong type (`nodes[2].hcas[0].rail is string, not a number`), or is past
// the bounds above.
Result<std::string> FleetReportHtml(const nlohmann::json& report, const nlohmann::json* baseline);

}  // namespace kuberdma::validator
