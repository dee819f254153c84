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

Result<VfCount> ParseVfCount(const json& e, const std::string& where) {
  if (!e.is_object()) return Bad(where, R"(must be an object {"pf" or "rail", "numVfs"})");
  VfCount v;
  for (const auto& [key, value] : e.items()) {
    if (key != "pf" && key != "rail" && key != "numVfs") {
      return Bad(where + "." + key, "unknown field (known: pf, rail, numVfs)");
    }
  }
  if (auto it = e.find("pf"); it != e.end()) {
    if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>().size() > 255)
      return Bad(where + ".pf", "must be a netdev, PCI address or HCA name");
    v.pf = it->get<std::string>();
  }
  if (auto it = e.find("rail"); it != e.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > static_cast<int64_t>(kMaxRails))
      return Bad(where + ".rail", "must be a rail number, 1.." + std::to_string(kMaxRails));
    v.rail = static_cast<int>(it->get<int64_t>());
  }
  if (v.pf.empty() == (v.rail == 0)) return Bad(where, R"(names its PF by "pf" or by "rail", one)");
  auto n = e.find("numVfs");
  if (n == e.end() || !n->is_number_integer() || n->get<int64_t>() < 0 ||
      n->get<int64_t>() > kMaxVfs) {
    return Bad(where + ".numVfs", "must be a count of VFs, 0.." + std::to_string(kMaxVfs));
  }
  v.num_vfs = static_cast<int>(n->get<int64_t>());
  return v;
}

Result<std::vector<VfCount>> VfCounts(const json& obj, const std::string& where) {
  const json& list = obj.at("sriov");
  if (!list.is_array()) return Bad(where + "sriov", "must be an array");
  if (list.size() > kMaxRails) {
    return Bad(where + "sriov", "has " + std::to_string(list.size()) + " entries; at most " +
                                    std::to_string(kMaxRails));
  }
  std::vector<VfCount> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = where + "sriov[" + std::to_string(i) + "]";
    KUBERDMA_ASSIGN_OR_RETURN(VfCount v, ParseVfCount(list[i], at));
    if (!seen.insert(v.Target()).second) return Bad(at, v.Target() + " is listed twice");
    out.push_back(std::move(v));
  }
  return out;
}

// An executable's absolute, clean path: the CNI runs it as root, so no relative or dotted path.
Result<std::string> HookPath(const json& v, const std::string& where) {
  if (!v.is_string()) return Bad(where, "must be an absolute path");
  const std::string p = v.get<std::string>();
  if (p.empty()) return p;
  if (!IsCleanRoot(p)) {
    return Bad(where, "'" + p + "' is not an absolute, clean path");
  }
  return p;
}

}  // namespace

// "stateRoots", "logRoots", "deviceInfoDirs": each entry an absolute clean path other than /
// (the CNI confines what a NAD names under them, as root).
Result<void> ParseRoots(const json& obj, const std::string& where, NodeConfig* out) {
  for (auto [key, dst] :
       {std::pair{"stateRoots", &out->state_roots}, std::pair{"logRoots", &out->log_roots},
        std::pair{"deviceInfoDirs", &out->device_info_dirs}}) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) continue;
    if (!it->is_array() || it->size() > kMaxRails) {
      return Bad(where + key,
                 "must be an array of at most " + std::to_string(kMaxRails) + " paths");
    }
    dst->clear();  // a node's entry replaces the list it sets
    for (const auto& v : *it) {
      if (!v.is_string() || !IsCleanRoot(v.get<std::string>())) {
        return Bad(where + key, "every entry must be an absolute clean path other than /");
      }
      dst->push_back(v.get<std::string>());
    }
  }
  return {};
}

Result<NodeConfig> ParseCniRoots(std::string_view text) {
  auto doc = ParseUntrustedJson(text, "node config");
  if (!doc) return Bad("(top level)", doc.error().message());
  if (!doc->is_object()) return Bad("(top level)", "must be an object");
  NodeConfig config;
  KUBERDMA_TRY(ParseRoots(*doc, "", &config));
  return config;
}

namespace {

// The fields of one level ("" the top, "nodes.<name>." a node's); unknown keys are errors.
Result<void> ParseLevel(const json& obj, const std::string& where, bool top, NodeConfig* out) {
  if (!obj.is_object()) return Bad(where.empty() ? "(top level)" : where, "must be an object");
  for (const auto& [key, value] : obj.items()) {
    if (key == "rails" || key == "nodeAddresses" || key == "allowUnallocated" || key == "sriov" ||
        key == "partitionHook" || key == "railSwitches" || key == "stateRoots" ||
        key == "logRoots" || key == "deviceInfoDirs" || (top && key == "nodes")) {
      continue;
    }
    return Bad(where + key, std::string("unknown field (known: rails, nodeAddresses, "
                                        "allowUnallocated, sriov, partitionHook, railSwitches, "
                                        "stateRoots, logRoots, deviceInfoDirs") +
                                (top ? ", nodes" : "") + ")");
  }
  KUBERDMA_TRY(ParseRoots(obj, where, out));
  if (auto it = obj.find("partitionHook"); it != obj.end() && !it->is_null()) {
    KUBERDMA_ASSIGN_OR_RETURN(out->partition_hook, HookPath(*it, where + "partitionHook"));
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
  if (obj.contains("railSwitches")) {
    KUBERDMA_ASSIGN_OR_RETURN(out->rail_switches, Names(obj, "railSwitches", where));
  }
  if (obj.contains("sriov") && !obj["sriov"].is_null()) {
    KUBERDMA_ASSIGN_OR_RETURN(out->sriov, VfCounts(obj, where));
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
  if (!config.partition_hook.empty()) j["partitionHook"] = config.partition_hook;
  if (!config.rail_switches.empty()) j["railSwitches"] = config.rail_switches;
  if (!config.state_roots.empty()) j["stateRoots"] = config.state_roots;
  if (!config.log_roots.empty()) j["logRoots"] = config.log_roots;
  if (!config.device_info_dirs.empty()) j["deviceInfoDirs"] = config.device_info_dirs;
  if (!config.sriov.empty()) {
    j["sriov"] = json::array();
    for (const auto& v : config.sriov) {
      json e = {{"numVfs", v.num_vfs}};
      if (v.pf.empty()) {
        e["rail"] = v.rail;
      } else {
        e["pf"] = v.pf;
      }
      j["sriov"].push_back(e);
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace kuberdma::rails
