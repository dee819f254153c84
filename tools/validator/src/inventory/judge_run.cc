// SPDX-License-Identifier: Apache-2.0
// rdma-validate's judging of a run: what NCCL said it chose, the traffic each HCA carried against
// its share, the GIDs its queue pairs used, the thresholds; the verdict.
#include <algorithm>
#include <cstdio>

#include "../format.h"
#include "kuberdma/base/host.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

std::vector<std::string> Validator::JudgeCollective(Report& r, const CollectiveOutcome& run) {
  std::vector<std::string> missing_init;
  r.verified = !run.ranks.empty();
  for (const auto& rk : run.ranks) {
    if (!rk.init_ok) missing_init.push_back(std::to_string(rk.rank));
    if (!rk.ok) {
      r.verified = false;
      r.problems.push_back("rank " + std::to_string(rk.rank) + ": " +
                           (rk.error.empty() ? "failed" : rk.error));
    }
    r.seconds_per_iter = std::max(r.seconds_per_iter, rk.seconds_per_iter);
  }
  if (!missing_init.empty()) {
    std::string others = r.opts.mode == Mode::kMultiPod
                             ? "; the other " + std::to_string(r.world_size - 1) +
                                   " rank(s) of the world never all arrived at NCCL_COMM_ID (are "
                                   "their pods running, and is rank 0 reachable?)"
                             : "";
    r.problems.push_back("communicator init did not complete for local rank(s) " +
                         Join(missing_init) + others);
  }
  if (r.verified && !r.runs.empty() && !r.runs.front().sizes.empty()) {
    const CollectiveRun& first = r.runs.front();
    const SizeResult& last = first.sizes.back();
    r.seconds_per_iter = last.out_of_place.seconds;
    r.bandwidth =
        CollectiveBandwidth(first.spec.kind, last.bytes, last.out_of_place.seconds, first.nranks);
  } else if (r.verified && r.seconds_per_iter > 0) {
    r.bandwidth = AllReduceBandwidth(r.opts.bytes, r.seconds_per_iter, r.world_size);
  }
  return missing_init;
}

void Validator::JudgeChoice(Report& r, const CollectiveOutcome& run) {
  std::string want_net = r.opts.transport == Transport::kIb ? "IB" : "Socket";
  if (!r.nccl_network.empty() && r.nccl_network != want_net) {
    r.problems.push_back("NCCL used network " + r.nccl_network + ", not " + want_net);
  }
  if (!r.nccl_bypasses.empty()) {
    r.problems.push_back("channels went through " + Join(r.nccl_bypasses) + ", not only the NICs");
  }
  if (!run.ranks.empty() && r.nccl_devices.empty()) {
    r.problems.push_back("NCCL's INFO log (" +
                         (run.log_files.empty() ? std::string("none") : run.log_files.front()) +
                         ") names no NET devices: what NCCL chose cannot be shown");
  }
}

void Validator::JudgeTraffic(Report& r, const Snapshot& before, const Snapshot& after) {
  for (auto& d : r.devices) {
    auto b = before.bytes.find(d.name);
    auto a = after.bytes.find(d.name);
    if (b == before.bytes.end() || a == after.bytes.end()) continue;
    uint64_t mult = after.word_counters.contains(d.name) ? kIbDataWordBytes : 1;
    auto tx = Delta(b->second.first, a->second.first);
    auto rx = Delta(b->second.second, a->second.second);
    d.bytes_sent = tx.value * mult;
    d.bytes_received = rx.value * mult;
    if (tx.wrapped || rx.wrapped)
      d.notes.emplace_back("a 32-bit counter wrapped during the run (accounted for)");
    if (tx.saturated || rx.saturated) {
      r.problems.push_back(d.name +
                           ": its 32-bit data counters are saturated; traffic cannot be proven "
                           "(reset them with perfquery -R)");
    }
    const auto& errs =
        after.errors.contains(d.name) ? after.errors.at(d.name) : std::map<std::string, uint64_t>{};
    for (const auto& [k, v] : errs) {
      uint64_t was = before.errors.contains(d.name) && before.errors.at(d.name).contains(k)
                         ? before.errors.at(d.name).at(k)
                         : v;
      if (v > was) d.error_deltas[k] = v - was;
    }
  }
}

void Validator::JudgeShares(Report& r, const NcclLog& log) {
  uint64_t total = 0;
  for (const auto& d : r.devices) total += d.bytes_sent + d.bytes_received;
  auto chosen = log.devices();
  double fair = r.devices.empty() ? 0 : r.opts.min_share / static_cast<double>(r.devices.size());
  for (auto& d : r.devices) {
    d.chosen_by_nccl = chosen.contains(d.name);
    d.nccl_channels = log.channels().contains(d.name) ? log.channels().at(d.name) : 0;
    d.share = total > 0 ? static_cast<double>(d.bytes_sent + d.bytes_received) /
                              static_cast<double>(total)
                        : 0;
    d.carried_traffic = d.bytes_sent + d.bytes_received > 0 && d.share >= fair;
    if (!d.chosen_by_nccl) {
      r.problems.push_back(d.name +
                           ": NCCL did not use it (its device list: " + Join(r.nccl_devices) + ")");
    }
    if (!d.carried_traffic) {
      r.problems.push_back(d.name + ": carried " + Bytes(d.bytes_sent + d.bytes_received) + ", " +
                           Gb(100 * d.share) + "% of the run's bytes (needs at least " +
                           Gb(100 * fair) + "%)");
    }
    for (const auto& [k, v] : d.error_deltas) {
      d.notes.push_back(k + " +" + std::to_string(v) + " during the run");
      r.warnings.push_back(d.name + ": " + k + " +" + std::to_string(v) + " during the run");
    }
  }
}

