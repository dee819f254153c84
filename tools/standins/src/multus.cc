// SPDX-License-Identifier: Apache-2.0
// The Multus v4 stand-in: delegate configs, device IDs, runtimeConfig and CNI_ARGS per attachment.
#include "kuberdma/standins/multus.h"

namespace kuberdma::standins {

using nlohmann::json;

namespace {

const sim::Nad* Find(const std::vector<sim::Nad>& nads, const std::string& name) {
  for (const auto& n : nads) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::string CniArgs(const MultusPod& pod) {
  std::string keys = "K8S_POD_NAMESPACE=" + pod.ns + ";K8S_POD_NAME=" + pod.name +
                     ";K8S_POD_INFRA_CONTAINER_ID=" + pod.sandbox + ";K8S_POD_UID=" + pod.uid;
  // Multus's own keys first, then the runtime's it was given (both reach the delegate), as
  // Multus v4.0.2 passes them (measured: docs/cni.md).
  return "IgnoreUnknown=true;" + keys + ";IgnoreUnknown=1;" + keys;
}

// runtimeConfig holds only what the NAD declares as capabilities.
void AddRuntimeConfig(json& conf, const std::string& device_id, const std::string& info_file) {
  auto caps = conf.find("capabilities");
  if (caps == conf.end() || !caps->is_object()) return;
  json rc = json::object();
  if (caps->value("deviceID", false) && !device_id.empty()) rc["deviceID"] = device_id;
  if (caps->value("CNIDeviceInfoFile", false)) rc["CNIDeviceInfoFile"] = info_file;
  if (!rc.empty()) conf["runtimeConfig"] = rc;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> ParseNetworksAnnotation(
    const std::string& annotation) {
  std::vector<std::pair<std::string, std::string>> out;
  json j = json::parse(annotation, nullptr, false);
  if (j.is_array()) {
    for (const auto& e : j) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
        return Fail(ErrorCode::kInvalidArgument, "networks annotation entry without a name");
      }
      out.emplace_back(e["name"].get<std::string>(), e.value("interface", ""));
    }
    return out;
  }
  if (annotation.find_first_of("{[") != std::string::npos) {
    return Fail(ErrorCode::kInvalidArgument, "networks annotation is neither a list nor names");
  }
  size_t pos = 0;
  while (pos <= annotation.size()) {
    size_t end = std::min(annotation.find(',', pos), annotation.size());
    if (end > pos) out.emplace_back(annotation.substr(pos, end - pos), "");
    pos = end + 1;
  }
  return out;
}

Result<std::vector<sim::CniCall>> MultusAdds(const MultusPod& pod,
                                             const std::vector<sim::Nad>& nads,
                                             const std::string& netns,
                                             const json& config_overrides) {
  std::vector<sim::CniCall> calls;
  std::map<std::string, size_t> used;  // resource -> IDs handed out so far
  for (size_t i = 0; i < pod.networks.size(); ++i) {
    const auto& [name, iface] = pod.networks[i];
    const sim::Nad* nad = Find(nads, name);
    if (nad == nullptr) return Fail(ErrorCode::kNotFound, "no NetworkAttachmentDefinition " + name);
    json conf = nad->config;
    std::string ifname = iface.empty() ? "net" + std::to_string(i + 1) : iface;
    std::string device_id;
    if (!nad->resource.empty()) {
      auto ids = pod.allocated.find(nad->resource);
      size_t k = used[nad->resource]++;
      if (ids == pod.allocated.end() || k >= ids->second.size()) {
        return Fail(ErrorCode::kInvalidArgument, name + " attachment " + ifname +
                                                     ": the pod was allocated fewer " +
                                                     nad->resource + " devices than it attaches");
      }
      device_id = ids->second[k];
      conf["deviceID"] = device_id;
      conf["pciBusID"] = device_id;
    }
    AddRuntimeConfig(conf, device_id,
                     "/var/run/k8s.cni.cncf.io/devinfo/cni/" + pod.ns + "-" + name + "-" +
                         pod.sandbox + "-" + ifname + "-device-info.json");
    if (config_overrides.is_object()) conf.update(config_overrides);
    calls.push_back({.command = "ADD",
                     .container_id = pod.sandbox,
                     .netns = netns,
                     .ifname = ifname,
                     .config = conf.dump(),
                     .args = CniArgs(pod)});
  }
  return calls;
}

std::vector<sim::CniCall> MultusDels(const std::vector<sim::CniCall>& adds) {
  std::vector<sim::CniCall> dels(adds.rbegin(), adds.rend());
  for (auto& d : dels) d.command = "DEL";
  return dels;
}

std::map<std::string, std::vector<std::string>> PodResourcesDraAllocated(
    const std::map<std::string, std::vector<std::vector<std::string>>>& claims) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [claim, resources] : claims) {
    auto& ids = out[claim];
    for (const auto& cdi_ids : resources) {
      for (const auto& id : cdi_ids) {
        auto eq = id.find('=');
        if (eq == std::string::npos || id.find('=', eq + 1) != std::string::npos) continue;
        ids.push_back(id.substr(eq + 1));
      }
    }
  }
  return out;
}

std::map<std::string, std::vector<std::string>> DraAllocated(
    const std::vector<nlohmann::json>& allocations, const std::vector<nlohmann::json>& slices) {
  // "driver/pool/device" -> its attributes.
  std::map<std::string, nlohmann::json> attributes;
  for (const auto& s : slices) {
    const auto& spec = s.value("spec", nlohmann::json::object());
    std::string pool = spec.value("pool", nlohmann::json::object()).value("name", "");
    for (const auto& d : spec.value("devices", nlohmann::json::array())) {
      attributes[spec.value("driver", "") + "/" + pool + "/" + d.value("name", "")] =
          d.value("attributes", nlohmann::json::object());
    }
  }
  auto text = [](const nlohmann::json& a, const char* k) -> std::string {
    return a.contains(k) && a[k].contains("string") ? a[k]["string"].get<std::string>() : "";
  };
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& alloc : allocations) {
    const auto& results =
        alloc.value("devices", nlohmann::json::object()).value("results", nlohmann::json::array());
    for (const auto& r : results) {
      auto it = attributes.find(r.value("driver", "") + "/" + r.value("pool", "") + "/" +
                                r.value("device", ""));
      if (it == attributes.end()) continue;
      std::string resource = text(it->second, "k8s.cni.cncf.io/resourceName");
      std::string id = text(it->second, "k8s.cni.cncf.io/deviceID");
      if (!resource.empty() && !id.empty()) out[resource].push_back(id);
    }
  }
  return out;
}

}  // namespace kuberdma::standins
