// SPDX-License-Identifier: Apache-2.0
// Planning an ADD: selection, netns mode, pkey, the netdev, and the record that will be saved.
#include "kuberdma/cni/plan.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "kuberdma/cni/ipam.h"
#include "kuberdma/cni/result.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/contract/slot_id.h"

namespace kuberdma::cni {

using link::LinkInfo;
using netns::NetNs;
using sysfs::Hca;

namespace {

// Resolves a deviceID-style value: a bus address, a device-plugin slot ID ("mlx5_3-017"),
// or an HCA name.
// A deviceID from Multus (also copied into pciBusID): a PCI or auxiliary address, a per-HCA slot
// ID as rdma-device-plugin writes them (contract/slot_id.h), or an HCA name. Pool slots name no HCA
// and are handled before this (IsPoolSlot).
Result<Hca> HcaForDeviceId(const sysfs::SysfsRoot& root, const std::string& id) {
  if (auto claimed = contract::ParseClaimDevice(id)) {
    auto hca = sysfs::HcaForAddress(root, claimed->address, sysfs::HcaDetail::kPorts);
    if (hca || hca.error().code() != ErrorCode::kNotFound) return hca;
    auto named = sysfs::ReadHca(root, claimed->address, sysfs::HcaDetail::kPorts);
    if (named) return named;
    return Fail(ErrorCode::kNotFound, "it is device " + claimed->address + " of DRA claim " +
                                          claimed->uid + ", which this node does not have");
  }
  auto by_addr = sysfs::HcaForAddress(root, id, sysfs::HcaDetail::kPorts);
  if (by_addr || by_addr.error().code() != ErrorCode::kNotFound) return by_addr;
  auto by_name = sysfs::ReadHca(root, id, sysfs::HcaDetail::kPorts);
  if (by_name) return by_name;
  if (auto slot = contract::ParseSlot(id); slot && slot->kind == contract::SlotKind::kPerHca) {
    auto by_slot = sysfs::ReadHca(root, slot->base, sysfs::HcaDetail::kPorts);
    if (by_slot) return by_slot;
    return Fail(ErrorCode::kNotFound, "it is rdma-device-plugin's slot " +
                                          std::to_string(slot->index) + " of HCA " + slot->base +
                                          ", which this node does not have");
  }
  return Fail(ErrorCode::kNotFound,
              "tried it as a PCI/auxiliary address, an HCA name and a device-plugin slot ID");
}

bool IsPoolSlot(const Selector& sel) {
  bool device_id = sel.kind == SelectorKind::kRuntimeDeviceId ||
                   sel.kind == SelectorKind::kDeviceId || sel.kind == SelectorKind::kPciBusId;
  auto slot = device_id ? contract::ParseSlot(sel.value) : std::nullopt;
  return slot && slot->kind == contract::SlotKind::kPool;
}

// Why `hca` cannot be the parent of a `mode` child: macvlan and ipvlan are Ethernet links, an
// IPoIB child needs an InfiniBand port. Identity-only HCAs (no ports read) have no link layer
// yet: judged once their ports are read.
std::string WhyNotParent(const Hca& hca, AttachMode mode) {
  const sysfs::LinkLayer layer = hca.link_layer();
  if (layer == sysfs::LinkLayer::kUnknown) return "";
  const std::string name(AttachModeName(mode));
  if (mode == AttachMode::kIpoib && layer != sysfs::LinkLayer::kInfiniBand) {
    return std::string(sysfs::LinkLayerName(layer)) +
           ", and an ipoib child needs an InfiniBand HCA (on RoCE use mode macvlan or ipvlan)";
  }
  if (mode != AttachMode::kIpoib && layer != sysfs::LinkLayer::kEthernet) {
    return std::string(sysfs::LinkLayerName(layer)) + ", and " + name +
           " children need a RoCE (Ethernet) HCA (on InfiniBand use mode ipoib: an IPoIB "
           "child on a partition of its own)";
  }
  return "";
}

std::string HcaKey(const Hca& hca) { return HcaIdentity(hca.address, hca.name); }

}  // namespace

CniResult<Planner::Claims> Planner::ClaimsOf(const StateStore& store, const NetConf& conf,
                                             const std::string& self_key) {
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto records, store.List(), kStateFailure);
  Claims claimed;
  for (const auto& r : records) {
    std::string key = AttachmentKey(r.container_id, r.ifname);
    if (key == self_key && r.network == conf.name) continue;
    if (IsChildMode(r.mode)) {
      ++claimed.children[HcaIdentity(r.hca_address, r.hca)];
    } else {
      claimed.moved[HcaIdentity(r.hca_address, r.hca)] = key;
    }
    if (r.vf && !r.vf->pf_address.empty()) claimed.vf_pfs[r.vf->pf_address] = key;
  }
  return claimed;
}

