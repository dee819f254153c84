// SPDX-License-Identifier: Apache-2.0
// The DRA driver's preparing: a claim's allocation checked and made a CDI spec (prepare.h).
#include "kuberdma/dra/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "kuberdma/base/files.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/contract/slot_id.h"

namespace kuberdma::dra {

using nlohmann::json;

namespace {

const json& At(const json& j, std::initializer_list<const char*> path) {
  static const json kNull;
  const json* at = &j;
  for (const char* k : path) {
    if (!at->is_object() || !at->contains(k)) return kNull;
    at = &(*at)[k];
  }
  return *at;
}

std::string Str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// The HCA whose port `device` names among `r`'s present HCAs, or "".
std::string HcaOfDevice(const deviceplugin::Resource& r, const std::string& device) {
  for (const auto& [name, h] : r.hcas()) {
    if (!h.present) continue;
    for (const auto& p : h.hca.ports) {
      if (DeviceName(name, p.number, h.hca.ports.size() > 1) == device) return name;
    }
  }
  return "";
}

// The allocation's node selector, where it has one, must take this node.
Result<void> CheckNode(const json& allocation, const ClaimRef& ref, const std::string& node) {
  const json& terms = At(allocation, {"nodeSelector", "nodeSelectorTerms"});
  if (!terms.is_array() || terms.empty()) return {};
  for (const auto& t : terms) {
    for (const auto& f : t.value("matchFields", json::array())) {
      if (Str(f, "key") != "metadata.name" || Str(f, "operator") != "In") continue;
      auto values = f.value("values", std::vector<std::string>{});
      if (std::find(values.begin(), values.end(), node) != values.end()) return {};
    }
  }
  return Fail(ErrorCode::kInvalidArgument,
              "claim " + ref.Text() + " is allocated to another node, not " + node);
}

// commLibraries: "all", "none", a comma list, or a list of names.
Result<std::vector<contract::Library>> CommLibraries(const json& v) {
  std::string list;
  if (v.is_string()) {
    list = v.get<std::string>();
  } else if (v.is_array()) {
    for (const auto& n : v) {
      if (!n.is_string()) return Fail(ErrorCode::kInvalidArgument, "must be names (strings)");
      list += (list.empty() ? "" : ",") + n.get<std::string>();
    }
  } else {
    return Fail(ErrorCode::kInvalidArgument, R"(must be a list of names, "all" or "none")");
  }
  if (list.empty() || list == "none") return std::vector<contract::Library>{};
  return contract::ParseLibraries(list);
}

Result<void> ParseConfig(const json& allocation, const ClaimRef& ref, const std::string& driver,
                         ClaimConfig* out) {
  for (const auto& c : At(allocation, {"devices", "config"}).is_array()
                           ? At(allocation, {"devices", "config"})
                           : json::array()) {
    const json& opaque = At(c, {"opaque"});
    if (Str(opaque, "driver") != driver) continue;
    const json& p = At(opaque, {"parameters"});
    auto bad = [&](const std::string& why) {
      return Fail(ErrorCode::kInvalidArgument,
                  "claim " + ref.Text() + ": its " + driver + " config: " + why);
    };
    if (!p.is_object()) return bad("parameters must be an object");
    for (const auto& [k, v] : p.items()) {
      if (k == "mtu" && v.is_number_integer() && v.get<int64_t>() >= 68 &&
          v.get<int64_t>() <= 65535) {
        out->mtu = v.get<int>();
      } else if (k == "linkState" && v.is_string() &&
                 std::set<std::string>{"enable", "disable", "auto"}.contains(
                     v.get<std::string>())) {
        out->link_state = v.get<std::string>();
      } else if (k == "mode" && v.is_string() &&
                 std::set<std::string>{"exclusive", "macvlan", "ipvlan"}.contains(
                     v.get<std::string>())) {
        out->mode = v.get<std::string>();
      } else if (k == "commLibraries") {
        auto libs = CommLibraries(v);
        if (!libs) return bad("commLibraries: " + libs.error().message());
        out->comm_libraries = *libs;
      } else if (k == "mtu" || k == "linkState" || k == "mode") {
        return bad(k + " is " + v.dump() +
                   " (mtu: 68..65535; linkState: enable, disable, auto; mode: exclusive, "
                   "macvlan, ipvlan)");
      } else {
        return bad("unknown field '" + k + "' (known: mtu, linkState, mode, commLibraries)");
      }
    }
  }
  return {};
}

}  // namespace

Result<std::vector<AllocatedDevice>> OurDevices(const json& claim, const ClaimRef& ref,
                                                const PublishOptions& o,
                                                const deviceplugin::Resource& r,
                                                ClaimConfig* config) {
  std::string uid = Str(At(claim, {"metadata"}), "uid");
  if (uid != ref.uid) {
    return Fail(ErrorCode::kNotFound, "claim " + ref.ns + "/" + ref.name + " is now uid '" + uid +
                                          "', not the " + ref.uid +
                                          " the kubelet asked for: deleted and created again");
  }
  const json& allocation = At(claim, {"status", "allocation"});
  if (!allocation.is_object()) {
    return Fail(ErrorCode::kBusy, "claim " + ref.Text() + " is not allocated (yet)");
  }
  KUBERDMA_TRY(CheckNode(allocation, ref, o.node));
  ClaimConfig parsed;
  KUBERDMA_TRY(ParseConfig(allocation, ref, o.driver, &parsed));
  if (config != nullptr) *config = parsed;
  std::string pool = o.node + "/" + DeviceName(r.config().resource_name, 0, false);
  std::vector<AllocatedDevice> out;
  const json& results = At(allocation, {"devices", "results"});
  for (const auto& x : results.is_array() ? results : json::array()) {
    if (Str(x, "driver") != o.driver) continue;
    AllocatedDevice d{
        .request = Str(x, "request"), .pool = Str(x, "pool"), .device = Str(x, "device")};
    if (d.pool != pool) {
      return Fail(ErrorCode::kInvalidArgument, "claim " + ref.Text() + ": device " + d.device +
                                                   " is from pool '" + d.pool +
                                                   "', not this node's " + pool);
    }
    d.hca = HcaOfDevice(r, d.device);
    if (d.hca.empty()) {
      return Fail(ErrorCode::kNotFound, "claim " + ref.Text() + ": device " + d.device +
                                            " is no HCA of " + o.node +
                                            " (gone since allocation?)");
    }
    out.push_back(std::move(d));
  }
  if (out.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "claim " + ref.Text() + " has no device of driver " + o.driver);
  }
  return out;
}

