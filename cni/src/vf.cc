// SPDX-License-Identifier: Apache-2.0
// Mode vf's rules: generated MACs and GUIDs, checked GUIDs, the PF change a config asks for, and
// a VF's settings in the state record.
#include "kuberdma/cni/vf.h"

#include <cstdio>

#include "kuberdma/cni/plan.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::cni {

using json = nlohmann::json;
using link::VfChange;
using link::VfConfig;

CniResult<uint64_t> CheckVfGuid(std::string_view text, std::string_view field) {
  auto g = link::ParseGuid(text);
  if (!g) {
    return CniFail(kInvalidConfig,
                   "invalid network config: " + std::string(field) + ": " + g.error().message());
  }
  std::string why;
  if (*g == 0) why = "all zero (the GUID an unset VF reports)";
  if (*g == ~uint64_t{0}) why = "all ones";
  if (why.empty() && ((*g >> 56) & 1U) != 0) why = "a group (multicast) identifier";
  if (!why.empty()) {
    return CniFail(kInvalidConfig, "invalid network config: " + std::string(field) + " " +
                                       std::string(text) + " is " + why +
                                       ": a VF needs a unicast GUID of its own");
  }
  return *g;
}

std::string GeneratedVfMac(const std::string& network, const std::string& container_id,
                           const std::string& ifname, uint32_t salt) {
  // 0x06: locally administered and unicast, apart from the children's 0x02 (ChildMac).
  return DerivedMac(0x06, {network, container_id, ifname, std::to_string(salt)});
}

CniResult<VfChange> WantedVfChange(const VfConf& vf, uint32_t index, bool infiniband,
                                   const std::string& mac, uint64_t guid) {
  VfChange c{.vf = index, .link_state = vf.link_state};
  if (vf.min_tx_rate || vf.max_tx_rate) {
    c.min_tx_rate = vf.min_tx_rate.value_or(0);
    c.max_tx_rate = vf.max_tx_rate.value_or(0);
  }
  if (infiniband) {
    if (vf.vlan || vf.trust) {
      return CniFail(kInvalidConfig,
                     std::string("invalid network config: ") + (vf.vlan ? "vlan" : "trust") +
                         " is an Ethernet VF's setting; on InfiniBand a partition (pkey) "
                         "separates tenants");
    }
    c.node_guid = guid;
    c.port_guid = guid;
    return c;
  }
  c.mac = mac;
  if (vf.vlan) {
    c.vlan = *vf.vlan;
    c.qos = vf.qos;
  }
  c.spoofchk = vf.spoofchk;
  c.trust = vf.trust;
  return c;
}

Result<link::LinkInfo> HostNetdevAt(link::LinkOps& links, const sysfs::SysfsRoot& root,
                                    const std::string& address, const link::NetNs& host) {
  KUBERDMA_ASSIGN_OR_RETURN(auto names, sysfs::NetdevsAtAddress(root, address));
  for (const auto& n : names) {
    if (auto l = links.GetByName(host, n)) return *l;
  }
  return Fail(ErrorCode::kNotFound, address + " has no netdev in the host namespace");
}

Result<std::optional<VfConfig>> ReportedVf(link::VfOps& vfs, const link::NetNs& host,
                                           int pf_ifindex, uint32_t index) {
  KUBERDMA_ASSIGN_OR_RETURN(auto all, vfs.List(host, pf_ifindex));
  for (auto& v : all) {
    if (v.vf == index) return std::optional<VfConfig>(std::move(v));
  }
  return std::optional<VfConfig>{};
}

json VfConfigToJson(const VfConfig& v) {
  json j = {{"vf", v.vf}, {"mac", v.mac}, {"vlan", v.vlan}, {"qos", v.qos}};
  if (v.has_spoofchk) j["spoofchk"] = v.spoofchk;
  if (v.has_trust) j["trust"] = v.trust;
  if (v.has_link_state) j["linkState"] = std::string(link::VfLinkStateName(v.link_state));
  if (v.has_rate) j["rate"] = {{"min", v.min_tx_rate}, {"max", v.max_tx_rate}};
  if (v.has_guids) {
    j["nodeGuid"] = link::FormatGuidColons(v.node_guid);
    j["portGuid"] = link::FormatGuidColons(v.port_guid);
  }
  return j;
}

namespace {

template <typename T>
bool Read(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return false;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else {
    if (!it->is_number_unsigned()) return false;
  }
  *out = it->get<T>();
  return true;
}

}  // namespace

VfConfig VfConfigFromJson(const json& j) {
  VfConfig v;
  if (!j.is_object()) return v;
  Read(j, "vf", &v.vf);
  Read(j, "mac", &v.mac);
  Read(j, "vlan", &v.vlan);
  Read(j, "qos", &v.qos);
  v.has_spoofchk = Read(j, "spoofchk", &v.spoofchk);
  v.has_trust = Read(j, "trust", &v.trust);
  std::string ls;
  if (Read(j, "linkState", &ls)) {
    if (auto parsed = link::ParseVfLinkState(ls)) {
      v.link_state = *parsed;
      v.has_link_state = true;
    }
  }
  if (auto it = j.find("rate"); it != j.end() && it->is_object()) {
    v.has_rate = Read(*it, "min", &v.min_tx_rate) && Read(*it, "max", &v.max_tx_rate);
  }
  std::string node;
  std::string port;
  if (Read(j, "nodeGuid", &node) && Read(j, "portGuid", &port)) {
    auto n = link::ParseGuid(node);
    auto p = link::ParseGuid(port);
    if (n && p) {
      v.node_guid = *n;
      v.port_guid = *p;
      v.has_guids = true;
    }
  }
  return v;
}

json VfChangeToJson(const VfChange& c) {
  json j = {{"vf", c.vf}};
  if (c.mac) j["mac"] = *c.mac;
  if (c.vlan) j["vlan"] = *c.vlan;
  if (c.vlan) j["qos"] = c.qos;
  if (c.spoofchk) j["spoofchk"] = *c.spoofchk;
  if (c.trust) j["trust"] = *c.trust;
  if (c.link_state) j["linkState"] = std::string(link::VfLinkStateName(*c.link_state));
  if (c.min_tx_rate) j["minTxRate"] = *c.min_tx_rate;
  if (c.max_tx_rate) j["maxTxRate"] = *c.max_tx_rate;
  if (c.node_guid) j["nodeGuid"] = link::FormatGuidColons(*c.node_guid);
  if (c.port_guid) j["portGuid"] = link::FormatGuidColons(*c.port_guid);
  return j;
}

std::string VfDrift(const json& set, const VfConfig& now) {
  json has = VfConfigToJson(now);  // in the record's terms; rates as VfChangeToJson names them
  if (now.has_rate) {
    has["minTxRate"] = now.min_tx_rate;
    has["maxTxRate"] = now.max_tx_rate;
  }
  for (const auto& [key, want] : set.items()) {
    auto it = has.find(key);
    if (key == "vf" || it == has.end()) continue;  // a setting the driver does not report
    const bool same = key == "mac" && it->is_string() && want.is_string()
                          ? link::NormalizeMac(it->get<std::string>()) ==
                                link::NormalizeMac(want.get<std::string>())
                          : *it == want;
    if (!same) return key + " is " + it->dump() + " (ADD set " + want.dump() + ")";
  }
  return "";
}

}  // namespace kuberdma::cni
