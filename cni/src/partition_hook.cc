// SPDX-License-Identifier: Apache-2.0
// The partition hook run as a process: its JSON on stdin, its exit status the answer.
#include "kuberdma/cni/partition_hook.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "kuberdma/cni/ipam.h"
#include "kuberdma/cni/partitions.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::cni {

std::string PartitionChange::ToJson(const std::string& node) const {
  nlohmann::json j = {{"action", add ? "add" : "remove"}, {"pkey", sysfs::FormatPkey(pkey)},
                      {"guid", FormatGuidHex(guid)},      {"network", network},
                      {"containerId", container_id},      {"ifname", ifname}};
  if (!node.empty()) j["node"] = node;
  return j.dump();
}

CniResult<void> ExecPartitionHook::Apply(const PartitionChange& change) {
  PluginRun run = RunPlugin(path_, {}, change.ToJson(node_), timeout_ms_);
  const std::string what = std::string("partition hook ") + path_ + " (" +
                           (change.add ? "add " : "remove ") + sysfs::FormatPkey(change.pkey) + ")";
  if (!run.start_error.empty()) {
    return CniFail(kTryAgainLater, what + " could not be started: " + run.start_error);
  }
  if (run.timed_out) {
    return CniFail(kTryAgainLater,
                   what + " did not finish in " + std::to_string(timeout_ms_ / 1000) + " s");
  }
  if (run.exit_code != 0) {
    std::string err = run.err.substr(0, 512);
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return CniFail(kTryAgainLater, what + " exited " + std::to_string(run.exit_code) +
                                       (err.empty() ? "" : ": " + err));
  }
  return {};
}

}  // namespace kuberdma::cni