// A GID that is another pod's: on a shared HCA every pod's entries are in one table (and `ndevs`
// names collide), so ownership is by address.
void Validator::JudgeGidOwner(Report& r, const DeviceResult& d, const GidUse& g,
                              const std::vector<sysfs::Gid>& gids) {
  if (g.Ipv4().empty()) return;
  if (!own_ipv4_) own_ipv4_ = netns::NamespaceIpv4();
  const auto& own = *own_ipv4_;
  if (std::find(own.begin(), own.end(), g.Ipv4()) != own.end()) return;
  std::string host = HostName();
  const sysfs::Gid* mine = sysfs::FirstV2ForAddresses(gids, own);
  r.problems.push_back(
      d.name + ": NCCL's queue pairs used GID " + std::to_string(g.index) + " (" + g.Ipv4() +
      "), which is no address of this pod (" + host + ": " + (own.empty() ? "none" : Join(own)) +
      "): another pod's entry on a shared HCA; " +
      (mine != nullptr
           ? "this pod's RoCE v2 GID is index " + std::to_string(mine->index) + " (" +
                 mine->Ipv4() + "): set NCCL_IB_GID_INDEX=" + std::to_string(mine->index) +
                 " or an NCCL_IB_ADDR_RANGE of its subnet"
           : "this pod has no RoCE v2 entry on " + d.name + " (give its interface an address)"));
}

void Validator::JudgeGids(Report& r, const NcclLog& log) {
  for (auto& d : r.devices) {
    auto used = log.gids().find(d.name);
    if (d.link_layer != "Ethernet" || used == log.gids().end()) continue;
    const GidUse& g = used->second;
    d.gid_index = g.index;
    d.gid_address = g.Ipv4().empty() ? g.Address() : g.Ipv4();
    auto table = sysfs::ReadGidTable(root_, d.name, 1);
    std::vector<sysfs::Gid> gids = table ? *table : std::vector<sysfs::Gid>{};
    for (const auto& e : gids) {
      if (static_cast<int>(e.index) == g.index) d.gid_type = e.type;
    }
    const sysfs::Gid* v2 = sysfs::FirstRoutableV2(gids);
    std::string at = v2 != nullptr ? " (its RoCE v2 GID for " + v2->Ipv4() + " is index " +
                                         std::to_string(v2->index) + ")"
                                   : "";
    if (g.IsLinkLocal()) {
      r.problems.push_back(d.name + ": NCCL used GID " + std::to_string(g.index) + " (" +
                           d.gid_address +
                           "), a link-local address that cannot cross routed "
                           "rails" +
                           at +
                           "; give the interface an address (ipam in the NAD) and "
                           "set NCCL_IB_ADDR_FAMILY=AF_INET, or unset NCCL_IB_GID_INDEX");
    } else if (d.gid_type != "RoCE v2" && !d.gid_type.empty() && v2 != nullptr) {
      r.problems.push_back(d.name + ": NCCL used GID " + std::to_string(g.index) +
                           ", RoCE v1, "
                           "while RoCE v2 exists" +
                           at + "; set NCCL_IB_ROCE_VERSION_NUM=2 (or unset NCCL_IB_GID_INDEX)");
    } else {
      JudgeGidOwner(r, d, g, gids);
    }
  }
}

void Validator::JudgeThreshold(Report& r) {
  if (r.opts.min_busbw_gbps > 0) r.threshold_gbps = r.opts.min_busbw_gbps;
  if (r.threshold_gbps > 0 && r.verified && r.bandwidth.busbw_gbps < r.threshold_gbps) {
    r.problems.push_back("busbw " + Gb(r.bandwidth.busbw_gbps) + " GB/s is below the threshold " +
                         Gb(r.threshold_gbps) + " GB/s");
  }
}

void Validator::Judge(Report& r, const Snapshot& before, const Snapshot& after,
                      const CollectiveOutcome& run, const NcclLog& log) {
  r.ran_collective = true;
  r.log_files = run.log_files;
  r.nccl_network = log.network();
  if (!log.version().empty()) r.nccl_version = log.version();
  r.nccl_devices.assign(log.device_list().begin(), log.device_list().end());
  for (const auto& b : log.bypasses()) r.nccl_bypasses.push_back(b);
  auto missing_init = JudgeCollective(r, run);
  JudgeChoice(r, run);
  JudgeTraffic(r, before, after);
  JudgeShares(r, log);
  JudgeGids(r, log);
  JudgeGdr(r, log);
  JudgeThreshold(r);
  JudgeLineRate(r);
  if (run.timed_out || !missing_init.empty()) {
    r.verdict = "timeout";
    r.exit_code = 3;
  } else {
    r.verdict = r.problems.empty() ? "pass" : "fail";
    r.exit_code = r.problems.empty() ? 0 : 1;
  }
}

}  // namespace kuberdma::validator
