// SPDX-License-Identifier: Apache-2.0
// rdma-validate's report: the JSON document (schema in docs/validator.md), the summary line and
// the table a person reads.
#include <cstdio>
#include <sstream>

#include "../format.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

using nlohmann::json;

namespace {

json RunsJson(const std::vector<CollectiveRun>& runs) {
  json out = json::array();
  for (const auto& r : runs) out.push_back(ResultJson(r.spec, r.nranks, r.sizes));
  return out;
}

json DeviceJson(const DeviceResult& d) {
  json j = {{"name", d.name},
            {"present", d.present},
            {"state", d.state},
            {"usable", d.usable},
            {"uverbs", d.uverbs},
            {"uverbsOpenable", d.uverbs_openable},
            {"bytesSent", d.bytes_sent},
            {"bytesReceived", d.bytes_received},
            {"share", d.share},
            {"chosenByNccl", d.chosen_by_nccl},
            {"ncclChannels", d.nccl_channels},
            {"carriedTraffic", d.carried_traffic},
            {"errorCounterDeltas", d.error_deltas},
            {"notes", d.notes}};
  if (!d.gpu_direct.empty()) {
    j["gpuDirect"] = {{"used", d.gpu_direct}, {"nearestGpu", d.nearest_gpu_distance}};
  }
  if (d.line_rate_fraction >= 0) {
    j["lineRate"] = {{"rateGbps", d.line_rate_gbps},
                     {"achievedGBps", d.achieved_gbps},
                     {"fraction", d.line_rate_fraction}};
  }
  if (d.gid_index >= 0) {
    j["gid"] = {{"index", d.gid_index}, {"address", d.gid_address}, {"type", d.gid_type}};
  }
  return j;
}

}  // namespace

json Report::ToJson() const {
  json devs = json::array();
  for (const auto& d : devices) devs.push_back(DeviceJson(d));
  return {{"version", 1},
          {"verdict", verdict},
          {"exitCode", exit_code},
          {"mode", opts.mode == Mode::kSingle ? "single" : "multi-pod"},
          {"transport", TransportName(opts.transport)},
          {"verbs", verbs},
          {"libraryRuns", library_runs},
          {"libraryVersion", library_version},
          {"libraryEnv", library_env},
          {"rank", rank},
          {"worldSize", world_size},
          {"expectedFrom", expected_source},
          {"devices", devs},
          {"unexpected", unexpected},
          {"nccl",
           {{"version", nccl_version},
            {"library", nccl_library},
            {"network", nccl_network},
            {"devices", nccl_devices},
            {"bypasses", nccl_bypasses},
            {"logFiles", log_files}}},
          {"collective",
           {{"ran", ran_collective},
            {"verified", verified},
            {"sizeBytes", opts.bytes},
            {"iterations", opts.iters},
            {"secondsPerIteration", seconds_per_iter},
            {"algbwGBps", bandwidth.algbw_gbps},
            {"busbwGBps", bandwidth.busbw_gbps},
            {"thresholdGBps", threshold_gbps},
            {"minLineRate", opts.min_line_rate},
            {"localRanks", local_ranks}}},
          {"collectives", RunsJson(runs)},
          {"problems", problems},
          {"warnings", warnings}};
}

std::string Report::Summary() const {
  std::string s = "rdma-validate: " + verdict;
  if (ran_collective && verified) s += ", busbw " + Gb(bandwidth.busbw_gbps) + " GB/s";
  s += ", " + std::to_string(devices.size()) + " device(s)";
  if (!problems.empty())
    s += ": " + problems.front() +
         (problems.size() > 1 ? " (+" + std::to_string(problems.size() - 1) + " more)" : "");
  return s;
}

std::string Report::CollectiveLines() const {
  std::ostringstream o;
  o << "  NCCL " << nccl_version << (nccl_library.empty() ? "" : " (" + nccl_library + ")")
    << ": network " << (nccl_network.empty() ? "?" : nccl_network) << ", devices ["
    << Join(nccl_devices, " ") << "]"
    << (nccl_bypasses.empty() ? "" : ", bypasses: " + Join(nccl_bypasses)) << "\n";
  std::string what = runs.empty() ? "AllReduce" : std::string(Name(runs.front().spec.kind));
  size_t bytes =
      runs.empty() || runs.front().sizes.empty() ? opts.bytes : runs.front().sizes.back().bytes;
  o << "  " << (what == "all_reduce" ? "AllReduce" : what) << " " << Bytes(bytes) << " x "
    << opts.iters << ": " << (verified ? "result verified" : "NOT verified") << ", algbw "
    << Gb(bandwidth.algbw_gbps) << " GB/s, busbw " << Gb(bandwidth.busbw_gbps) << " GB/s"
    << (threshold_gbps > 0 ? " (threshold " + Gb(threshold_gbps) + ")" : "") << "\n";
  // nccl-tests' table, per collective, when there is more than the one figure above.
  bool table = runs.size() > 1 || (!runs.empty() && runs.front().sizes.size() > 1) ||
               (!runs.empty() && runs.front().spec.kind != Collective::kAllReduce);
  for (const auto& run : table ? runs : std::vector<CollectiveRun>{}) {
    o << "  # " << Name(run.spec.kind) << ", " << run.nranks << " ranks\n"
      << ResultTable(run.spec, run.nranks, run.sizes);
  }
  return o.str();
}