namespace {

link::ChildKind ChildKindOf(AttachMode mode) {
  if (mode == AttachMode::kIpvlan) return link::ChildKind::kIpvlan;
  if (mode == AttachMode::kIpoib) return link::ChildKind::kIpoib;
  return link::ChildKind::kMacvlan;
}

// What the pod's interface becomes: the moved netdev renamed, or a new child; its MTU and state.
void PlanInterface(const Request& req, const NetConf& conf, bool host_admin_up, AttachPlan* plan) {
  if (IsChildMode(conf.mode)) {
    plan->child =
        link::ChildLink{.kind = ChildKindOf(conf.mode), .name = req.ifname, .mtu = conf.mtu};
    if (conf.mode == AttachMode::kMacvlan) {
      plan->child->mac = plan->record.mac = ChildMac(conf.name, req.container_id, req.ifname);
    }
    if (conf.mode == AttachMode::kIpoib) {
      // The kernel gives an IPoIB child its address (its own QPN, the port's GID): found by name
      // and kind, never by the parent's address.
      plan->record.mac.clear();
      plan->child->pkey = conf.pkey;
      plan->child->ipoib_mode = conf.ipoib_mode;
    }
  }
  // A new child has no earlier state to keep: "leave" is up, as for any new interface.
  plan->want_up = WantedAdminUp(conf, plan->child ? true : host_admin_up);
  plan->into = {.up = plan->want_up};
  if (!plan->child) {
    plan->into.name = req.ifname;
    plan->into.mtu = conf.mtu;
  }
}

}  // namespace

std::string DerivedMac(uint8_t first_octet, std::initializer_list<std::string_view> parts) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a, each part ended by a NUL
  for (std::string_view part : parts) {
    for (char c : part) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    h = h * 1099511628211ULL;
  }
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", first_octet,
                static_cast<unsigned>(h >> 32) & 0xff, static_cast<unsigned>(h >> 24) & 0xff,
                static_cast<unsigned>(h >> 16) & 0xff, static_cast<unsigned>(h >> 8) & 0xff,
                static_cast<unsigned>(h) & 0xff);
  return buf;
}

std::string ChildMac(const std::string& network, const std::string& container_id,
                     const std::string& ifname) {
  return DerivedMac(0x02, {network, container_id, ifname});
}

std::string AttachmentKey(const std::string& container_id, const std::string& ifname) {
  return container_id + "/" + ifname;
}

std::optional<bool> WantedAdminUp(const NetConf& conf, bool host_admin_up) {
  switch (conf.link_state) {
    case LinkState::kUp:
      return true;
    case LinkState::kDown:
      return false;
    // A netns move closes the device (dev_close in __dev_change_net_namespace), so "leave as it
    // is" means re-applying the admin state it had on the host.
    case LinkState::kLeave:
      return host_admin_up;
  }
  return std::nullopt;
}

Result<Hca> Planner::FindNamed(const Selector& sel, const NetNs& host) {
  switch (sel.kind) {
    case SelectorKind::kRuntimeDeviceId:
    case SelectorKind::kDeviceId:
    case SelectorKind::kPciBusId:
      return HcaForDeviceId(root_, sel.value);
    case SelectorKind::kHca:
      return sysfs::ReadHca(root_, sel.value, sysfs::HcaDetail::kPorts);
    case SelectorKind::kNetdev: {
      // Through rtnetlink first, so an alternative name (which sysfs does not list) resolves too.
      auto l = links_.GetByName(host, sel.value);
      return sysfs::HcaForNetdev(root_, l ? l->name : sel.value, sysfs::HcaDetail::kPorts);
    }
    case SelectorKind::kMac: {
      KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, link::FindByMac(links_, host, sel.value));
      return sysfs::HcaForNetdev(root_, l.name, sysfs::HcaDetail::kPorts);
    }
    case SelectorKind::kAuto:
      break;
  }
  return Fail(ErrorCode::kInternal, "no device named");
}

std::string Planner::WhyNot(const Hca& hca, const NetConf& conf, const Claims& claimed) {
  const std::string mode(AttachModeName(conf.mode));
  if (auto c = claimed.moved.find(HcaKey(hca)); c != claimed.moved.end()) {
    return "already attached to " + c->second +
           (IsChildMode(conf.mode) ? " (a " + mode + " child needs its netdev on the host)" : "");
  }
  // Never a VF and its PF to two pods: a PF that moves takes its VFs' port with it.
  if (auto c = claimed.moved.find(hca.pf_address);
      !hca.pf_address.empty() && c != claimed.moved.end()) {
    return "a VF of " + hca.pf_address + ", which is attached whole to " + c->second;
  }
  if (auto c = claimed.vf_pfs.find(hca.address);
      !IsChildMode(conf.mode) && c != claimed.vf_pfs.end()) {
    return "the PF of a VF attached to " + c->second +
           " (moving the PF into a pod would take its VFs' port with it)";
  }
  if (conf.mode == AttachMode::kVf && hca.pf_address.empty()) {
    return "not an SR-IOV VF (mode vf attaches a VF: allocate one, e.g. the device plugin's "
           "selectors \"functions\": [\"vf\"])";
  }
  if (IsChildMode(conf.mode)) return WhyNotParent(hca, conf.mode);
  if (hca.bus == sysfs::BusKind::kVirtual) {
    // Measured on Debian 12's kernel with Soft-RoCE (tests/vm): moving rxe's netdev out of the
    // host namespace deletes the rxe device, and `rdma dev set ... netns` is EOPNOTSUPP.
    return "a software RDMA device (" +
           (hca.netdevs.empty() ? std::string("no netdev") : "on " + hca.netdevs.front()) +
           ", no PCI parent): it cannot be moved into a pod (the kernel deletes a Soft-RoCE "
           "device when its netdev leaves the host namespace, and refuses to move the RDMA "
           "device); use mode macvlan or ipvlan";
  }
  if (auto c = claimed.children.find(HcaKey(hca)); c != claimed.children.end()) {
    return "shared by " + std::to_string(c->second) +
           " child attachment(s) (mode macvlan/ipvlan): its netdev must stay on the host";
  }
  return "";
}

