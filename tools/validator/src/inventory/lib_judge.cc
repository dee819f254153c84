// SPDX-License-Identifier: Apache-2.0
// A communication library's probe, judged (lib_run.h): the phase ran, its lanes are RDMA ones,
// every rail or device carried its bytes.
#include <algorithm>
#include <cstdio>
#include <set>

#include "kuberdma/validator/lib_run.h"

namespace kuberdma::validator {

using nlohmann::json;

json LibRun::ToJson() const {
  return {{"library", library}, {"rail", rail},       {"phase", phase}, {"ok", ok},
          {"error", error},     {"seconds", seconds}, {"bytes", bytes}, {"lanes", lanes},
          {"moved", moved},     {"sent", sent}};
}

std::vector<std::string> UcxLanes(std::string_view log) {
  std::vector<std::string> out;
  for (size_t at = log.find("ep_cfg["); at != std::string_view::npos;
       at = log.find("ep_cfg[", at + 1)) {
    size_t eol = std::min(log.find('\n', at), log.size());
    std::string_view line = log.substr(at, eol - at);
    // ep_cfg[0]: tag(rc_verbs/rxe0:1 rc_verbs/rxe1:1) rma(...); every "tl/dev" word.
    size_t open = line.find('(');
    while (open != std::string_view::npos) {
      size_t close = line.find(')', open);
      if (close == std::string_view::npos) break;
      std::string_view inside = line.substr(open + 1, close - open - 1);
      for (size_t w = 0; w < inside.size();) {
        size_t sp = std::min(inside.find(' ', w), inside.size());
        std::string lane(inside.substr(w, sp - w));
        if (lane.find('/') != std::string::npos &&
            std::find(out.begin(), out.end(), lane) == out.end()) {
          out.push_back(lane);
        }
        w = sp + 1;
      }
      open = line.find('(', close);
    }
  }
  return out;
}

namespace {

std::string Gb(double gbytes) {
  char b[32];
  if (gbytes < 0.1) {
    std::snprintf(b, sizeof b, "%.2f MB/s", gbytes * 1e3);
  } else {
    std::snprintf(b, sizeof b, "%.3f GB/s", gbytes);
  }
  return b;
}

// "rc_verbs/rxe0:1" -> "rxe0"; "tcp/eth0" -> "eth0".
std::string LaneDevice(const std::string& lane) {
  std::string dev = lane.substr(lane.find('/') + 1);
  return dev.substr(0, dev.find(':'));
}

std::string Who(const LibRun& run) {
  return run.library + " " + run.phase + (run.rail.empty() ? "" : " on " + run.rail);
}

void JudgeLanes(Report& r, const LibRun& run) {
  std::set<std::string> expected;
  for (const auto& d : r.devices) expected.insert(d.name);
  for (const auto& lane : run.lanes) {
    const std::string tl = lane.substr(0, lane.find('/'));
    // rc_verbs, ud_mlx5, dc_mlx5, ...: an RDMA transport on a device; self, cma, sysv, cuda_ipc:
    // local memory, nothing to judge.
    bool rdma = tl.rfind("rc", 0) == 0 || tl.rfind("ud", 0) == 0 || tl.rfind("dc", 0) == 0;
    if (tl == "tcp") {
      r.problems.push_back(Who(run) + ": fell back to TCP (" + lane +
                           " in UCX's ep_cfg): RDMA is not in use; check UCX_TLS and "
                           "UCX_NET_DEVICES (rdma-doctor pod) and that the HCA's port is ACTIVE");
    } else if (rdma && !expected.contains(LaneDevice(lane))) {
      r.problems.push_back(Who(run) + ": used " + lane + ", which is no HCA of this pod");
    }
  }
}

// A rail's phase: its device must show the phase's bytes.
void JudgeRail(Report& r, const LibRun& run) {
  std::string dev = run.rail.substr(0, run.rail.find(':'));
  auto moved = run.moved.find(dev);
  uint64_t m = moved == run.moved.end() ? 0 : moved->second;
  if (m < run.bytes) {
    r.problems.push_back(Who(run) + ": " + dev + "'s counters moved " + std::to_string(m) +
                         " bytes, less than the " + std::to_string(run.bytes) +
                         " the phase moved: the traffic went through another device");
  }
}

// Every device at once: each must carry its share of an even split.
void JudgeShares(Report& r, const LibRun& run) {
  uint64_t total = 0;
  for (const auto& [dev, m] : run.moved) total += m;
  const double even = r.devices.empty() ? 0 : 1.0 / static_cast<double>(r.devices.size());
  for (const auto& d : r.devices) {
    auto it = run.moved.find(d.name);
    double share = total == 0 || it == run.moved.end()
                       ? 0
                       : static_cast<double>(it->second) / static_cast<double>(total);
    if (share < r.opts.min_share * even) {
      char why[96];
      std::snprintf(why, sizeof why, "%.1f%% of the bytes, below %.0f%% of an even split",
                    100 * share, 100 * r.opts.min_share);
      r.problems.push_back(Who(run) + ": " + d.name + " carried " + why +
                           ": the library left this NIC out (for UCX: UCX_MAX_RNDV_RAILS or "
                           "UCX_MAX_RMA_RAILS below the HCA count, as rdma-validate --env ucx "
                           "--one-process sets them; RMA before UCX 1.14 keeps to one rail)");
    }
  }
}

}  // namespace

void JudgeLibRuns(Report& r, const std::vector<LibRun>& runs) {
  r.library_runs = json::array();
  for (const auto& run : runs) {
    r.library_runs.push_back(run.ToJson());
    if (!run.ok) {
      r.problems.push_back(Who(run) + " failed: " + run.error);
      continue;
    }
    JudgeLanes(r, run);
    if (run.rail.empty()) {
      JudgeShares(r, run);
    } else {
      JudgeRail(r, run);
    }
    double gbytes = run.seconds > 0 ? static_cast<double>(run.bytes) / run.seconds / 1e9 : 0;
    for (auto& d : r.devices) {
      auto it = run.moved.find(d.name);
      if (it == run.moved.end()) continue;
      uint64_t sent = run.sent.contains(d.name) ? run.sent.at(d.name) : 0;
      d.bytes_sent += sent;
      d.bytes_received += it->second - std::min(sent, it->second);
      d.carried_traffic = d.carried_traffic || it->second > 0;
      // Chosen: a lane the library's own log names on it; a library that names none (Gloo) chose
      // the interfaces it moved bytes over.
      bool named =
          run.lanes.empty()
              ? it->second > 0
              : std::any_of(run.lanes.begin(), run.lanes.end(),
                            [&](const std::string& lane) { return LaneDevice(lane) == d.name; });
      d.chosen_by_nccl = d.chosen_by_nccl || named;
      if (run.rail.empty() || run.rail.rfind(d.name + ":", 0) == 0) {
        d.notes.push_back(Who(run) + ": " + Gb(gbytes) + ", " + std::to_string(it->second) +
                          " bytes through this NIC");
      }
    }
  }
  uint64_t total = 0;
  for (const auto& d : r.devices) total += d.bytes_sent + d.bytes_received;
  for (auto& d : r.devices) {
    d.share = total == 0 ? 0
                         : static_cast<double>(d.bytes_sent + d.bytes_received) /
                               static_cast<double>(total);
  }
  r.verdict = r.problems.empty() ? "pass" : "fail";
  r.exit_code = r.problems.empty() ? 0 : 1;
}

}  // namespace kuberdma::validator
