// SPDX-License-Identifier: Apache-2.0
// --transport verbs, judged (the run itself: verbs_run.cc): each rail's probe must complete, its
// port counters must show the bytes it wrote (traffic that went through another device is
// caught), and its RDMA write bandwidth must reach --min-busbw and the line-rate floor.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "kuberdma/sysfs/hca.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

using nlohmann::json;

namespace {

// The line-rate floor for one rail: its RDMA write bandwidth against the HCA's port rate;
// a software device or an unknown rate is said, not judged.
void JudgeRailRate(const sysfs::SysfsRoot& root, double floor, double gbps, DeviceResult& d,
                   Report& r) {
  if (floor <= 0) return;
  auto rate = LineRateGbps(root, d.name);
  if (!rate) {
    r.warnings.push_back(rate.error().message());
    return;
  }
  d.line_rate_gbps = *rate;
  d.achieved_gbps = gbps;
  d.line_rate_fraction = gbps / (*rate / 8);
  if (d.line_rate_fraction < floor) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "%s: RDMA write %.2f GB/s is %.2f of its %.0f Gb/s line rate; the floor is %.2f "
                  "(--min-line-rate)",
                  d.name.c_str(), gbps, d.line_rate_fraction, *rate, floor);
    r.problems.emplace_back(line);
  }
}

}  // namespace

void Validator::JudgeVerbs(Report& r, const json& rails, const Snapshot& before,
                           const Snapshot& after) const {
  r.verbs = rails;
  for (auto& d : r.devices) {
    json rail = json::object();
    for (const auto& x : rails)
      if (x.value("hca", "") == d.name) rail = x;
    uint64_t moved = BytesMoved(before, after, d.name);
    auto written = rail.value("bytes", uint64_t{0});
    d.bytes_sent = after.bytes.contains(d.name) ? after.bytes.at(d.name).first : 0;
    d.carried_traffic = rail.value("ok", false) && moved >= written;
    if (!rail.value("ok", false)) {
      r.problems.push_back(d.name + ": the verbs probe failed: " +
                           rail.value("error", std::string("no result for it")));
      continue;
    }
    if (moved < written) {
      r.problems.push_back(d.name + ": its port counters moved " + std::to_string(moved) +
                           " bytes, less than the " + std::to_string(written) +
                           " the probe wrote each way: the traffic did not go through this HCA");
    }
    double gbps = rail.value("writeGBps", 0.0);
    if (opts_.min_busbw_gbps > 0 && gbps < opts_.min_busbw_gbps) {
      char line[160];
      std::snprintf(line, sizeof line, "%s: RDMA write %.4f GB/s is below --min-busbw %.4f GB/s",
                    d.name.c_str(), gbps, opts_.min_busbw_gbps);
      r.problems.emplace_back(line);
    }
    JudgeRailRate(root_, opts_.min_line_rate, gbps, d, r);
    char note[160];
    std::snprintf(note, sizeof note, "verbs: GID index %d, RDMA write %.4f GB/s, latency %.1f us",
                  rail.value("gidIndex", -1), gbps, rail.value("latencyUs", 0.0));
    d.notes.emplace_back(note);
  }
  r.verdict = r.problems.empty() ? "pass" : "fail";
  r.exit_code = r.problems.empty() ? 0 : 1;
}

}  // namespace kuberdma::validator