Result<Planner::Selected> Planner::Candidate(const Hca& h, const NetConf& conf, const NetNs& host,
                                             const Claims& claimed) {
  std::string why = WhyNot(h, conf, claimed);
  if (why.empty() && h.netdevs.empty()) why = "has no netdev";
  if (!why.empty()) return Fail(ErrorCode::kNotFound, why);
  auto l = links_.GetByName(host, h.netdevs.front());
  if (!l) {
    return Fail(ErrorCode::kNotFound,
                "netdev " + h.netdevs.front() + " is not in the host namespace");
  }
  KUBERDMA_ASSIGN_OR_RETURN(Hca full, sysfs::ReadHca(root_, h.name, sysfs::HcaDetail::kPorts));
  // The link layer is known only now that the ports are read.
  if (why = WhyNot(full, conf, claimed); !why.empty()) return Fail(ErrorCode::kNotFound, why);
  if (!IsChildMode(conf.mode)) {
    KUBERDMA_ASSIGN_OR_RETURN(std::string own, NodeOwn(full, host));
    if (!own.empty()) return Fail(ErrorCode::kNotFound, "the node's own NIC (" + own + ")");
  }
  return Selected{std::move(full), std::move(*l)};
}

CniResult<Planner::Selected> Planner::FirstFree(const NetConf& conf, const NetNs& host,
                                                const Claims& claimed) {
  // Identity is enough to choose; ports are read for candidates only.
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto hcas, sysfs::DiscoverHcas(root_, sysfs::HcaDetail::kIdentity),
                                kDeviceUnavailable);
  std::string tried;
  std::optional<Selected> best;
  int best_children = 0;
  for (const auto& h : hcas) {
    auto c = claimed.children.find(HcaKey(h));
    int children = c == claimed.children.end() ? 0 : c->second;
    if (best && children >= best_children) continue;
    auto candidate = Candidate(h, conf, host, claimed);
    if (!candidate) {
      tried += (tried.empty() ? "" : "; ") + h.name + ": " + candidate.error().message();
      continue;
    }
    if (!IsChildMode(conf.mode) || children == 0) return std::move(*candidate);
    best = std::move(*candidate);
    best_children = children;
  }
  if (best) return std::move(*best);
  return CniFail(kInvalidConfig,
                 "no free RDMA device for " + conf.name + " (" +
                     (tried.empty() ? "no RDMA devices under " + root_.Sys("class/infiniband")
                                    : "tried " + tried) +
                     ")");
}

CniResult<Planner::Selected> Planner::SelectForPoolSlot(const NetConf& conf, const NetNs& host,
                                                        bool chained, const Claims& claimed) {
  // A share of rdma-device-plugin's pool names no HCA: the one the NAD names (a rail's NAD in
  // shared mode names its HCA), else a free one, as without a deviceID.
  const Selector& sel = conf.selector;
  for (const auto& other : conf.other_selectors) {
    if (IsPoolSlot(other)) continue;
    spdlog::info("{} {} is a pool slot: taking the HCA {} names", SelectorName(sel.kind), sel.value,
                 SelectorName(other.kind));
    NetConf named = conf;
    named.selector = other;
    named.other_selectors.clear();
    return Select(named, host, chained, claimed);
  }
  if (conf.rail) {
    spdlog::info("{} {} is a pool slot: taking rail {}'s HCA", SelectorName(sel.kind), sel.value,
                 *conf.rail);
    return SelectOnRail(conf, host, claimed);
  }
  spdlog::info("{} {} is a pool slot: taking the first free HCA", SelectorName(sel.kind),
               sel.value);
  return FirstFree(conf, host, claimed);
}

CniResult<Planner::Selected> Planner::Select(const NetConf& conf, const NetNs& host, bool chained,
                                             const Claims& claimed) {
  const Selector& sel = conf.selector;
  if (IsPoolSlot(sel)) return SelectForPoolSlot(conf, host, chained, claimed);
  if (chained && IsChildMode(conf.mode)) {
    return CniFail(kInvalidConfig, "mode " + std::string(AttachModeName(conf.mode)) +
                                       " creates the pod's interface itself; it cannot follow a "
                                       "plugin whose prevResult already has it");
  }
  if (sel.kind == SelectorKind::kAuto && conf.rail && !chained) {
    return SelectOnRail(conf, host, claimed);
  }
  if (sel.kind == SelectorKind::kAuto) {
    if (chained) {
      return CniFail(kInvalidConfig,
                     "chained after another plugin, rdma needs the device named: "
                     "set deviceID (Multus passes it for NADs with a "
                     "k8s.v1.cni.cncf.io/resourceName annotation)");
    }
    return FirstFree(conf, host, claimed);
  }
  if (conf.rail && !chained) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(auto from_pod, SelectFromAllocation(conf, host, claimed), 0);
    if (from_pod) return std::move(*from_pod);
  }
  auto found = FindNamed(sel, host);
  if (!found) {
    return CniFail(kInvalidConfig, "no RDMA device matches " + std::string(SelectorName(sel.kind)) +
                                       " \"" + sel.value + "\": " + found.error().message());
  }
  if (std::string why = WhyNot(*found, conf, claimed); !why.empty()) {
    if (auto next = NextOfClaim(sel, *found, conf, host, claimed)) return std::move(*next);
    // A config naming an HCA of the wrong link layer cannot apply anywhere (7); a device that is
    // taken or cannot move is unavailable (100).
    bool wrong_layer = (IsChildMode(conf.mode) && !claimed.moved.contains(HcaKey(*found))) ||
                       (conf.mode == AttachMode::kVf && found->pf_address.empty());
    return CniFail(wrong_layer ? kInvalidConfig : kDeviceUnavailable,
                   found->name + " (" + found->address + ") is " + why + "; nothing was changed");
  }
  KUBERDMA_CNI_TRY(CheckRail(*found, conf, host), 0);
  if (!chained) KUBERDMA_CNI_TRY(CheckNotNodeOwn(*found, conf, host), 0);
  return Selected{std::move(*found), std::nullopt};
}

