// SPDX-License-Identifier: Apache-2.0
// Result documents for every supported CNI version.
#include "kuberdma/cni/result.h"

#include <algorithm>

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
  return std::any_of(it->begin(), it->end(), [&](const json& i) {
    if (!i.is_object()) return false;
    auto n = i.find("name");
    auto s = i.find("sandbox");
    return n != i.end() && n->is_string() && *n == ifname && s != i.end() && s->is_string() &&
           *s == sandbox;
  });
}

namespace {

// Where `iface` is in `out["interfaces"]`, appending it when it is not listed.
size_t InterfaceIndex(json& out, const std::string& version, const Interface& iface) {
  auto& list = out["interfaces"];
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    if (e.is_object() && e.value("name", "") == iface.name &&
        e.value("sandbox", "") == iface.sandbox) {
      return i;
    }
  }
  list.push_back(InterfaceJson(version, iface));
  return list.size() - 1;
}

void AddIpam(json& out, const std::string& version, size_t index, const IpamResult& ipam) {
  if (!out.contains("ips") || !out["ips"].is_array()) out["ips"] = json::array();
  for (const auto& ip : ipam.ips) {
    json j = {{"address", ip.address.Cidr()}, {"interface", index}};
    if (!ip.gateway.empty()) j["gateway"] = ip.gateway;
    if (CompareVersions(version, "1.0.0") < 0) j["version"] = ip.address.family == 6 ? "6" : "4";
    out["ips"].push_back(j);
  }
  if (!out.contains("routes") || !out["routes"].is_array()) out["routes"] = json::array();
  for (const auto& r : ipam.routes) {
    json j = {{"dst", r.dst.Cidr()}};
    if (!r.gateway.empty()) j["gw"] = r.gateway;
    out["routes"].push_back(j);
  }
  bool has_dns = out.contains("dns") && out["dns"].is_object() && !out["dns"].empty();
  if (!has_dns && !ipam.dns.empty()) out["dns"] = ipam.dns;
}

}  // namespace

json BuildResult(const std::string& version, const Interface& iface,
                 const std::optional<json>& prev, const IpamResult* ipam) {
  json out = prev ? *prev : json::object();
  out["cniVersion"] = version;
  if (!out.contains("interfaces") || !out["interfaces"].is_array()) {
    out["interfaces"] = json::array();
  }
  size_t index = InterfaceIndex(out, version, iface);
  if (ipam != nullptr) AddIpam(out, version, index, *ipam);
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
