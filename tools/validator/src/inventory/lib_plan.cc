// SPDX-License-Identifier: Apache-2.0
// What a library probe is told (lib_run.h): `--env`'s plan for this pod, forced into the process's
// environment, said in the report; and each run's bytes from the counters.
#include <cstdlib>

#include "kuberdma/netns/netns.h"
#include "kuberdma/validator/comm_plan.h"
#include "kuberdma/validator/lib_run.h"

namespace kuberdma::validator {

Result<std::vector<contract::CommHca>> ApplyLibraryPlan(const sysfs::SysfsRoot& root, Report& r,
                                                        const Options& o, contract::Library lib,
                                                        contract::ProcessLayout layout) {
  std::vector<contract::HcaInfo> hcas;
  std::vector<GidTable> tables;
  for (const auto& d : r.devices) {
    auto h = sysfs::ReadHca(root, d.name, sysfs::HcaDetail::kTables);
    if (!h) continue;
    hcas.push_back(contract::Describe(*h, true));
    if (!h->ports.empty() && h->link_layer() == sysfs::LinkLayer::kEthernet) {
      tables.push_back({h->name, h->ports.front().number, h->ports.front().gids});
    }
  }
  PodCommInputs in{.tables = tables,
                   .own_ipv4 = netns::NamespaceIpv4(),
                   .allocated = hcas,
                   .control_netdev = o.control_interface,
                   .layout = layout};
  PodCommPlan plan = PlanPodComm({lib}, in);
  if (!plan.why_not.empty()) return Fail(ErrorCode::kUnsupported, plan.why_not);
  for (const auto& l : plan.libraries) {
    for (const auto& [k, v] : l.vars) {
      ::setenv(k.c_str(), v.c_str(), 1);
      r.library_env.push_back(k + "=" + v);
    }
    for (const auto& n : l.notes)
      r.warnings.push_back(std::string(contract::LibraryName(lib)) + ": " + n);
  }
  return contract::CommHcasOf(hcas);
}

LibRun LibRunFrom(std::string library, std::string phase, const nlohmann::json& answer) {
  LibRun run{.library = std::move(library), .phase = std::move(phase)};
  if (!answer.is_object()) {
    run.error = "the probe gave no answer";
    return run;
  }
  run.ok = AnswerField(answer, "ok", false);
  run.error = AnswerField(answer, "error", std::string());
  run.seconds = AnswerField(answer, "seconds", 0.0);
  run.bytes = AnswerField(answer, "bytes", uint64_t{0});
  if (!run.ok && run.error.empty()) run.error = "the probe did not say it passed";
  return run;
}

void NoteMoved(LibRun& run, const Report& r, const Snapshot& before, const Snapshot& after) {
  for (const auto& d : r.devices) {
    run.moved[d.name] = BytesMoved(before, after, d.name);
    run.sent[d.name] = BytesSent(before, after, d.name);
  }
}

}  // namespace kuberdma::validator