std::optional<Planner::Selected> Planner::NextOfClaim(const Selector& sel, const Hca& held,
                                                      const NetConf& conf, const NetNs& host,
                                                      const Claims& claimed) {
  auto device = contract::ParseClaimDevice(sel.value);
  auto holder = claimed.moved.find(HcaKey(held));
  if (!device || allocations_.empty() || holder == claimed.moved.end() ||
      !holder->second.starts_with(claimed.container_id + "/")) {
    return std::nullopt;
  }
  for (const auto& c : contract::ListClaims(allocations_)) {
    if (c.uid != device->uid) continue;
    for (const auto& name : c.hcas) {
      auto h = sysfs::ReadHca(root_, name, sysfs::HcaDetail::kIdentity);
      if (!h || claimed.moved.contains(HcaKey(*h))) continue;
      auto candidate = Candidate(*h, conf, host, claimed);
      if (!candidate) continue;
      spdlog::info(
          "{} {} names {}, which this pod's {} holds already (a kubelet that lists a claim's CDI "
          "IDs accumulated): taking the claim's next device, {}",
          SelectorName(sel.kind), sel.value, held.name, holder->second, name);
      return std::move(*candidate);
    }
  }
  return std::nullopt;
}

Result<const rails::HostNet*> Planner::HostNetwork(const NetNs& host) {
  if (!host_net_) {
    KUBERDMA_ASSIGN_OR_RETURN(rails::HostNet net, rails::ReadHostNet(links_, addrs_, host));
    host_net_ = std::move(net);
  }
  return &*host_net_;
}

Result<std::string> Planner::NodeOwn(const Hca& hca, const NetNs& host) {
  KUBERDMA_ASSIGN_OR_RETURN(const rails::HostNet* net, HostNetwork(host));
  // A declared rail may hold its own addresses; judging one HCA needs only the declaration.
  rails::NodeRoles one = rails::JudgeHcas({hca}, *net, node_);
  return one.Find(hca.name)->node_own;
}

CniResult<void> Planner::CheckNotNodeOwn(const Hca& hca, const NetConf& conf, const NetNs& host) {
  if (IsChildMode(conf.mode)) return {};  // a child leaves the parent and its traffic alone
  auto own = NodeOwn(hca, host);
  if (!own) {
    return tl::unexpected(FromError(
        own.error().Wrap("check that " + hca.name + " is not the node's own NIC"), kIoFailure));
  }
  if (own->empty()) return {};
  return CniFail(kNodeOwnNic, hca.name + " (" + hca.address + ") is the node's own NIC: " + *own +
                                  "; moving it into a pod would take the node off its network. "
                                  "Nothing was changed. Name another HCA, or declare the node's "
                                  "rails in " +
                                  rails::NodeConfigPath() + " (docs/install.md)");
}

CniResult<const rails::NodeRoles*> Planner::Rails(const NetNs& host) {
  if (!roles_) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(
        auto hcas, sysfs::DiscoverHcas(root_, sysfs::HcaDetail::kIdentity), kDeviceUnavailable);
    auto net = HostNetwork(host);
    if (!net) {
      return tl::unexpected(FromError(net.error().Wrap("number the rails"), kIoFailure));
    }
    roles_ = rails::JudgeHcas(hcas, **net, node_);
  }
  return &*roles_;
}

namespace {

std::string RailSource(const rails::NodeConfig& node) {
  return node.Declared()
             ? "as declared in " + rails::NodeConfigPath()
             : "numbered in PCI-address order: no rails declared in " + rails::NodeConfigPath();
}

}  // namespace

CniResult<void> Planner::CheckRail(const Hca& hca, const NetConf& conf, const NetNs& host) {
  if (!conf.rail) return {};
  KUBERDMA_CNI_ASSIGN_OR_RETURN(const rails::NodeRoles* roles, Rails(host), 0);
  const rails::HcaRole* role = roles->Find(hca.name);
  int rail = role == nullptr ? 0 : role->rail;
  if (rail == *conf.rail) return {};
  std::string on = rail == 0 ? "on no rail (" + (role ? role->no_rail : "unknown HCA") + ")"
                             : "on rail " + std::to_string(rail);
  return CniFail(kInvalidConfig,
                 "network " + conf.name + " is rail " + std::to_string(*conf.rail) + ", but " +
                     std::string(SelectorName(conf.selector.kind)) + " " + conf.selector.value +
                     " is " + hca.name + ", " + on + " (rails " + RailSource(node_) +
                     "); nothing was changed. No allocation record of rdma-device-plugin (nor a "
                     "DRA claim it prepared) names this device, so the rail cannot be found among "
                     "the pod's HCAs: check the device plugin's --allocations-dir is the CNI's "
                     "(/run/kube-rdma/allocations)");
}

