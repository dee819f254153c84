// SPDX-License-Identifier: Apache-2.0
// The pod-env codec: NCCL_IB_HCA and KUBERDMA_HCAS, written and read.
#include "kuberdma/contract/pod_env.h"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kuberdma/base/json.h"

namespace kuberdma::contract {

using nlohmann::json;

namespace {

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : std::string(s) + ",") {
    if (c == ',' || c == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

json PortJson(const PortInfo& p) {
  json j = {
      {"port", p.port}, {"state", p.state}, {"rateGbps", p.rate_gbps}, {"linkLayer", p.link_layer}};
  if (!p.netdev.empty()) j["netdev"] = p.netdev;
  if (!p.umad.empty()) j["umad"] = p.umad;
  if (!p.issm.empty()) j["issm"] = p.issm;
  return j;
}

json HcaJson(const HcaInfo& h) {
  json ports = json::array();
  for (const auto& p : h.ports) ports.push_back(PortJson(p));
  return {{"name", h.name},          {"pciAddress", h.pci_address}, {"busAddress", h.bus_address},
          {"numaNode", h.numa_node}, {"linkLayer", h.link_layer},   {"nodeGuid", h.node_guid},
          {"netdevs", h.netdevs},    {"uverbs", h.uverbs},          {"healthy", h.healthy},
          {"ports", ports}};
}

std::string Str(const json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// json::value() throws on a present value of another type: read each field by its type.
uint32_t Port(const json& o) {
  auto it = o.find("port");
  if (it == o.end() || !it->is_number_unsigned() || it->get<uint64_t>() > 255) return 0;
  return static_cast<uint32_t>(it->get<uint64_t>());
}

PortInfo PortFrom(const json& p) {
  PortInfo out;
  out.port = Port(p);
  out.state = Str(p, "state");
  out.rate_gbps =
      p.contains("rateGbps") && p["rateGbps"].is_number() ? p["rateGbps"].get<double>() : 0;
  out.link_layer = Str(p, "linkLayer");
  out.netdev = Str(p, "netdev");
  out.umad = Str(p, "umad");
  out.issm = Str(p, "issm");
  return out;
}

Result<HcaInfo> HcaFrom(const json& h, size_t index) {
  std::string where = std::string(kHcas) + "[" + std::to_string(index) + "]";
  if (!h.is_object() || Str(h, "name").empty()) {
    return Fail(ErrorCode::kInvalidArgument, where + " is not an object with a name");
  }
  HcaInfo out;
  out.name = Str(h, "name");
  out.pci_address = Str(h, "pciAddress");
  out.bus_address = Str(h, "busAddress");
  auto numa = h.find("numaNode");
  out.numa_node = numa != h.end() && numa->is_number_integer() && numa->get<int64_t>() >= -1 &&
                          numa->get<int64_t>() < 1024
                      ? static_cast<int>(numa->get<int64_t>())
                      : -1;
  out.link_layer = Str(h, "linkLayer");
  out.node_guid = Str(h, "nodeGuid");
  if (auto it = h.find("netdevs"); it != h.end() && it->is_array()) {
    for (const auto& n : *it) {
      if (n.is_string()) out.netdevs.push_back(n.get<std::string>());
    }
  }
  out.uverbs = Str(h, "uverbs");
  auto healthy = h.find("healthy");
  out.healthy = healthy != h.end() && healthy->is_boolean() && healthy->get<bool>();
  if (auto it = h.find("ports"); it != h.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (!p.is_object())
        return Fail(ErrorCode::kInvalidArgument, where + " has a port that is not an object");
      out.ports.push_back(PortFrom(p));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> IbHcaList::Names() const {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.name);
  return out;
}

const IbHcaEntry* IbHcaList::Find(const std::string& name) const {
  for (const auto& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> IbHcaList::Select(const std::vector<std::string>& present) const {
  std::vector<std::string> out;
  for (const auto& p : present) {
    bool hit = std::any_of(entries.begin(), entries.end(), [&](const IbHcaEntry& e) {
      return exact ? p == e.name : p.rfind(e.name, 0) == 0;  // NCCL's default: prefix
    });
    if (hit != exclude) out.push_back(p);
  }
  return out;
}

IbHcaList ParseIbHca(std::string_view value) {
  IbHcaList out;
  if (!value.empty() && value[0] == '^') {
    out.exclude = true;
    value.remove_prefix(1);
  }
  if (!value.empty() && value[0] == '=') {
    out.exact = true;
    value.remove_prefix(1);
  }
  for (const auto& item : SplitList(value)) {
    auto colon = item.find(':');
    std::string name = item.substr(0, colon);
    auto it = std::find_if(out.entries.begin(), out.entries.end(),
                           [&](const IbHcaEntry& e) { return e.name == name; });
    if (it == out.entries.end()) it = out.entries.insert(out.entries.end(), {name, {}});
    if (colon != std::string::npos) {
      it->ports.push_back(static_cast<uint32_t>(std::atoi(item.c_str() + colon + 1)));
    }
  }
  return out;
}

std::string FormatIbHca(const IbHcaList& list) {
  std::string out = std::string(list.exclude ? "^" : "") + (list.exact ? "=" : "");
  bool first = true;
  for (const auto& e : list.entries) {
    if (e.ports.empty()) {
      out += (first ? "" : ",") + e.name;
      first = false;
    }
    for (uint32_t p : e.ports) {
      out += (first ? "" : ",") + e.name + ":" + std::to_string(p);
      first = false;
    }
  }
  return out;
}

HcaInfo Describe(const sysfs::Hca& h, bool healthy) {
  HcaInfo out{.name = h.name,
              .pci_address = h.pci_address,
              .bus_address = h.address,
              .numa_node = h.numa_node,
              .link_layer = std::string(sysfs::LinkLayerName(h.link_layer())),
              .node_guid = h.node_guid,
              .netdevs = h.netdevs,
              .uverbs = h.uverbs.empty() ? "" : "/dev/infiniband/" + h.uverbs,
              .healthy = healthy};
  for (const auto& p : h.ports) {
    out.ports.push_back({.port = p.number,
                         .state = p.state_name,
                         .rate_gbps = p.rate_gbps,
                         .link_layer = std::string(sysfs::LinkLayerName(p.link_layer)),
                         .netdev = p.netdev,
                         .umad = p.umad.empty() ? "" : "/dev/infiniband/" + p.umad,
                         .issm = p.issm.empty() ? "" : "/dev/infiniband/" + p.issm});
  }
  return out;
}

std::map<std::string, std::string> Encode(const std::vector<HcaInfo>& hcas) {
  IbHcaList active{.exact = true};
  IbHcaList all{.exact = true};
  json desc = json::array();
  for (const auto& h : hcas) {
    IbHcaEntry up{h.name, {}};
    IbHcaEntry every{h.name, {}};
    for (const auto& p : h.ports) {
      every.ports.push_back(p.port);
      if (p.state == "ACTIVE") up.ports.push_back(p.port);
    }
    if (!up.ports.empty()) active.entries.push_back(up);
    if (!every.ports.empty()) all.entries.push_back(every);
    desc.push_back(HcaJson(h));
  }
  // Exact-match form ("=") so mlx5_1 never also selects mlx5_10; active ports only, unless none
  // is.
  return {{kNcclIbHca, FormatIbHca(active.entries.empty() ? all : active)}, {kHcas, desc.dump()}};
}

Result<std::vector<HcaInfo>> DecodeHcas(std::string_view text) {
  json doc = ParseUntrustedJson(text, kHcas).value_or(json());
  if (!doc.is_array()) {
    return Fail(ErrorCode::kInvalidArgument,
                std::string(kHcas) + " is not a JSON array (set by rdma-device-plugin)");
  }
  std::vector<HcaInfo> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    KUBERDMA_ASSIGN_OR_RETURN(HcaInfo h, HcaFrom(doc[i], i));
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<std::string> PodEnv::HcaNames() const {
  std::vector<std::string> out;
  if (hcas) {
    for (const auto& h : *hcas) out.push_back(h.name);
  }
  return out;
}

Result<PodEnv> Read(const std::function<const char*(const char*)>& getenv) {
  PodEnv out;
  if (const char* j = getenv(kHcas); j != nullptr && *j != '\0') {
    KUBERDMA_ASSIGN_OR_RETURN(auto hcas, DecodeHcas(j));
    out.hcas = std::move(hcas);
  }
  if (const char* v = getenv(kNcclIbHca); v != nullptr && *v != '\0') {
    out.ib_hca_raw = v;
    out.ib_hca = ParseIbHca(v);
  }
  return out;
}

std::string FormatClaimPcieRoots(const std::vector<ClaimPair>& pairs) {
  std::string out;
  for (const auto& p : pairs) out += (out.empty() ? "" : ",") + p.hca + "=" + p.root;
  return out;
}

std::vector<ClaimPair> ParseClaimPcieRoots(std::string_view value) {
  std::vector<ClaimPair> out;
  while (!value.empty()) {
    size_t end = std::min(value.find(','), value.size());
    std::string_view entry = value.substr(0, end);
    value.remove_prefix(std::min(end + 1, value.size()));
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.push_back({std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1))});
  }
  return out;
}

}  // namespace kuberdma::contract
