// SPDX-License-Identifier: Apache-2.0
// Rail numbering and the node's own NICs, judged from one snapshot of the host namespace.
#include "kuberdma/rails/rails.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace kuberdma::rails {

using link::IpPrefix;
using link::LinkInfo;
using sysfs::Hca;

Result<HostNet> ReadHostNet(link::LinkOps& links, link::AddrOps& addrs, const netns::NetNs& host) {
  HostNet net;
  auto l = links.List(host);
  if (!l) return Fail(l.error().Wrap("list the node's links"));
  auto a = addrs.ListAllAddresses(host);
  if (!a) return Fail(a.error().Wrap("list the node's addresses"));
  auto r = addrs.ListAllRoutes(host);
  if (!r) return Fail(r.error().Wrap("list the node's routes"));
  net.links = std::move(*l);
  net.addresses = std::move(*a);
  net.routes = std::move(*r);
  return net;
}

const HcaRole* NodeRoles::Find(const std::string& hca_name) const {
  auto it = by_hca.find(hca_name);
  return it == by_hca.end() ? nullptr : &it->second;
}

std::string NodeRoles::HcaOnRail(int rail) const {
  for (const auto& [name, role] : by_hca) {
    if (role.rail == rail) return name;
  }
  return "";
}

bool IsRoutable(const IpPrefix& p) {
  if (p.family == 4) {
    int first = std::atoi(p.address.c_str());
    bool multicast = first >= 224 && first <= 239;
    return p.address.rfind("169.254.", 0) != 0 && first != 127 && !multicast;
  }
  for (const char* local : {"fe8", "fe9", "fea", "feb", "ff"}) {
    if (p.address.rfind(local, 0) == 0) return false;
  }
  return p.address != "::1";
}

bool NamesHca(const std::string& entry, const Hca& hca) {
  if (entry == hca.name || (!hca.address.empty() && entry == hca.address)) return true;
  if (!hca.address.empty() && "0000:" + entry == hca.address) return true;  // "1a:00.0"
  return std::find(hca.netdevs.begin(), hca.netdevs.end(), entry) != hca.netdevs.end();
}