Result<std::optional<contract::AllocationGroup>> Planner::GroupOf(const Selector& sel,
                                                                  const NetNs& host) {
  bool device_id = sel.kind == SelectorKind::kRuntimeDeviceId ||
                   sel.kind == SelectorKind::kDeviceId || sel.kind == SelectorKind::kPciBusId;
  if (!device_id || allocations_.empty()) return std::optional<contract::AllocationGroup>{};
  auto slot = contract::ParseSlot(sel.value);
  if (slot) {
    if (slot->kind != contract::SlotKind::kPerHca)
      return std::optional<contract::AllocationGroup>{};
    return contract::FindAllocation(allocations_, sel.value);
  }
  // A DRA device's deviceID (its PCI address): the prepared claim that holds its HCA. DRA never
  // allocates one device to two claims, so at most one record names it.
  auto named = FindNamed(sel, host);
  if (!named) return std::optional<contract::AllocationGroup>{};
  for (const auto& c : contract::ListClaims(allocations_)) {
    if (std::find(c.hcas.begin(), c.hcas.end(), named->name) == c.hcas.end()) continue;
    return std::optional<contract::AllocationGroup>(
        contract::AllocationGroup{.resource = "DRA claim " + c.claim, .hcas = c.hcas});
  }
  return std::optional<contract::AllocationGroup>{};
}

CniResult<std::optional<Planner::Selected>> Planner::SelectFromAllocation(const NetConf& conf,
                                                                          const NetNs& host,
                                                                          const Claims& claimed) {
  const Selector& sel = conf.selector;
  auto group = GroupOf(sel, host);
  if (!group) return tl::unexpected(FromError(group.error(), kIoFailure));
  if (!*group) return std::optional<Selected>{};
  KUBERDMA_CNI_ASSIGN_OR_RETURN(const rails::NodeRoles* roles, Rails(host), 0);
  std::string allocated;
  for (const auto& name : (*group)->hcas) {
    const rails::HcaRole* role = roles->Find(name);
    int rail = role == nullptr ? 0 : role->rail;
    allocated += (allocated.empty() ? "" : ", ") + name + " rail " + std::to_string(rail);
    if (rail != *conf.rail) continue;
    spdlog::info("{} {} was allocated with {}: rail {} is {}", SelectorName(sel.kind), sel.value,
                 (*group)->slots.empty() ? (*group)->resource
                                         : fmt::format("{}", fmt::join((*group)->slots, ",")),
                 *conf.rail, name);
    KUBERDMA_CNI_ASSIGN_OR_RETURN(Hca h, sysfs::ReadHca(root_, name, sysfs::HcaDetail::kIdentity),
                                  kDeviceUnavailable);
    auto candidate = Candidate(h, conf, host, claimed);
    if (!candidate) {
      return CniFail(kDeviceUnavailable,
                     "network " + conf.name + " is rail " + std::to_string(*conf.rail) +
                         ", whose HCA in this "
                         "pod's allocation, " +
                         name + ", is " + candidate.error().message() + "; nothing was changed");
    }
    return std::optional<Selected>(std::move(*candidate));
  }
  return CniFail(kInvalidConfig,
                 "network " + conf.name + " is rail " + std::to_string(*conf.rail) +
                     ", and the pod's allocation of " + (*group)->resource + " (" + allocated +
                     ") has no HCA on it (rails " + RailSource(node_) +
                     "); nothing was changed. A pod attaching rail networks must be allocated "
                     "every rail it attaches; pods on a subset of the rails use networks whose "
                     "addresses follow the HCA's rail (the chart's roce.pinRails=false)");
}