namespace {

// Whether constraint `c` (its "requests", all when absent) covers request `r`.
bool Covers(const json& c, const std::string& r) {
  const json& reqs = At(c, {"requests"});
  if (!reqs.is_array() || reqs.empty()) return true;
  return std::ranges::any_of(reqs, [&](const json& x) { return x.is_string() && x == r; });
}

// The pods the claim is reserved for, "ns/name".
std::vector<std::string> ReservedPods(const json& claim, const std::string& ns) {
  std::vector<std::string> out;
  const json& reserved = At(claim, {"status", "reservedFor"});
  for (const auto& x : reserved.is_array() ? reserved : json::array()) {
    if (Str(x, "resource") == "pods" && !Str(x, "name").empty())
      out.push_back(ns + "/" + Str(x, "name"));
  }
  return out;
}

}  // namespace

std::string AlignedRoots(const json& claim, const std::string& driver,
                         const std::vector<AllocatedDevice>& devices,
                         const deviceplugin::Resource& r) {
  const json& results = At(claim, {"status", "allocation", "devices", "results"});
  const json& constraints = At(claim, {"spec", "devices", "constraints"});
  std::vector<contract::ClaimPair> out;
  for (const auto& d : devices) {
    bool tied = false;
    for (const auto& c : constraints.is_array() ? constraints : json::array()) {
      if (Str(c, "matchAttribute") != kPcieRootAttribute || !Covers(c, d.request)) continue;
      for (const auto& x : results.is_array() ? results : json::array()) {
        tied = tied || (Str(x, "driver") != driver && Covers(c, Str(x, "request")));
      }
    }
    auto h = r.hcas().find(d.hca);
    if (!tied || h == r.hcas().end()) continue;
    std::string root = PcieRoot(h->second.hca.device_path);
    if (!root.empty()) out.push_back({d.hca, root});
  }
  return contract::FormatClaimPcieRoots(out);
}

