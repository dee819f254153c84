// SPDX-License-Identifier: Apache-2.0
// Result documents for every supported CNI version.
#include "kuberdma/cni/result.h"

#include "kuberdma/cni/config.h"

namespace kuberdma::cni {

using nlohmann::json;

namespace {

json InterfaceJson(const std::string& version, const Interface& iface) {
  json j = {{"name", iface.name}, {"mac", iface.mac}, {"sandbox", iface.sandbox}};
  if (CompareVersions(version, "1.1.0") >= 0) {
    if (iface.mtu != 0) j["mtu"] = iface.mtu;
    if (!iface.pci_id.empty()) j["pciID"] = iface.pci_id;
  }
  return j;
}

}  // namespace

bool PrevResultHasInterface(const json& prev, const std::string& ifname,
                            const std::string& sandbox) {
  auto it = prev.find("interfaces");
  if (it == prev.end() || !it->is_array()) return false;
  for (const auto& i : *it) {
    if (!i.is_object()) continue;
    auto n = i.find("name");
    auto s = i.find("sandbox");
    if (n != i.end() && n->is_string() && *n == ifname && s != i.end() && s->is_string() &&
        *s == sandbox) {
      return true;
    }
  }
  return false;
}

json BuildResult(const std::string& version, const Interface& iface,
                 const std::optional<json>& prev) {
  json out = prev ? *prev : json::object();
  out["cniVersion"] = version;
  if (!out.contains("interfaces") || !out["interfaces"].is_array()) {
    out["interfaces"] = json::array();
  }
  if (!PrevResultHasInterface(out, iface.name, iface.sandbox)) {
    out["interfaces"].push_back(InterfaceJson(version, iface));
  }
  // The 0.3.x and 0.4.0 results always carry an ips list; later ones may omit it.
  if (CompareVersions(version, "1.0.0") < 0 && !out.contains("ips")) out["ips"] = json::array();
  if (!out.contains("dns")) out["dns"] = json::object();
  return out;
}

json VersionResult() {
  return {{"cniVersion", "1.1.0"}, {"supportedVersions", SupportedVersions()}};
}

json ErrorResult(const std::string& version, const CniError& err) {
  json j = {
      {"cniVersion", version.empty() ? "1.1.0" : version}, {"code", err.code}, {"msg", err.msg}};
  if (!err.details.empty()) j["details"] = err.details;
  return j;
}

}  // namespace kuberdma::cni