CniResult<Planner::Selected> Planner::SelectOnRail(const NetConf& conf, const NetNs& host,
                                                   const Claims& claimed) {
  KUBERDMA_CNI_ASSIGN_OR_RETURN(const rails::NodeRoles* roles, Rails(host), 0);
  std::string name = roles->HcaOnRail(*conf.rail);
  if (name.empty()) {
    return CniFail(kInvalidConfig, "network " + conf.name + " is rail " +
                                       std::to_string(*conf.rail) +
                                       ", and no HCA of this node is on that rail (rails " +
                                       RailSource(node_) + "); nothing was changed");
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(Hca h, sysfs::ReadHca(root_, name, sysfs::HcaDetail::kIdentity),
                                kDeviceUnavailable);
  auto candidate = Candidate(h, conf, host, claimed);
  if (!candidate) {
    return CniFail(kDeviceUnavailable, "network " + conf.name + " is rail " +
                                           std::to_string(*conf.rail) + ", whose HCA " + name +
                                           " is " + candidate.error().message() +
                                           "; nothing was changed");
  }
  return std::move(*candidate);
}

CniResult<RdmaNetnsMode> Planner::NetnsMode(const NetNs& host, const NetConf& conf) {
  RdmaNetnsMode mode;  // unavailable until the kernel says otherwise
  if (auto m = rdma_.GetNetnsMode(host)) {
    mode = *m;
  } else if (m.error().code() != ErrorCode::kUnsupported) {
    return tl::unexpected(FromError(m.error().Wrap("read RDMA netns mode"), kKernelRefused));
  }
  if (IsChildMode(conf.mode)) return ChildNetnsMode(mode, conf);
  if (mode != rdma::NetnsMode::kExclusive && conf.shared_policy == SharedPolicy::kError) {
    return CniFail(kSharedModeRejected,
                   "RDMA netns mode is " + std::string(rdma::NetnsModeName(mode)) +
                       " and sharedNetnsPolicy is \"error\": the RDMA "
                       "device cannot be isolated in the pod (set exclusive mode at boot with "
                       "ib_core netns_mode=0, or `rdma system set netns exclusive`)");
  }
  return mode;
}

CniResult<RdmaNetnsMode> Planner::ChildNetnsMode(RdmaNetnsMode mode, const NetConf& conf) {
  const std::string name(AttachModeName(conf.mode));
  if (conf.shared_policy == SharedPolicy::kError) {
    return CniFail(kInvalidConfig, "mode " + name +
                                       " shares the HCA among pods, which needs the RDMA netns "
                                       "mode shared: it contradicts sharedNetnsPolicy \"error\"");
  }
  if (mode == rdma::NetnsMode::kExclusive) {
    return CniFail(kInvalidConfig,
                   "mode " + name +
                       " needs the RDMA subsystem in shared netns mode (the HCA stays in the "
                       "host namespace, and in exclusive mode only that namespace sees it); this "
                       "node is exclusive: use mode move, or `rdma system set netns shared`");
  }
  return mode;
}

CniResult<int> Planner::CheckPkey(const Hca& hca, uint16_t pkey, AttachMode mode) {
  const bool ib = hca.link_layer() == sysfs::LinkLayer::kInfiniBand;
  // A VF's pkey table is what the subnet manager grants the GUID ADD is about to give it (the
  // partition hook tells it): its table now says nothing about the pod's partition.
  if (ib && mode == AttachMode::kVf && pkey != sysfs::kDefaultPkey) return -1;
  if (!ib) {
    if (pkey == sysfs::kDefaultPkey) return -1;
    return CniFail(kInvalidConfig, "pkey " + sysfs::FormatPkey(pkey) + " cannot apply to " +
                                       hca.name + ": its link layer is " +
                                       std::string(sysfs::LinkLayerName(hca.link_layer())) +
                                       " (RoCE has no partitions); leave pkey unset or \"0xffff\"");
  }
  KUBERDMA_CNI_ASSIGN_OR_RETURN(Hca full, sysfs::ReadHca(root_, hca.name, sysfs::HcaDetail::kPkeys),
                                kDeviceUnavailable);
  const sysfs::Port* port = full.port(1);
  std::string table;
  if (port != nullptr) {
    for (size_t i = 0; i < port->pkeys.size(); ++i) {
      if (port->pkeys[i] == pkey) return static_cast<int>(i);
      table += (table.empty() ? "" : ", ") + sysfs::FormatPkey(port->pkeys[i]);
    }
  }
  const std::string name = sysfs::FormatPkey(pkey);
  return CniFail(kInvalidConfig,
                 "pkey " + name + " is not in " + hca.name + " port 1's pkey table [" + table +
                     "]: the subnet manager has not made this port a member of partition " + name +
                     ". Add the port's GUID to it (`rdma-doctor partitions --pkey " + name +
                     "` prints the opensm partitions.conf entry; with UFM, add the GUID " +
                     "to the pkey), wait for the SM's sweep, or use a pkey listed. Nothing was "
                     "changed");
}

CniResult<LinkInfo> Planner::Netdev(const Request& req, const NetConf& conf,
                                    const Selected& selected, bool chained, const NetNs& host,
                                    const NetNs& pod) {
  const Hca& hca = selected.hca;
  Result<LinkInfo> netdev = Fail(ErrorCode::kNotFound, hca.name + " has no netdev");
  if (chained) {
    netdev = links_.GetByName(pod, req.ifname);
  } else if (selected.host_link) {
    netdev = *selected.host_link;
  } else if (!hca.netdevs.empty()) {
    netdev = links_.GetByName(host, hca.netdevs.front());
  }
  if (!netdev) {
    return tl::unexpected(FromError(netdev.error().Wrap("attach " + hca.name), kDeviceUnavailable));
  }
  if (!chained && links_.GetByName(pod, req.ifname)) {
    return CniFail(kInvalidEnv, "CNI_IFNAME " + req.ifname + " already exists in " + req.netns);
  }
  if (!IsChildMode(conf.mode) && !chained) KUBERDMA_CNI_TRY(CheckMaxMtu(hca, *netdev, conf), 0);
  if (IsChildMode(conf.mode)) {
    KUBERDMA_CNI_TRY(CheckParentUp(hca, *netdev, conf), 0);
    KUBERDMA_CNI_TRY(CheckChildMtu(hca, *netdev, conf), 0);
  }
  return std::move(*netdev);
}

CniResult<void> Planner::CheckChildMtu(const Hca& hca, const LinkInfo& parent,
                                       const NetConf& conf) {
  if (!conf.mtu) return {};
  if (conf.mode == AttachMode::kIpoib) {
    // An IPoIB child's MTU is bounded by its own transport, not by its parent's current MTU.
    const bool connected = conf.ipoib_mode == link::IpoibMode::kConnected;
    const uint32_t max = connected ? kIpoibConnectedMaxMtu : kIpoibDatagramMaxMtu;
    if (*conf.mtu <= max) return {};
    return CniFail(kInvalidConfig,
                   "mtu " + std::to_string(*conf.mtu) + " is above what an IPoIB child of " +
                       parent.name + " (" + hca.name + ") carries in " +
                       (connected ? "connected mode: 65520"
                                  : "datagram mode: 4092, the IB MTU "
                                    "of 4096 less IPoIB's header") +
                       "; lower mtu" + (connected ? "" : R"(, or set "ipoibMode": "connected")") +
                       ". Nothing was changed");
  }
  if (*conf.mtu <= parent.mtu) return {};
  return CniFail(kInvalidConfig, "mtu " + std::to_string(*conf.mtu) + " is above the MTU of " +
                                     parent.name + " (" + std::to_string(parent.mtu) + ", " +
                                     hca.name + "): a " + std::string(AttachModeName(conf.mode)) +
                                     " child cannot exceed its parent; raise the parent's MTU "
                                     "on the node or lower mtu");
}

CniResult<void> Planner::CheckMaxMtu(const Hca& hca, const LinkInfo& netdev, const NetConf& conf) {
  if (!conf.mtu) return {};
  // IFLA_MAX_MTU is the driver's word; an IPoIB netdev in datagram mode (mlx5's enhanced IPoIB
  // has no other) carries at most IB's 4096-byte MTU less its 4-byte header, which sysfs shows
  // even where the link at hand reports no maximum.
  bool datagram = hca.link_layer() == sysfs::LinkLayer::kInfiniBand &&
                  root_.ReadAttrOr("class/net/" + netdev.name + "/mode", "") == "datagram";
  uint32_t max = netdev.max_mtu;
  std::string why = "the driver's maximum";
  if (datagram && (max == 0 || max > kIpoibDatagramMaxMtu)) {
    max = kIpoibDatagramMaxMtu;
    why =
        "IPoIB in datagram mode (mlx5's enhanced IPoIB has no connected mode) carries at most "
        "the IB MTU of 4096 bytes less its 4-byte header";
  } else if (datagram) {
    why = "IPoIB in datagram mode, as the driver reports it";
  }
  if (max == 0 || *conf.mtu <= max) return {};
  return CniFail(kInvalidConfig, "mtu " + std::to_string(*conf.mtu) +
                                     " is above the maximum MTU of " + netdev.name + " (" +
                                     hca.name + "): " + std::to_string(max) + ", " + why +
                                     "; set mtu to at most " + std::to_string(max) +
                                     " or leave it unset. Nothing was changed");
}

CniResult<void> Planner::CheckParentUp(const Hca& hca, const LinkInfo& parent,
                                       const NetConf& conf) {
  // A child of a parent that is down or has no carrier would come up in the pod and carry
  // nothing: refused (100, which the runtime retries), so the pod does not start on a dead rail.
  bool no_carrier = parent.oper_state == "down" || parent.oper_state == "lowerlayerdown" ||
                    parent.oper_state == "notpresent";
  if (parent.admin_up && !no_carrier) return {};
  return CniFail(kDeviceUnavailable,
                 "the " + std::string(AttachModeName(conf.mode)) + " child's parent " +
                     parent.name + " (" + hca.name + ") is " +
                     (parent.admin_up ? "up without carrier (operstate " + parent.oper_state + ")"
                                      : "administratively down") +
                     ": a child would carry nothing. Bring the link up on the node (check the "
                     "cable and the switch port: rdma-doctor node); nothing was changed");
}

namespace {

// The network an address's connected route covers ("10.10.1.7/24" -> "10.10.1.0/24"), IPv4 only;
// "" otherwise.
std::string ConnectedNet(const link::IpPrefix& p) {
  unsigned a = 0;
  unsigned b = 0;
  unsigned c = 0;
  unsigned d = 0;
  if (p.family != 4 || std::sscanf(p.address.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d) != 4) {
    return "";
  }
  uint32_t ip = (a << 24) | (b << 16) | (c << 8) | d;
  uint32_t mask = p.prefix_len == 0 ? 0 : ~0u << (32 - p.prefix_len);
  uint32_t net = ip & mask;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u/%d", net >> 24, (net >> 16) & 0xff, (net >> 8) & 0xff,
                net & 0xff, p.prefix_len);
  return buf;
}

}  // namespace

