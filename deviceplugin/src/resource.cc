// SPDX-License-Identifier: Apache-2.0
// Resource: selection, health, allocation and preference over the HCA model.
#include "kuberdma/deviceplugin/resource.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "kuberdma/base/log_text.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/contract/slot_id.h"

namespace kuberdma::deviceplugin {

using nlohmann::json;
using sysfs::Hca;

namespace {

bool Any(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

std::string Strip0x(const std::string& s) { return s.rfind("0x", 0) == 0 ? s.substr(2) : s; }

using contract::FormatSlot;
using contract::ParseSlot;
using contract::Slot;
using contract::SlotKind;

std::string Health(const Hca& h, bool* healthy) {
  if (h.ports.empty()) {
    *healthy = false;
    return "no ports";
  }
  for (const auto& p : h.ports) {
    if (p.state != sysfs::kPortActive) {
      *healthy = false;
      return "port " + std::to_string(p.number) + " " +
             (p.state_name.empty() ? "DOWN" : p.state_name);
    }
  }
  *healthy = true;
  return "";
}

}  // namespace

Resource::Resource(ResourceConfig cfg, sysfs::SysfsRoot root)
    : cfg_(std::move(cfg)), root_(std::move(root)) {}

namespace {

std::string FunctionKind(const Hca& h) {
  if (h.bus == sysfs::BusKind::kAuxiliary) return "sf";
  return h.pf_address.empty() ? "pf" : "vf";
}

std::string WithDomain(const std::string& a) {
  return (a.size() == 7 && a[2] == ':') ? "0000:" + a : a;
}

// The PF side of the SR-IOV selectors: a VF by its PF, a PF by itself.
bool SelectsByPf(const Selectors& s, const Hca& h, const std::vector<Hca>& all) {
  const std::string pf = h.pf_address.empty() ? h.pci_address : h.pf_address;
  if (!s.root_devices.empty() &&
      std::none_of(s.root_devices.begin(), s.root_devices.end(),
                   [&](const std::string& a) { return WithDomain(a) == pf; })) {
    return false;
  }
  if (s.pf_names.empty()) return true;
  std::vector<std::string> pf_netdevs =
      h.pf_address.empty() ? h.netdevs : std::vector<std::string>{};
  for (const auto& other : all) {
    if (h.pf_address.empty() || !other.pf_address.empty() || other.pci_address != pf) continue;
    pf_netdevs.insert(pf_netdevs.end(), other.netdevs.begin(), other.netdevs.end());
  }
  return std::any_of(pf_netdevs.begin(), pf_netdevs.end(),
                     [&](const std::string& n) { return Any(s.pf_names, n); });
}

}  // namespace

namespace {

std::string List(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return "[" + out + "]";
}

// "field [listed] does not list value" when `list` is set and `value` is not in it.
std::string Unlisted(const char* field, const std::vector<std::string>& list,
                     const std::string& value) {
  if (list.empty() || Any(list, value)) return "";
  return std::string(field) + " " + List(list) + " does not list " +
         (value.empty() ? "(none)" : value);
}

std::string ByIdentity(const Selectors& s, const Hca& h) {
  if (!s.if_names.empty() && std::none_of(h.netdevs.begin(), h.netdevs.end(),
                                          [&](const auto& n) { return Any(s.if_names, n); })) {
    return "ifNames " + List(s.if_names) + " lists none of its netdevs " + List(h.netdevs);
  }
  std::string lt = h.link_layer() == sysfs::LinkLayer::kInfiniBand ? "infiniband" : "ether";
  if (auto why = Unlisted("linkTypes", s.link_types, lt); !why.empty()) return why;
  if (!s.pci_addresses.empty() &&
      std::none_of(s.pci_addresses.begin(), s.pci_addresses.end(), [&](const std::string& a) {
        return WithDomain(a) == h.address || WithDomain(a) == h.pci_address;
      })) {
    return "pciAddresses " + List(s.pci_addresses) + " does not list " + h.address;
  }
  return Unlisted("hcaNames", s.hca_names, h.name);
}

}  // namespace

std::string Resource::WhyNotSelected(const Hca& h, const std::vector<Hca>& all,
                                     const rails::NodeRoles* roles) const {
  const Selectors& s = cfg_.selectors;
  const rails::HcaRole* role = roles == nullptr ? nullptr : roles->Find(h.name);
  // Before any selector: the node's own NIC is offered by no resource, however it is selected.
  if (role != nullptr && !role->node_own.empty()) return "the node's own NIC: " + role->node_own;
  for (const std::string& why : {Unlisted("functions", s.functions, FunctionKind(h)),
                                 Unlisted("vendors", s.vendors, Strip0x(h.vendor)),
                                 Unlisted("deviceIDs", s.device_ids, Strip0x(h.device_id)),
                                 Unlisted("drivers", s.drivers, h.driver), ByIdentity(s, h)}) {
    if (!why.empty()) return why;
  }
  if (!SelectsByPf(s, h, all)) return "pfNames/rootDevices name another PF";
  if (!s.rails.empty()) {
    int rail = role == nullptr ? 0 : role->rail;
    if (std::find(s.rails.begin(), s.rails.end(), rail) == s.rails.end()) {
      return rail == 0 ? "rails selects rails, and it is on none (" +
                             (role == nullptr ? std::string("not judged") : role->no_rail) + ")"
                       : "on rail " + std::to_string(rail) + ", which rails does not list";
    }
  }
  return "";
}

bool Resource::Selects(const Hca& h, const std::vector<Hca>& all,
                       const rails::NodeRoles* roles) const {
  return WhyNotSelected(h, all, roles).empty();
}

bool Resource::Refresh(const std::vector<Hca>& all, const rails::NodeRoles* roles) {
  // The advertised list is a function of each HCA's presence, health and NUMA node: compare those
  // rather than building the (possibly 8000-entry) device list twice every poll.
  auto state = [this] {
    std::map<std::string, std::tuple<bool, int>> s;
    for (const auto& [name, st] : hcas_) s[name] = {st.healthy, st.hca.numa_node};
    return s;
  };
  auto before = state();
  for (auto& [name, st] : hcas_) st.present = false;
  std::map<std::string, std::string> taken_by_node;
  for (const auto& h : all) {
    const rails::HcaRole* role = roles == nullptr ? nullptr : roles->Find(h.name);
    if (role != nullptr && !role->node_own.empty()) taken_by_node[h.name] = role->node_own;
    if (!Selects(h, all, roles)) continue;
    HcaHealth& st = hcas_[h.name];
    st.hca = h;
    st.present = true;
    st.node_own = false;
    st.reason = Health(h, &st.healthy);
  }
  for (auto& [name, st] : hcas_) {
    if (!st.present) {
      st.healthy = false;
      // An HCA that became the node's own (an address or route added on the host) stops being
      // offered: Unhealthy, saying why, so no new pod gets it.
      auto own = taken_by_node.find(name);
      st.node_own = own != taken_by_node.end();
      st.reason = st.node_own ? "the node's own NIC: " + own->second : "gone";
    }
  }
  return state() != before;
}

size_t Resource::healthy_slots() const {
  size_t healthy = healthy_hcas();
  if (cfg_.policy == Policy::kPerHca) return healthy * cfg_.rdma_hca_max;
  return healthy > 0 ? cfg_.rdma_hca_max : 0;
}

size_t Resource::slots() const {
  if (hcas_.empty()) return 0;
  return cfg_.policy == Policy::kPerHca ? hcas_.size() * cfg_.rdma_hca_max : cfg_.rdma_hca_max;
}

size_t Resource::healthy_hcas() const {
  return static_cast<size_t>(
      std::count_if(hcas_.begin(), hcas_.end(), [](const auto& kv) { return kv.second.healthy; }));
}

std::vector<DeviceView> Resource::Devices() const {
  std::vector<DeviceView> out;
  if (hcas_.empty()) return out;
  std::vector<const HcaHealth*> ordered;
  for (const auto& [n, st] : hcas_) ordered.push_back(&st);
  std::sort(ordered.begin(), ordered.end(), [](const HcaHealth* a, const HcaHealth* b) {
    return sysfs::NaturalLess(a->hca.name, b->hca.name);
  });
  if (cfg_.policy == Policy::kPerHca) {
    for (const auto* st : ordered) {
      std::vector<int64_t> numa;
      if (st->hca.numa_node >= 0) numa.push_back(st->hca.numa_node);
      for (uint32_t i = 0; i < cfg_.rdma_hca_max; ++i) {
        out.push_back({FormatSlot({SlotKind::kPerHca, st->hca.name, i}, cfg_.rdma_hca_max),
                       st->healthy, numa});
      }
    }
    return out;
  }
  // Pool: every slot stands for the whole pool; usable while any HCA of it is.
  std::set<int64_t> numa;
  for (const auto* st : ordered) {
    if (st->hca.numa_node >= 0) numa.insert(st->hca.numa_node);
  }
  bool healthy = healthy_hcas() > 0;
  std::vector<int64_t> nodes(numa.begin(), numa.end());
  for (uint32_t i = 0; i < cfg_.rdma_hca_max; ++i) {
    out.push_back(
        {FormatSlot({SlotKind::kPool, cfg_.resource_name, i}, cfg_.rdma_hca_max), healthy, nodes});
  }
  return out;
}

// A slot ID names a slot of this resource when it parses, is one this resource advertises (same
// kind, existing HCA or this pool, index in range) and is written exactly as FormatSlot writes it.
std::string Resource::HcaOfSlot(const std::string& id) const {
  auto s = ParseSlot(id);
  if (cfg_.policy != Policy::kPerHca || !s || s->kind != SlotKind::kPerHca) return "";
  if (!hcas_.contains(s->base) || s->index >= cfg_.rdma_hca_max) return "";
  return FormatSlot(*s, cfg_.rdma_hca_max) == id ? s->base : "";
}

bool Resource::IsPoolSlot(const std::string& id) const {
  auto s = ParseSlot(id);
  if (hcas_.empty() || !s || s->kind != SlotKind::kPool || s->base != cfg_.resource_name) {
    return false;
  }
  return s->index < cfg_.rdma_hca_max && FormatSlot(*s, cfg_.rdma_hca_max) == id;
}

void Resource::AddDeviceNodes(const Hca& h, ContainerAllocation* out) const {
  auto add = [&](const std::string& dev) {
    if (dev.empty()) return;
    out->devices.push_back({"/dev/infiniband/" + dev, root_.Dev("infiniband/" + dev), "rw"});
  };
  add(h.uverbs);
  if (!cfg_.inject_mad) return;
  for (const auto& p : h.ports) {
    add(p.umad);
    add(p.issm);
  }
}

Result<std::vector<const HcaHealth*>> Resource::HcasOf(const std::vector<std::string>& ids) const {
  // The kubelet names every slot it allocated; an empty list is a malformed request, never "all".
  if (ids.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "Allocate for " + cfg_.FullName() + " names no device IDs (devices_ids is empty)");
  }
  std::vector<const HcaHealth*> chosen;
  auto pick = [&](const std::string& name) {
    const HcaHealth* st = &hcas_.at(name);
    if (std::find(chosen.begin(), chosen.end(), st) == chosen.end()) chosen.push_back(st);
  };
  for (const auto& id : ids) {
    // IDs are parsed, not looked up in Devices(): building 8000 views per call made Allocate O(N).
    std::string hca = cfg_.policy == Policy::kPerHca ? HcaOfSlot(id) : "";
    bool exists = cfg_.policy == Policy::kPerHca ? !hca.empty() : IsPoolSlot(id);
    if (!exists) {
      return Fail(ErrorCode::kInvalidArgument,
                  "unknown device ID '" + id + "' for resource " + cfg_.FullName());
    }
    if (!hca.empty()) pick(hca);
  }
  if (cfg_.policy == Policy::kPool) {
    for (const auto& [name, st] : hcas_) {
      if (st.present) pick(name);
    }
  }
  std::sort(chosen.begin(), chosen.end(), [](const HcaHealth* a, const HcaHealth* b) {
    return sysfs::NaturalLess(a->hca.name, b->hca.name);
  });
  return chosen;
}

void Resource::AddCommEnv(const std::vector<contract::HcaInfo>& described,
                          ContainerAllocation* out) const {
  if (cfg_.comm_libraries.empty()) return;
  contract::CommTopology t{.hcas = contract::CommHcasOf(described),
                           .control_netdev = cfg_.comm_interface};
  auto plan = contract::PlanForAll(cfg_.comm_libraries, t);
  if (!plan) {
    // The HCAs are still the container's, and NCCL_IB_HCA names them; the libraries pick their own.
    spdlog::warn("event=comm_env_skipped resource={} error={}", cfg_.FullName(),
                 LogQuoted(plan.error().message()));
    return;
  }
  for (const auto& lib : *plan) {
    for (const auto& [k, v] : lib.vars) out->envs.emplace(k, v);
  }
}

Result<ContainerAllocation> Resource::Allocate(const std::vector<std::string>& ids) const {
  KUBERDMA_ASSIGN_OR_RETURN(auto chosen, HcasOf(ids));
  ContainerAllocation out;
  std::vector<contract::HcaInfo> described;
  for (const auto* st : chosen) {
    const Hca& h = st->hca;
    out.hcas.push_back(h.name);
    if (cfg_.cdi) {
      out.cdi_devices.push_back(CdiKind() + "=" + h.name);
    } else {
      AddDeviceNodes(h, &out);
    }
    described.push_back(contract::Describe(h, st->healthy));
  }
  if (!cfg_.cdi && !chosen.empty()) {
    out.devices.push_back({"/dev/infiniband/rdma_cm", root_.Dev("infiniband/rdma_cm"), "rw"});
  }
  if (cfg_.nccl_env && !chosen.empty()) {
    for (auto& [k, v] : contract::Encode(described)) out.envs[k] = std::move(v);
    AddCommEnv(described, &out);
  }
  for (const auto& [k, v] : cfg_.extra_env) out.envs[k] = v;
  return out;
}

namespace {

// How a per-hca slot ranks as the next pick; lower is better: fewer slots already on its HCA,
// healthy first, NUMA-local to what is chosen, then the ID in natural order.
struct SlotRank {
  int on_hca = 0;
  int unhealthy = 0;
  int numa_affinity = 0;  // negated count of chosen slots on the slot's NUMA node
  const std::string* id = nullptr;