namespace {

// Where the library's logs are (--log-dir, or the directory rdma-validate made), or "".
std::string LogsLine(const std::vector<std::string>& log_files, const std::string& library) {
  if (log_files.empty()) return "";
  std::string dir = log_files.front().substr(0, log_files.front().find_last_of('/'));
  return "  " + library + " logs: " + std::to_string(log_files.size()) + " file(s) in " + dir +
         "\n";
}

// Whose log lines a library run kept: pml ucx's are UCX's too.
std::string LogsOf(Transport t) { return t == Transport::kGloo ? "Gloo" : "UCX"; }

}  // namespace

namespace {

// The lines under a device's row: the GID NCCL used, GPUDirect, line rate, notes.
std::string DeviceDetails(const DeviceResult& d) {
  std::ostringstream o;
  if (d.gid_index >= 0) {
    o << "      gid: index " << d.gid_index << " " << d.gid_address
      << (d.gid_type.empty() ? "" : " (" + d.gid_type + ")") << "\n";
  }
  if (!d.gpu_direct.empty()) {
    o << "      GPUDirect RDMA: " << d.gpu_direct
      << (d.nearest_gpu_distance.empty() ? "" : " (nearest GPU: " + d.nearest_gpu_distance + ")")
      << "\n";
  }
  if (d.line_rate_fraction >= 0) {
    char line[128];
    std::snprintf(line, sizeof line, "      line rate: %.2f GB/s, %.2f of %.0f Gb/s\n",
                  d.achieved_gbps, d.line_rate_fraction, d.line_rate_gbps);
    o << line;
  }
  for (const auto& n : d.notes) o << "      note: " << n << "\n";
  return o.str();
}

}  // namespace

std::string Report::Table() const {
  std::ostringstream o;
  o << "rdma-validate (" << (opts.mode == Mode::kSingle ? "single" : "multi-pod") << ", "
    << (opts.transport == Transport::kIb       ? "IB"
        : opts.transport == Transport::kSocket ? "Socket"
                                               : TransportName(opts.transport))
    << (library_version.empty() ? "" : " (" + library_version + ")") << ", rank " << rank << " of "
    << world_size << "; "
    << (expected_source.empty() ? "no expected devices" : "expected from " + expected_source)
    << ")\n";
  char line[256];
  if (!devices.empty()) {
    std::snprintf(line, sizeof line, "  %-12s %-8s %-14s %-6s %-7s %12s %12s %7s %s\n", "device",
                  "present", "state", "usable", "chosen", "sent", "received", "share", "traffic");
    o << line;
  }
  const bool ran = ran_collective || !library_runs.is_null();
  for (const auto& d : devices) {
    std::snprintf(line, sizeof line, "  %-12s %-8s %-14s %-6s %-7s %12s %12s %6.1f%% %s\n",
                  d.name.c_str(), d.present ? "yes" : "NO", d.state.c_str(),
                  d.usable ? "yes" : "NO", ran ? (d.chosen_by_nccl ? "yes" : "NO") : "-",
                  Bytes(d.bytes_sent).c_str(), Bytes(d.bytes_received).c_str(), 100 * d.share,
                  ran ? (d.carried_traffic ? "yes" : "NO") : "-");
    o << line << DeviceDetails(d);
  }
  if (ran_collective) {
    o << CollectiveLines();
  } else if (!nccl_version.empty()) {
    o << "  NCCL " << nccl_version << " (" << nccl_library << "): not run\n";
  }
  for (const auto& p : problems) o << "  problem: " << p << "\n";
  for (const auto& w : warnings) o << "  warning: " << w << "\n";
  for (const auto& e : library_env) o << "  told: " << e << "\n";
  o << LogsLine(log_files, library_runs.is_null() ? "NCCL" : LogsOf(opts.transport))
    << "  verdict: " << verdict << " (exit " << exit_code << ")\n";
  return o.str();
}

}  // namespace kuberdma::validator