namespace {

// Replaces "{rail}" in every string of `j` with `rail`; true when there was one.
bool SubstituteRail(nlohmann::json& j, const std::string& rail) {
  bool any = false;
  if (j.is_string()) {
    std::string v = j.get<std::string>();
    for (size_t at = v.find(kRailPlaceholder); at != std::string::npos;
         at = v.find(kRailPlaceholder, at + rail.size())) {
      v.replace(at, std::string_view(kRailPlaceholder).size(), rail);
      any = true;
    }
    if (any) j = v;
  } else if (j.is_structured()) {
    for (auto& child : j) any = SubstituteRail(child, rail) || any;
  }
  return any;
}

}  // namespace

CniResult<nlohmann::json> Planner::RailSection(const nlohmann::json& section, const Hca& hca,
                                               const NetNs& host) {
  nlohmann::json probe = section;
  if (!SubstituteRail(probe, "0")) return section;
  KUBERDMA_CNI_ASSIGN_OR_RETURN(const rails::NodeRoles* roles, Rails(host), 0);
  const rails::HcaRole* role = roles->Find(hca.name);
  if (role == nullptr || role->rail == 0) {
    return CniFail(kInvalidConfig,
                   "the ipam section's ranges follow the rail (" + std::string(kRailPlaceholder) +
                       "), and " + hca.name + " is on no rail (" +
                       (role == nullptr ? "unknown" : role->no_rail) + "); nothing was changed");
  }
  nlohmann::json out = section;
  SubstituteRail(out, std::to_string(role->rail));
  return out;
}