namespace {

const LinkInfo* LinkNamed(const HostNet& net, const std::string& name) {
  for (const auto& l : net.links) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

const LinkInfo* LinkAt(const HostNet& net, int ifindex) {
  for (const auto& l : net.links) {
    if (l.ifindex == ifindex) return &l;
  }
  return nullptr;
}

std::string Enslaved(const HostNet& net, const LinkInfo& l) {
  if (l.master_ifindex == 0) return "";
  const LinkInfo* m = LinkAt(net, l.master_ifindex);
  std::string master = m == nullptr ? "ifindex " + std::to_string(l.master_ifindex) : m->name;
  std::string kind = m == nullptr || m->kind.empty() ? "" : " (" + m->kind + ")";
  return l.name + " is a port of " + master + kind +
         ": a bond, team, bridge or VRF member carries the node's own traffic";
}

std::string RoutedThrough(const HostNet& net, const LinkInfo& l, bool declared_rail) {
  for (const auto& r : net.routes) {
    if (r.ifindex != l.ifindex) continue;
    if (r.dst.prefix_len == 0) {
      return l.name + " carries the node's default route" +
             (r.gateway.empty() ? "" : " (via " + r.gateway + ")");
    }
    if (!declared_rail && !r.gateway.empty() && IsRoutable(r.dst)) {
      return l.name + " routes " + r.dst.Cidr() + " via " + r.gateway +
             ", a route of the node's that no declared rail has (declare the NIC under rails in "
             "the node config if it is a rail)";
    }
  }
  return "";
}

std::string Addressed(const HostNet& net, const LinkInfo& l, const NodeConfig& config,
                      bool declared_rail) {
  for (const auto& [ifindex, p] : net.addresses) {
    if (ifindex != l.ifindex) continue;
    const auto& mine = config.node_addresses;
    if (std::find(mine.begin(), mine.end(), p.address) != mine.end()) {
      return l.name + " holds " + p.address + ", the address the node is known by";
    }
    if (!declared_rail && IsRoutable(p)) {
      return l.name + " holds " + p.Cidr() +
             ", a global address that no declared rail has (declare the NIC under rails in the "
             "node config if it is a rail: its addresses then go into the pod with it)";
    }
  }
  return "";
}

// Why `hca`'s netdevs carry the node's own traffic, or "".
std::string NodeOwn(const Hca& hca, const HostNet& net, const NodeConfig& config,
                    bool declared_rail) {
  for (const auto& name : hca.netdevs) {
    const LinkInfo* l = LinkNamed(net, name);
    if (l == nullptr) continue;  // not in the host namespace: in a pod already
    for (const std::string& why : {Enslaved(net, *l), RoutedThrough(net, *l, declared_rail),
                                   Addressed(net, *l, config, declared_rail)}) {
      if (!why.empty()) return why;
    }
  }
  return "";
}

bool IsPf(const Hca& h) { return h.bus == sysfs::BusKind::kPci && h.pf_address.empty(); }

// The PCI address of the PF whose rail `h` is on: its own, its PF's (VF) or its parent's (SF).
std::string PhysicalFunction(const Hca& h) {
  if (h.bus == sysfs::BusKind::kVirtual) return "";
  if (!h.pf_address.empty()) return h.pf_address;
  return h.pci_address.empty() ? h.address : h.pci_address;
}

int DeclaredRail(const Hca& h, const NodeConfig& config) {
  for (size_t i = 0; i < config.rails.size(); ++i) {
    if (NamesHca(config.rails[i], h)) return static_cast<int>(i) + 1;
  }
  return 0;
}

// Rails by PF address: declared, or the PFs that are not the node's own in PCI-address order.
std::map<std::string, int> PfRails(const std::vector<Hca>& hcas, const NodeConfig& config,
                                   const std::map<std::string, HcaRole>& roles) {
  std::map<std::string, int> rails;
  std::vector<std::string> pfs;
  for (const auto& h : hcas) {
    if (!IsPf(h)) continue;
    if (config.Declared()) {
      if (int r = DeclaredRail(h, config); r > 0) rails[h.address] = r;
    } else if (roles.at(h.name).node_own.empty()) {
      pfs.push_back(h.address);
    }
  }
  std::sort(pfs.begin(), pfs.end());
  for (size_t i = 0; i < pfs.size(); ++i) rails[pfs[i]] = static_cast<int>(i) + 1;
  return rails;
}

std::string NoRail(const Hca& h, const HcaRole& role, const NodeConfig& config) {
  if (h.bus == sysfs::BusKind::kVirtual) return "a software RDMA device: on no physical rail";
  if (!role.node_own.empty()) return "the node's own NIC: " + role.node_own;
  if (config.Declared()) {
    return "not one of the node's declared rails (node config \"rails\"): kube-rdma leaves it "
           "to the node";
  }
  return "its physical function " + PhysicalFunction(h) + " is not a rail";
}

}  // namespace

NodeRoles JudgeHcas(const std::vector<Hca>& hcas, const HostNet& net, const NodeConfig& config) {
  NodeRoles out;
  for (const auto& h : hcas) {
    bool declared = config.Declared() && DeclaredRail(h, config) > 0;
    out.by_hca[h.name].node_own = NodeOwn(h, net, config, declared);
  }
  std::map<std::string, int> pf_rails = PfRails(hcas, config, out.by_hca);
  for (const auto& h : hcas) {
    HcaRole& role = out.by_hca[h.name];
    int declared = config.Declared() ? DeclaredRail(h, config) : 0;
    auto pf = pf_rails.find(PhysicalFunction(h));
    role.rail = declared > 0 ? declared : (pf == pf_rails.end() ? 0 : pf->second);
    // The node's own NIC is on no rail, whatever was declared.
    if (!role.node_own.empty()) role.rail = 0;
    if (role.rail == 0) role.no_rail = NoRail(h, role, config);
  }
  for (size_t i = 0; i < config.rails.size(); ++i) {
    bool matched = std::any_of(hcas.begin(), hcas.end(),
                               [&](const Hca& h) { return NamesHca(config.rails[i], h); });
    if (!matched) {
      out.unmatched.push_back("rail " + std::to_string(i + 1) + ": " + config.rails[i] +
                              " names no HCA on this node");
    }
  }
  return out;
}

}  // namespace kuberdma::rails
