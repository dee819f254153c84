// SPDX-License-Identifier: Apache-2.0
// `rdma-doctor cabling`: the fleet's cabling from each node's `rdma-doctor node --json
// --lldp-wait` document, judged by majority (rails/cabling.h): "gpu-17 rail 3 is cabled to
// leaf-5 (rail 5's switch), not leaf-3".
#include "internal.h"
#include "kuberdma/base/json.h"
#include "kuberdma/rails/cabling.h"

namespace kuberdma::doctor {

using nlohmann::json;

namespace {

// A string field a node wrote, escaped for showing; "" when absent or not a string.
std::string Text(const json& e, const char* key) {
  auto it = e.find(key);
  return it == e.end() || !it->is_string() ? ""
                                           : lldp::ShowText(it->get_ref<const std::string&>(), 255);
}

// One node's rails as its document shows them; entries of the wrong shape are skipped.
Result<rails::NodeCabling> ReadNode(const std::string& name, std::string_view text) {
  auto doc = ParseUntrustedJson(text, name);
  if (!doc) return Fail(doc.error());
  auto result = doc->is_object() ? doc->find("result") : doc->end();
  if (!doc->is_object() || result == doc->end() || !result->is_object() ||
      !result->contains("cabling") || !(*result)["cabling"].is_array()) {
    return Fail(ErrorCode::kInvalidArgument,
                name + ": not the output of rdma-doctor node --json --lldp-wait (no cabling)");
  }
  rails::NodeCabling node{.node = Text(*result, "node")};
  if (node.node.empty()) node.node = name;
  for (const auto& e : (*result)["cabling"]) {
    if (!e.is_object() || !e.contains("rail") || !e["rail"].is_number_integer()) continue;
    rails::RailNeighbor r{
        .rail = e["rail"].get<int>(), .hca = Text(e, "hca"), .netdev = Text(e, "netdev")};
    if (e.contains("neighbor") && e["neighbor"].is_object()) {
      r.neighbor = lldp::NeighborFromJson(e["neighbor"]);
    }
    node.rails.push_back(std::move(r));
  }
  return node;
}

}  // namespace

View FleetCablingView(const std::vector<std::pair<std::string, std::string>>& nodes) {
  View v{"cabling", json::object(), {}};
  std::vector<rails::NodeCabling> fleet;
  for (const auto& [name, text] : nodes) {
    auto node = ReadNode(name, text);
    if (!node) {
      internal::Add(v, "fleet-cabling-input", Status::kWarn, node.error().message(),
                    "collect each node's document with rdma-doctor node --json --lldp-wait 35");
      continue;
    }
    fleet.push_back(std::move(*node));
  }
  json table = json::object();
  json labels = json::object();
  for (const auto& n : fleet) {
    json rails = json::object();
    for (const auto& r : n.rails) {
      rails[std::to_string(r.rail)] = r.neighbor ? r.neighbor->Switch() : "";
    }
    table[n.node] = rails;
    // A node's topology labels, for a scheduler's topology (docs/fabric.md); only for a name
    // that is a node's, as the names came from the documents.
    if (rails::ValidDnsSubdomain(n.node)) labels[n.node] = rails::TopologyLabels(n.rails);
  }
  v.doc["nodes"] = table;
  v.doc["labels"] = labels;
  auto findings = rails::JudgeFleetCabling(fleet);
  for (const auto& f : findings) {
    internal::Add(v, "fleet-cabling", f.certain ? Status::kFail : Status::kWarn, f.Message(),
                  "recable " + f.node + "'s rail " + std::to_string(f.rail) + " to " + f.expected +
                      " (docs/runbooks.md#rail-cabling)");
  }
  if (findings.empty() && !fleet.empty()) {
    internal::Add(v, "fleet-cabling", Status::kOk,
                  std::to_string(fleet.size()) + " node(s): every rail on its rail's switch", "");
  }
  return v;
}

std::string LabelCommands(const View& v) {
  std::string out;
  if (!v.doc.contains("labels")) return out;
  for (const auto& [node, labels] : v.doc["labels"].items()) {
    if (labels.empty()) continue;
    // Names and values were checked against Kubernetes' syntax: nothing here needs quoting.
    out += "kubectl label node " + node + " --overwrite";
    for (const auto& [k, val] : labels.items()) out += " " + k + "=" + val.get<std::string>();
    out += "\n";
  }
  return out;
}

}  // namespace kuberdma::doctor
