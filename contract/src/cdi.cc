// SPDX-License-Identifier: Apache-2.0
// The one CDI spec writer (cdi.h).
#include "kuberdma/contract/cdi.h"

#include <nlohmann/json.hpp>

#include "kuberdma/base/files.h"

namespace kuberdma::contract {
namespace {

nlohmann::json Edits(const CdiEdits& e) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : e.device_nodes)
    nodes.push_back({{"path", n.path}, {"hostPath", n.host_path}});
  nlohmann::json out = {{"deviceNodes", nodes}};
  if (!e.env.empty()) out["env"] = e.env;
  return out;
}

}  // namespace

std::string EncodeCdiSpec(const CdiSpec& spec) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : spec.devices) {
    devices.push_back({{"name", d.name}, {"containerEdits", Edits(d.edits)}});
  }
  nlohmann::json out = {{"cdiVersion", kCdiVersion},
                        {"kind", spec.kind},
                        {"containerEdits", Edits(spec.edits)},
                        {"devices", devices}};
  return out.dump(2);
}

Result<void> WriteCdiSpec(const std::string& path, const CdiSpec& spec) {
  return WriteFileAtomic(path, EncodeCdiSpec(spec));
}

}  // namespace kuberdma::contract