std::string Preparer::SpecPath(const ClaimRef& ref) const {
  return cdi_dir_ + "/kube-rdma-claim-" + ref.uid + ".json";
}

namespace {

// The CDI device name of `d` (contract/slot_id.h's claim device): the suffix released Multus
// passes as deviceID, which the CNI maps back to this one HCA of this claim.
std::string CdiName(const ClaimRef& ref, const AllocatedDevice& d,
                    const deviceplugin::Resource& r) {
  auto h = r.hcas().find(d.hca);
  contract::ClaimDevice id{.uid = ref.uid, .address = d.hca};
  if (h != r.hcas().end()) {
    if (!h->second.hca.pci_address.empty()) id.address = h->second.hca.pci_address;
    if (h->second.hca.ports.size() > 1) {
      for (const auto& p : h->second.hca.ports) {
        if (DeviceName(d.hca, p.number, true) == d.device) id.port = p.number;
      }
    }
  }
  return contract::FormatClaimDevice(id);
}

std::vector<contract::CdiDeviceNode> DeviceNodes(
    const std::vector<deviceplugin::DeviceNode>& devices, const std::set<std::string>& leave_out) {
  std::vector<contract::CdiDeviceNode> out;
  for (const auto& d : devices) {
    if (!leave_out.contains(d.container_path)) out.push_back({d.container_path, d.host_path});
  }
  return out;
}

// What every device of the claim needs (rdma_cm) is the spec's own edit, applied once for any of
// them; each device's uverbs (and umad, issm) nodes are its own, so that a container that
// references one request of the claim gets that HCA alone. The paths in every `per_device`.
std::set<std::string> CommonNodes(
    const std::vector<std::vector<deviceplugin::DeviceNode>>& per_device,
    const std::vector<deviceplugin::DeviceNode>& all) {
  std::set<std::string> common;
  if (per_device.size() < 2) return common;
  for (const auto& d : all) {
    bool everywhere = std::ranges::all_of(per_device, [&](const auto& one) {
      return std::ranges::any_of(
          one, [&](const auto& x) { return x.container_path == d.container_path; });
    });
    if (everywhere) common.insert(d.container_path);
  }
  return common;
}

}  // namespace

std::vector<std::string> Preparer::ClaimEnv(
    const ClaimRef& ref, const json& claim, const std::vector<AllocatedDevice>& devices,
    const std::map<std::string, std::string>& plugin_env) const {
  std::vector<std::string> env;
  for (const auto& [k, v] : plugin_env) env.push_back(k + "=" + v);
  env.push_back(std::string(kClaimEnv) + "=" + ref.ns + "/" + ref.name);
  std::string roots = AlignedRoots(claim, o_.driver, devices, r_);
  if (!roots.empty()) env.push_back(std::string(kClaimRootsEnv) + "=" + roots);
  return env;
}