  bool operator<(const SlotRank& o) const {
    if (on_hca != o.on_hca) return on_hca < o.on_hca;
    if (unhealthy != o.unhealthy) return unhealthy < o.unhealthy;
    if (numa_affinity != o.numa_affinity) return numa_affinity < o.numa_affinity;
    return sysfs::NaturalLess(*id, *o.id);
  }
};

}  // namespace

std::vector<std::string> Resource::Preferred(const std::vector<std::string>& available,
                                             const std::vector<std::string>& must_include,
                                             size_t size) const {
  std::vector<std::string> out;
  auto taken = [&](const std::string& id) {
    return std::find(out.begin(), out.end(), id) != out.end();
  };
  for (const auto& id : must_include) {
    if (out.size() < size && !taken(id)) out.push_back(id);
  }
  if (cfg_.policy == Policy::kPool) {
    for (const auto& id : available) {
      if (out.size() < size && !taken(id)) out.push_back(id);
    }
    return out;
  }
  SpreadOverHcas(available, size, out);
  return out;
}

void Resource::SpreadOverHcas(const std::vector<std::string>& available, size_t size,
                              std::vector<std::string>& out) const {
  std::map<std::string, int> used;  // HCA -> slots chosen
  std::map<int, int> numa_weight;
  auto count = [&](const std::string& id) {
    std::string h = HcaOfSlot(id);
    ++used[h];
    if (auto it = hcas_.find(h); it != hcas_.end()) ++numa_weight[it->second.hca.numa_node];
  };
  for (const auto& id : out) count(id);
  while (out.size() < size) {
    std::optional<SlotRank> best;
    for (const auto& id : available) {
      auto it = hcas_.find(HcaOfSlot(id));
      if (it == hcas_.end() || std::find(out.begin(), out.end(), id) != out.end()) continue;
      SlotRank rank{used[it->first], it->second.healthy ? 0 : 1,
                    -numa_weight[it->second.hca.numa_node], &id};
      if (!best || rank < *best) best = rank;
    }
    if (!best) break;
    count(*best->id);
    out.push_back(*best->id);
  }
}

std::string Resource::CdiKind() const { return "kube-rdma.io/" + cfg_.resource_name; }

contract::CdiSpec Resource::Cdi() const {
  contract::CdiSpec spec{.kind = CdiKind()};
  for (const auto& [name, st] : hcas_) {
    if (!st.present) continue;
    ContainerAllocation nodes;
    AddDeviceNodes(st.hca, &nodes);
    contract::CdiDevice dev{.name = name};
    for (const auto& d : nodes.devices)
      dev.edits.device_nodes.push_back({d.container_path, d.host_path});
    spec.devices.push_back(std::move(dev));
  }
  spec.edits.device_nodes.push_back({"/dev/infiniband/rdma_cm", root_.Dev("infiniband/rdma_cm")});
  return spec;
}

std::string Resource::CdiSpec() const { return contract::EncodeCdiSpec(Cdi()); }

}  // namespace kuberdma::deviceplugin
