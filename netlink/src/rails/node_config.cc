// SPDX-License-Identifier: Apache-2.0
// The node config file: parsing, per-node resolution, and the resolved form the CNI reads.
#include "kuberdma/rails/node_config.h"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"

namespace kuberdma::rails {

using nlohmann::json;

namespace {

tl::unexpected<Error> Bad(const std::string& where, const std::string& what) {
  return Fail(ErrorCode::kInvalidArgument, "node config: " + where + ": " + what);
}

Result<std::vector<std::string>> Names(const json& obj, const char* key, const std::string& where) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) return Bad(where + key, "must be an array of strings");
  if (it->size() > kMaxRails) {
    return Bad(where + key, "has " + std::to_string(it->size()) + " entries; at most " +
                                std::to_string(kMaxRails));
  }
  std::set<std::string> seen;
  for (const auto& v : *it) {
    if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > 255) {
      return Bad(where + key, "every entry must be a non-empty string");
    }
    if (!seen.insert(v.get<std::string>()).second) {
      return Bad(where + key, "'" + v.get<std::string>() + "' is listed twice");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

// The fields of one level ("" the top, "nodes.<name>." a node's); unknown keys are errors.
Result<void> ParseLevel(const json& obj, const std::string& where, bool top, NodeConfig* out) {
  if (!obj.is_object()) return Bad(where.empty() ? "(top level)" : where, "must be an object");
  for (const auto& [key, value] : obj.items()) {
    if (key == "rails" || key == "nodeAddresses" || key == "allowUnallocated" ||
        (top && key == "nodes")) {
      continue;
    }
    return Bad(where + key, std::string("unknown field (known: rails, nodeAddresses, "
                                        "allowUnallocated") +
                                (top ? ", nodes" : "") + ")");
  }
  if (auto it = obj.find("allowUnallocated"); it != obj.end() && !it->is_null()) {
    if (!it->is_boolean()) return Bad(where + "allowUnallocated", "must be true or false");
    out->allow_unallocated = it->get<bool>();
  }
  // A node's entry replaces only the fields it sets.
  if (obj.contains("rails")) {
    KUBERDMA_ASSIGN_OR_RETURN(out->rails, Names(obj, "rails", where));
  }
  if (obj.contains("nodeAddresses")) {
    KUBERDMA_ASSIGN_OR_RETURN(out->node_addresses, Names(obj, "nodeAddresses", where));
  }
  return {};
}

}  // namespace

std::string NodeConfigPath() {
  const char* env = std::getenv(kNodeConfigEnv);
  return env != nullptr && *env != '\0' ? env : kNodeConfigPath;
}

Result<NodeConfig> ParseNodeConfig(std::string_view text, const std::string& node_name) {
  auto doc = ParseUntrustedJson(text, "node config");
  if (!doc) return Bad("(top level)", doc.error().message());
  NodeConfig config;
  KUBERDMA_TRY(ParseLevel(*doc, "", true, &config));
  auto nodes = doc->find("nodes");
  if (nodes == doc->end() || nodes->is_null()) return config;
  if (!nodes->is_object()) return Bad("nodes", "must be an object keyed by node name");
  for (const auto& [name, entry] : nodes->items()) {
    NodeConfig ignored;
    // Every node's entry is checked, not only this node's: a typo fails on every node alike.
    KUBERDMA_TRY(ParseLevel(entry, "nodes." + name + ".", false,
                            name == node_name && !node_name.empty() ? &config : &ignored));
  }
  return config;
}

Result<NodeConfig> LoadNodeConfig(const std::string& path, const std::string& node_name) {
  auto text = ReadRegularFile(path);
  if (!text && text.error().code() == ErrorCode::kNotFound) return NodeConfig{};
  if (!text) return Fail(text.error().Wrap("read node config " + path));
  auto config = ParseNodeConfig(*text, node_name);
  if (!config) return Fail(config.error().Wrap(path));
  return config;
}

std::string FormatNodeConfig(const NodeConfig& config) {
  json j = {{"rails", config.rails},
            {"nodeAddresses", config.node_addresses},
            {"allowUnallocated", config.allow_unallocated}};
  return j.dump(2) + "\n";
}

}  // namespace kuberdma::rails