Result<contract::CdiSpec> Preparer::Spec(const ClaimRef& ref, const json& claim,
                                         std::vector<AllocatedDevice>& devices) const {
  // The device plugin's own Allocate, for device nodes rather than its CDI names.
  deviceplugin::ResourceConfig cfg = r_.config();
  cfg.cdi = false;
  ClaimConfig config;
  KUBERDMA_TRY(ParseConfig(At(claim, {"status", "allocation"}), ref, o_.driver, &config));
  if (config.comm_libraries) cfg.comm_libraries = *config.comm_libraries;
  deviceplugin::Resource nodes(cfg, r_.root());
  std::vector<sysfs::Hca> present;
  for (const auto& [name, h] : r_.hcas()) {
    if (h.present) present.push_back(h.hca);
  }
  nodes.Refresh(present);
  std::vector<std::string> slots;
  std::vector<std::vector<deviceplugin::DeviceNode>> per_device;
  for (const auto& d : devices) {
    std::string id =
        contract::FormatSlot({contract::SlotKind::kPerHca, d.hca, 0}, cfg.rdma_hca_max);
    KUBERDMA_ASSIGN_OR_RETURN(auto one, nodes.Allocate({id}));
    per_device.push_back(one.devices);
    if (std::find(slots.begin(), slots.end(), id) == slots.end()) slots.push_back(id);
  }
  KUBERDMA_ASSIGN_OR_RETURN(auto alloc, nodes.Allocate(slots));
  std::set<std::string> common = CommonNodes(per_device, alloc.devices);
  std::vector<std::string> env = ClaimEnv(ref, claim, devices, alloc.envs);
  std::vector<deviceplugin::DeviceNode> shared;
  for (const auto& d : alloc.devices) {
    if (common.contains(d.container_path)) shared.push_back(d);
  }
  contract::CdiSpec spec{.kind = std::string(contract::kClaimDeviceCdiKind),
                         .edits = {.device_nodes = DeviceNodes(shared, {}), .env = env}};
  for (size_t i = 0; i < devices.size(); ++i) {
    std::string name = CdiName(ref, devices[i], r_);
    devices[i].cdi_id = std::string(contract::kClaimDeviceCdiKind) + "=" + name;
    if (std::ranges::none_of(spec.devices, [&](const auto& x) { return x.name == name; }))
      spec.devices.push_back({name, {.device_nodes = DeviceNodes(per_device[i], common)}});
  }
  return spec;
}

Result<Prepared> Preparer::Prepare(const ClaimRef& ref, const json& claim) const {
  if (ref.uid.empty() || ref.uid.find_first_of("/._") != std::string::npos) {
    return Fail(ErrorCode::kInvalidArgument, "claim uid '" + ref.uid + "' is not a UID");
  }
  KUBERDMA_ASSIGN_OR_RETURN(auto devices, OurDevices(claim, ref, o_, r_));
  KUBERDMA_ASSIGN_OR_RETURN(contract::CdiSpec spec, Spec(ref, claim, devices));
  KUBERDMA_TRY(MakeDirs(cdi_dir_));
  if (!allocations_dir_.empty()) {
    std::vector<std::string> hcas;
    for (const auto& d : devices) hcas.push_back(d.hca);
    KUBERDMA_TRY(contract::RecordClaim(allocations_dir_, {.claim = ref.ns + "/" + ref.name,
                                                          .uid = ref.uid,
                                                          .pods = ReservedPods(claim, ref.ns),
                                                          .hcas = hcas}));
  }
  KUBERDMA_TRY(contract::WriteCdiSpec(SpecPath(ref), spec));
  return Prepared{.devices = std::move(devices)};
}

Result<void> Preparer::Unprepare(const ClaimRef& ref) const {
  if (ref.uid.empty() || ref.uid.find_first_of("/.") != std::string::npos) {
    return Fail(ErrorCode::kInvalidArgument, "claim uid '" + ref.uid + "' is not a UID");
  }
  if (::unlink(SpecPath(ref).c_str()) != 0 && errno != ENOENT) {
    return FailErrno(errno, "remove the CDI spec " + SpecPath(ref));
  }
  if (!allocations_dir_.empty()) KUBERDMA_TRY(contract::RemoveClaim(allocations_dir_, ref.uid));
  return {};
}

}  // namespace kuberdma::dra
