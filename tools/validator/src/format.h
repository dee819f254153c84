// SPDX-License-Identifier: Apache-2.0
// Internal to rdma-validate: how figures are written in its tables and problem messages.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace kuberdma::validator {

// Bandwidth in GB/s with two decimals: "1.98" (tables, where the column says GB/s); four below
// 0.1 GB/s, so that a slow software fabric's figures (Soft-RoCE under emulation: "0.0123") and a
// policed rail's still read apart from nothing.
inline std::string Gb(double gbps) {
  char b[32];
  std::snprintf(b, sizeof b, gbps != 0 && gbps < 0.1 && gbps > -0.1 ? "%.4f" : "%.2f", gbps);
  return b;
}

// The same with its unit, for sentences: "1.98 GB/s".
inline std::string GbUnit(double gbps) { return Gb(gbps) + " GB/s"; }

// A fraction as a whole percentage: 0.3 -> "30%".
inline std::string Pct(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100 * fraction);
  return b;
}

// Parts joined with `sep`: "mlx5_0,mlx5_1".
inline std::string Join(const std::vector<std::string>& parts, const std::string& sep = ",") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace kuberdma::validator