CniResult<IpamState> Planner::NodeAddresses(const LinkInfo& netdev, const Hca& hca,
                                            const NetNs& host) {
  auto net = HostNetwork(host);
  if (!net)
    return tl::unexpected(FromError(net.error().Wrap("read the rail's addresses"), kIoFailure));
  IpamResult result;
  std::vector<std::string> connected;
  for (const auto& [ifindex, p] : (*net)->addresses) {
    if (ifindex != netdev.ifindex || !rails::IsRoutable(p)) continue;
    result.ips.push_back({.address = p});
    connected.push_back(ConnectedNet(p));
  }
  if (result.ips.empty()) {
    return CniFail(kInvalidConfig,
                   "addresses \"node\": " + netdev.name + " (" + hca.name +
                       ") has no address on the node; give the rail its address on the host "
                       "(netplan, NetworkManager, or your fabric's provisioning), or use ipam. "
                       "Nothing was changed");
  }
  for (const auto& r : (*net)->routes) {
    if (r.ifindex != netdev.ifindex || !rails::IsRoutable(r.dst)) continue;
    bool kernel_made = r.gateway.empty() && std::find(connected.begin(), connected.end(),
                                                      r.dst.Cidr()) != connected.end();
    if (!kernel_made) result.routes.push_back({.dst = r.dst, .gateway = r.gateway});
  }
  return IpamState{.type = kNodeAddressesIpam, .requested = false, .result = result.ToJson()};
}

CniResult<AttachPlan> Planner::Plan(const Request& req, const NetConf& conf,
                                    const StateStore& store, const NetNs& host, const NetNs& pod) {
  const bool chained =
      conf.prev_result && PrevResultHasInterface(*conf.prev_result, req.ifname, req.netns);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(Claims claimed,
                                ClaimsOf(store, conf, AttachmentKey(req.container_id, req.ifname)),
                                kStateFailure);
  claimed.container_id = req.container_id;
  KUBERDMA_CNI_ASSIGN_OR_RETURN(Selected selected, Select(conf, host, chained, claimed), 0);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(RdmaNetnsMode mode, NetnsMode(host, conf), 0);
  const uint16_t pkey = conf.pkey.value_or(sysfs::kDefaultPkey);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(int pkey_index, CheckPkey(selected.hca, pkey, conf.mode), 0);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(LinkInfo netdev, Netdev(req, conf, selected, chained, host, pod),
                                0);
  AttachPlan plan{.hca = std::move(selected.hca), .chained = chained};
  const Hca& hca = plan.hca;
  plan.record = {.network = conf.name,
                 .container_id = req.container_id,
                 .ifname = req.ifname,
                 .netns = req.netns,
                 .hca = hca.name,
                 .hca_address = hca.address,
                 .link_layer = std::string(sysfs::LinkLayerName(hca.link_layer())),
                 .mode = conf.mode,
                 .netdev_moved = !chained && !IsChildMode(conf.mode),
                 .host_name = netdev.name,
                 .host_ifindex = netdev.ifindex,
                 .mac = netdev.mac,
                 .host_mtu = netdev.mtu,
                 .host_admin_up = netdev.admin_up,
                 .netns_mode = mode,
                 .pkey = pkey,
                 .pkey_index = pkey_index};
  PlanInterface(req, conf, netdev.admin_up, &plan);
  if (conf.mode == AttachMode::kVf) KUBERDMA_CNI_TRY(PlanVf(req, conf, netdev, host, &plan), 0);
  KUBERDMA_CNI_TRY(PlanAddresses(conf, netdev, host, &plan), 0);
  return plan;
}

CniResult<void> Planner::PlanAddresses(const NetConf& conf, const LinkInfo& netdev,
                                       const NetNs& host, AttachPlan* plan) {
  if (conf.ipam) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(nlohmann::json section,
                                  RailSection(conf.ipam->section, plan->hca, host), 0);
    plan->record.ipam = IpamState{.type = conf.ipam->type, .section = std::move(section)};
    plan->into.up.reset();  // set after IPAM's addresses, before its routes (which need it up)
  }
  if (conf.node_addresses && !plan->chained) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(plan->record.ipam, NodeAddresses(netdev, plan->hca, host), 0);
    plan->into.up.reset();
  }
  return {};
}

}  // namespace kuberdma::cni
