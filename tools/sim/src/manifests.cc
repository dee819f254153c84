// SPDX-License-Identifier: Apache-2.0
// Rendered Kubernetes objects: YAML documents to JSON with yaml-cpp, then the fields runs use.
#include "kuberdma/sim/manifests.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <regex>

#include "kuberdma/base/files.h"

namespace kuberdma::sim {

using nlohmann::json;

namespace {

// A plain scalar in YAML 1.2's core schema; a quoted one ("!" tag) is always a string.
json Scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;
  static const std::regex kNull("~|null|Null|NULL|");
  static const std::regex kTrue("true|True|TRUE");
  static const std::regex kFalse("false|False|FALSE");
  static const std::regex kInt("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kTrue)) return true;
  if (std::regex_match(s, kFalse)) return false;
  if (std::regex_match(s, kInt)) {
    int64_t v = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    if (std::from_chars(begin, s.data() + s.size(), v).ec == std::errc()) return v;
  }
  if (std::regex_match(s, kFloat)) return std::stod(s);
  return s;
}

json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = ToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& e : n) out.push_back(ToJson(e));
      return out;
    }
    case YAML::NodeType::Scalar:
      return Scalar(n);
    default:
      return nullptr;
  }
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// j[a][b]... or null.
const json& At(const json& j, std::initializer_list<const char*> path) {
  static const json kNull;
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object() || !cur->contains(k)) return kNull;
    cur = &(*cur)[k];
  }
  return *cur;
}

// j when it is an array (or object), else an empty one: a loop over what is missing is no loop.
const json& Array(const json& j) {
  static const json kEmpty = json::array();
  return j.is_array() ? j : kEmpty;
}
const json& Object(const json& j) {
  static const json kEmpty = json::object();
  return j.is_object() ? j : kEmpty;
}

std::vector<std::string> Strings(const json& list) {
  std::vector<std::string> out;
  for (const auto& a : Array(list)) {
    if (a.is_string()) out.push_back(a);
  }
  return out;
}

Container ReadContainer(const json& c) {
  Container out{.name = Str(c, "name"),
                .image = Str(c, "image"),
                .command = Strings(At(c, {"command"})),
                .args = Strings(At(c, {"args"}))};
  for (const auto& e : Array(At(c, {"env"}))) {
    if (e.is_object() && e.contains("value")) {
      const json& v = e["value"];
      out.env.emplace_back(Str(e, "name"), v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  for (const auto& [k, v] : Object(At(c, {"resources", "limits"})).items()) {
    if (v.is_number_integer()) out.limits[k] = v.get<int64_t>();
  }
  return out;
}

// The pod template of a workload object, or null.
const json& PodTemplate(const json& o) {
  std::string kind = Str(o, "kind");
  if (kind == "CronJob") return At(o, {"spec", "jobTemplate", "spec", "template"});
  if (kind == "StatefulSet" || kind == "Deployment" || kind == "Job") {
    return At(o, {"spec", "template"});
  }
  if (kind == "Pod") return o;  // a bare pod is its own template
  return At(o, {"no such path"});
}

}  // namespace

Result<Rendered> LoadRendered(const std::string& path) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Rendered out{.source = path};
  try {
    for (const auto& doc : YAML::LoadAll(text)) {
      json o = ToJson(doc);
      if (o.is_object() && o.contains("kind")) out.objects.push_back(std::move(o));
    }
  } catch (const YAML::Exception& e) {
    return Fail(ErrorCode::kInvalidArgument, path + ": not YAML: " + e.what());
  }
  return out;
}

std::vector<Nad> Rendered::Nads() const {
  std::vector<Nad> out;
  for (const auto& o : objects) {
    if (Str(o, "kind") != "NetworkAttachmentDefinition") continue;
    const json& ann = At(o, {"metadata", "annotations"});
    const json& config = At(o, {"spec", "config"});
    out.push_back({.name = Str(At(o, {"metadata"}), "name"),
                   .ns = Str(At(o, {"metadata"}), "namespace"),
                   .resource = Str(ann, "k8s.v1.cni.cncf.io/resourceName"),
                   .config = config.is_string()
                                 ? json::parse(config.get<std::string>(), nullptr, false)
                                 : json()});
    if (out.back().ns.empty()) out.back().ns = "default";
  }
  return out;
}

std::vector<Workload> Rendered::Workloads() const {
  std::vector<Workload> out;
  for (const auto& o : objects) {
    const json& tpl = PodTemplate(o);
    if (!tpl.is_object()) continue;
    Workload w{.kind = Str(o, "kind"),
               .name = Str(At(o, {"metadata"}), "name"),
               .ns = Str(At(o, {"metadata"}), "namespace")};
    const json& n = At(o, {"spec", w.kind == "Job" ? "parallelism" : "replicas"});
    if (n.is_number_integer()) w.replicas = n.get<int>();
    w.networks = Str(At(tpl, {"metadata", "annotations"}), "k8s.v1.cni.cncf.io/networks");
    for (const auto& c : Array(At(tpl, {"spec", "initContainers"}))) {
      w.init_containers.push_back(ReadContainer(c));
    }
    const json& containers = At(tpl, {"spec", "containers"});
    if (containers.is_array() && !containers.empty()) w.main = ReadContainer(containers[0]);
    for (const auto& c : Array(At(tpl, {"spec", "resourceClaims"}))) {
      if (w.claim.empty()) w.claim = Str(c, "resourceClaimName");
    }
    out.push_back(std::move(w));
  }
  return out;
}

Result<std::string> Rendered::ConfigMapData(const std::string& key) const {
  for (const auto& o : objects) {
    if (Str(o, "kind") != "ConfigMap") continue;
    const json& v = At(o, {"data"});
    if (v.is_object() && v.contains(key) && v[key].is_string()) return v[key].get<std::string>();
  }
  return Fail(ErrorCode::kNotFound, "no ConfigMap in " + source + " has data." + key);
}

std::string Rendered::Summary() const {
  std::string out;
  for (const auto& o : objects) {
    std::string kind = Str(o, "kind");
    if (kind != "ConfigMap" && kind != "NetworkAttachmentDefinition" && !PodTemplate(o).is_object())
      continue;
    std::string ns = Str(At(o, {"metadata"}), "namespace");
    out += (out.empty() ? "" : ", ") + kind + " " + (ns.empty() ? "" : ns + "/") +
           Str(At(o, {"metadata"}), "name");
  }
  return out;
}

}  // namespace kuberdma::sim
