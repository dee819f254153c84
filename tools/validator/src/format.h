// SPDX-License-Identifier: Apache-2.0
// Internal to rdma-validate: how figures are written in its tables and problem messages.
#pragma once

#include <cstdint>
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

// A byte count as a person reads it: "1.50 GiB", "12.0 MiB", "512 B".
inline std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
  } else if (b >= (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

// Parts joined with `sep`: "mlx5_0,mlx5_1".
inline std::string Join(const std::vector<std::string>& parts, const std::string& sep = ",") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace kuberdma::validator
