// SPDX-License-Identifier: Apache-2.0
// Topology labels on the node's Node object: read, compare, one merge patch.
#include "kuberdma/dra/node_labels.h"

#include <nlohmann/json.hpp>

#include "kuberdma/rails/cabling.h"

namespace kuberdma::dra {

using nlohmann::json;

Result<void> ApplyTopologyLabels(const ApiServer& api, const std::string& node,
                                 const std::map<std::string, std::string>& labels) {
  const std::string prefix = rails::kTopologyLabelPrefix;
  for (const auto& [k, v] : labels) {
    if (!k.starts_with(prefix) || !rails::ValidLabelKey(k) || !rails::ValidLabelValue(v)) {
      return Fail(ErrorCode::kInvalidArgument,
                  "topology label " + k + "=" + v + " is not one of ours or not a label");
    }
  }
  if (!rails::ValidDnsSubdomain(node)) {
    return Fail(ErrorCode::kInvalidArgument, "'" + node + "' is not a node name");
  }
  const std::string path = "/api/v1/nodes/" + node;
  KUBERDMA_ASSIGN_OR_RETURN(json current, Get(api, path));
  json have = current.is_object()
                  ? current.value("metadata", json::object()).value("labels", json::object())
                  : json::object();
  json change = json::object();
  for (const auto& [k, v] : labels) {
    if (!have.contains(k) || have[k] != v) change[k] = v;
  }
  for (const auto& [k, v] : have.items()) {
    if (k.starts_with(prefix) && !labels.contains(k)) change[k] = nullptr;  // ours, gone
  }
  if (change.empty()) return {};
  auto patched = Request(
      api,
      {.method = "PATCH", .path = path, .body = json{{"metadata", {{"labels", change}}}}.dump()});
  if (!patched) return Fail(patched.error().Wrap("label node " + node));
  return {};
}

}  // namespace kuberdma::dra
