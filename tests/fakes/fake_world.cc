// SPDX-License-Identifier: Apache-2.0
// FakeWorld's operations.
#include "fake_world.h"

#include <algorithm>
#include <set>

#include "kuberdma/base/check.h"

namespace kuberdma::fakes {

Result<void> FakeWorld::Tick(const std::string& what) {
  ++calls;
  trace.push_back(what);
  if (fail_at == calls || (fail_after && fail_at > 0 && calls > fail_at))
    return Fail(ErrorCode::kIo,
                "injected failure of call " + std::to_string(calls) + " (" + what + ")");
  return {};
}

std::string FakeWorld::PathOf(ino_t ino) const {
  for (const auto& [p, i] : ns_by_path_) {
    if (i == ino) return p;
  }
  return "?";
}

LinkInfo* FakeWorld::Find(ino_t ino, int ifindex) {
  for (auto& l : links_[ino]) {
    if (l.ifindex == ifindex) return &l;
  }
  return nullptr;
}

Result<void> FakeWorld::Rename(ino_t ino, LinkInfo& l, const std::string& name) {
  for (const auto& o : links_[ino]) {
    if (o.name == name && o.ifindex != l.ifindex) {
      return Fail(ErrorCode::kAlreadyExists, "rename to " + name + ": File exists", EEXIST);
    }
  }
  l.name = name;
  return {};
}

class FakeNamespaces final : public netns::NamespaceOps {
 public:
  explicit FakeNamespaces(FakeWorld& w) : w_(w) {}
  Result<NetNs> Open(const std::string& path) override {
    KUBERDMA_TRY(w_.Tick("open " + path));
    auto it = w_.ns_by_path_.find(path);
    if (it == w_.ns_by_path_.end()) {
      return Fail(ErrorCode::kNotFound, "open netns " + path + ": No such file or directory",
                  ENOENT);
    }
    return NetNs::ForTesting(path, it->second);
  }
  Result<NetNs> Host() override { return Open(kHostPath); }

 private:
  FakeWorld& w_;
};

class FakeLinks final : public link::LinkOps {
 public:
  explicit FakeLinks(FakeWorld& w) : w_(w) {}
  LinkInfo Reported(LinkInfo l) const {
    if (!w_.report_max_mtu) l.max_mtu = 0;
    return l;
  }
  Result<LinkInfo> GetByName(const NetNs& ns, const std::string& name) override {
    KUBERDMA_TRY(w_.Tick("link get " + name));
    for (const auto& l : w_.LinksOf(ns.inode())) {
      if (l.name == name) return Reported(l);
    }
    return Fail(ErrorCode::kNotFound, "link " + name + " not found", ENODEV);
  }
  Result<LinkInfo> GetByIndex(const NetNs& ns, int ifindex) override {
    KUBERDMA_TRY(w_.Tick("link get #" + std::to_string(ifindex)));
    if (auto* l = w_.Find(ns.inode(), ifindex)) return Reported(*l);
    return Fail(ErrorCode::kNotFound, "ifindex not found", ENODEV);
  }
  Result<std::vector<LinkInfo>> List(const NetNs& ns) override {
    KUBERDMA_TRY(w_.Tick("link list " + ns.path()));
    return w_.LinksOf(ns.inode());
  }
  Result<void> Change(const NetNs& ns, int ifindex, const LinkChange& c) override {
    KUBERDMA_TRY(w_.Tick("link change #" + std::to_string(ifindex)));
    LinkInfo* l = w_.Find(ns.inode(), ifindex);
    if (l == nullptr) return Fail(ErrorCode::kNotFound, "ifindex not found", ENODEV);
    return Apply(ns.inode(), *l, c);
  }
  Result<void> MoveTo(const NetNs& from, int ifindex, const NetNs& to,
                      const LinkChange& c) override {
    KUBERDMA_TRY(w_.Tick("link move #" + std::to_string(ifindex) + " to " + to.path()));
    auto& src = w_.LinksOf(from.inode());
    auto it = std::find_if(src.begin(), src.end(),
                           [&](const LinkInfo& l) { return l.ifindex == ifindex; });
    if (it == src.end()) return Fail(ErrorCode::kNotFound, "ifindex not found", ENODEV);
    auto& dst = w_.LinksOf(to.inode());
    auto taken = [&](const std::string& n) {
      return std::any_of(dst.begin(), dst.end(), [&](const LinkInfo& l) { return l.name == n; });
    };
    LinkInfo moved = *it;
    // __dev_change_net_namespace: keep the name if free, else use the requested one, else EEXIST.
    if (taken(moved.name)) {
      if (!c.name || taken(*c.name))
        return Fail(ErrorCode::kAlreadyExists, "move: File exists", EEXIST);
      moved.name = *c.name;
    }
    moved.admin_up = false;  // dev_close() on the way
    src.erase(it);
    w_.FlushAddresses(from.inode(), ifindex);  // a netns move flushes addresses and routes
    dst.push_back(moved);
    return Apply(to.inode(), dst.back(), c);
  }
  // rtnl_newlink for a macvlan/ipvlan: the name must be free in `into`, the MTU not above the
  // parent's; created down.
  Result<void> CreateChild(const NetNs& parent_ns, int parent_ifindex, const NetNs& into,
                           const link::ChildLink& child) override {
    std::string kind(link::ChildKindName(child.kind));
    KUBERDMA_TRY(w_.Tick("link create " + kind + " " + child.name + " on #" +
                         std::to_string(parent_ifindex) + " in " + into.path()));
    const LinkInfo* parent = w_.Find(parent_ns.inode(), parent_ifindex);
    if (parent == nullptr) return Fail(ErrorCode::kNotFound, "parent not found", ENODEV);
    for (const auto& o : w_.LinksOf(into.inode())) {
      if (o.name == child.name) return Fail(ErrorCode::kAlreadyExists, "File exists", EEXIST);
    }
    const bool ipoib = child.kind == link::ChildKind::kIpoib;
    // ipoib_new_child_link: the parent must be an IPoIB netdev (20-byte address); a child's MTU
    // is bounded by its transport (ipoib_change_mtu), a macvlan's or ipvlan's by its parent.
    if (ipoib && parent->mac.size() != 59)
      return Fail(ErrorCode::kNotFound, "No such device", ENODEV);
    uint32_t max = !ipoib                                            ? parent->mtu
                   : child.ipoib_mode == link::IpoibMode::kConnected ? 65520U
                                                                     : 4092U;
    if (child.mtu && *child.mtu > max) {
      return Fail(ErrorCode::kInvalidArgument, "Invalid argument", EINVAL);
    }
    if (ipoib) w_.ipoib_children[child.name] = child;
    // An IPoIB child's address: its own QPN before the port's GID.
    std::string mac = child.kind == link::ChildKind::kIpvlan ? parent->mac : child.mac;
    if (ipoib) mac = "00:00:0" + std::to_string(w_.next_ifindex_ % 10) + parent->mac.substr(8);
    LinkInfo l{.ifindex = w_.next_ifindex_++,
               .name = child.name,
               .mac = mac,
               .mtu = child.mtu.value_or(parent->mtu),
               .kind = kind,
               .max_mtu = parent->mtu};
    w_.LinksOf(into.inode()).push_back(l);
    return {};
  }
  Result<void> Delete(const NetNs& ns, int ifindex) override {
    KUBERDMA_TRY(w_.Tick("link delete #" + std::to_string(ifindex)));
    auto& list = w_.LinksOf(ns.inode());
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const LinkInfo& l) { return l.ifindex == ifindex; });
    if (it == list.end()) return Fail(ErrorCode::kNotFound, "ifindex not found", ENODEV);
    list.erase(it);
    w_.FlushAddresses(ns.inode(), ifindex);
    return {};
  }

 private:
  // do_setlink's order: name, MTU, flags; a failure leaves earlier steps applied.
  Result<void> Apply(ino_t ino, LinkInfo& l, const LinkChange& c) {
    if (c.name && *c.name != l.name) KUBERDMA_TRY(w_.Rename(ino, l, *c.name));
    if (c.mtu) {
      if (*c.mtu < 68 || *c.mtu > l.max_mtu) {
        return Fail(ErrorCode::kInvalidArgument, "set mtu: Invalid argument", EINVAL);
      }
      l.mtu = *c.mtu;
    }
    if (c.up) l.admin_up = *c.up;
    if (c.alias) l.alias = *c.alias;
    if (c.mac) {
      if (w_.mac_locked.contains(l.name)) {
        return Fail(ErrorCode::kInvalidArgument, "set address: Invalid argument", EINVAL);
      }
      l.mac = *c.mac;
    }
    return {};
  }
  FakeWorld& w_;
};

class FakeAddrs final : public link::AddrOps {
 public:
  explicit FakeAddrs(FakeWorld& w) : w_(w) {}
  Result<void> AddAddress(const NetNs& ns, int ifindex, const link::IpPrefix& ip) override {
    KUBERDMA_TRY(w_.Tick("addr add " + ip.Cidr()));
    if (w_.Find(ns.inode(), ifindex) == nullptr)
      return Fail(ErrorCode::kNotFound, "no link", ENODEV);
    auto& list = w_.addrs_[ns.inode()][ifindex];
    if (std::find(list.begin(), list.end(), ip) != list.end()) {
      return Fail(ErrorCode::kAlreadyExists, "address exists", EEXIST);
    }
    list.push_back(ip);
    return {};
  }
  Result<void> DeleteAddress(const NetNs& ns, int ifindex, const link::IpPrefix& ip) override {
    KUBERDMA_TRY(w_.Tick("addr del " + ip.Cidr()));
    auto& list = w_.addrs_[ns.inode()][ifindex];
    list.erase(std::remove(list.begin(), list.end(), ip), list.end());
    return {};
  }
  Result<std::vector<link::IpPrefix>> ListAddresses(const NetNs& ns, int ifindex) override {
    KUBERDMA_TRY(w_.Tick("addr list"));
    return w_.addrs_[ns.inode()][ifindex];
  }
  Result<void> AddRoute(const NetNs& ns, const link::Route& r) override {
    KUBERDMA_TRY(w_.Tick("route add " + r.dst.Cidr()));
    LinkInfo* l = w_.Find(ns.inode(), r.ifindex);
    if (l == nullptr) return Fail(ErrorCode::kNotFound, "no link", ENODEV);
    // As the kernel: a route through a gateway needs the link up (no connected route before).
    if (!r.gateway.empty() && !l->admin_up) {
      return Fail(ErrorCode::kIo, "add route: Network is unreachable", ENETUNREACH);
    }
    w_.routes_[ns.inode()].push_back(r);
    return {};
  }
  Result<std::vector<std::pair<int, link::IpPrefix>>> ListAllAddresses(const NetNs& ns) override {
    KUBERDMA_TRY(w_.Tick("addr list all"));
    std::vector<std::pair<int, link::IpPrefix>> out;
    for (const auto& [ifindex, list] : w_.addrs_[ns.inode()]) {
      for (const auto& p : list) out.emplace_back(ifindex, p);
    }
    return out;
  }
  Result<std::vector<link::Route>> ListAllRoutes(const NetNs& ns) override {
    KUBERDMA_TRY(w_.Tick("route list all"));
    return w_.routes_[ns.inode()];
  }
  Result<std::vector<link::Route>> ListRoutes(const NetNs& ns, int ifindex) override {
    KUBERDMA_TRY(w_.Tick("route list"));
    std::vector<link::Route> out;
    for (const auto& r : w_.routes_[ns.inode()]) {
      if (r.ifindex == ifindex) out.push_back(r);
    }
    return out;
  }

 private:
  FakeWorld& w_;
};

class FakeRdma final : public rdma::RdmaOps {
 public:
  explicit FakeRdma(FakeWorld& w) : w_(w) {}
  Result<std::vector<rdma::RdmaDevice>> List(const NetNs& ns) override {
    KUBERDMA_TRY(w_.Tick("rdma list"));
    KUBERDMA_TRY(Present());
    if (*w_.mode_ == rdma::NetnsMode::kShared) {
      std::vector<rdma::RdmaDevice> all;
      for (const auto& [ino, devs] : w_.rdma_) all.insert(all.end(), devs.begin(), devs.end());
      return all;
    }
    return w_.rdma_[ns.inode()];
  }
  Result<rdma::RdmaDevice> GetByName(const NetNs& ns, const std::string& name) override {
    KUBERDMA_ASSIGN_OR_RETURN(auto devs, List(ns));
    for (auto& d : devs) {
      if (d.name == name) return d;
    }
    return Fail(ErrorCode::kNotFound, "no RDMA device " + name, ENODEV);
  }
  Result<rdma::RdmaPort> GetPort(const NetNs&, uint32_t dev_index, uint32_t port) override {
    KUBERDMA_TRY(w_.Tick("rdma port"));
    return rdma::RdmaPort{.dev_index = dev_index, .port = port, .state = 4};
  }
  Result<rdma::NetnsMode> GetNetnsMode(const NetNs&) override {
    KUBERDMA_TRY(w_.Tick("rdma mode"));
    KUBERDMA_TRY(Present());
    return *w_.mode_;
  }
  Result<void> SetNetnsMode(const NetNs&, rdma::NetnsMode mode) override {
    KUBERDMA_TRY(w_.Tick("rdma set mode"));
    KUBERDMA_TRY(Present());
    w_.mode_ = mode;
    return {};
  }
  Result<void> MoveTo(const NetNs& from, uint32_t idx, const NetNs& to) override {
    KUBERDMA_TRY(w_.Tick("rdma move " + std::to_string(idx) + " to " + to.path()));
    KUBERDMA_TRY(Present());
    if (*w_.mode_ != rdma::NetnsMode::kExclusive) {
      return Fail(ErrorCode::kUnsupported, "move RDMA device in shared mode", EOPNOTSUPP);
    }
    auto& src = w_.rdma_[from.inode()];
    auto it = std::find_if(src.begin(), src.end(), [&](const auto& d) { return d.index == idx; });
    if (it == src.end())
      return Fail(ErrorCode::kNotFound, "no RDMA device " + std::to_string(idx), ENODEV);
    w_.rdma_[to.inode()].push_back(*it);
    src.erase(it);
    return {};
  }
  Result<void> Rename(const NetNs& ns, uint32_t idx, const std::string& name) override {
    KUBERDMA_TRY(w_.Tick("rdma rename"));
    for (auto& d : w_.rdma_[ns.inode()]) {
      if (d.index == idx) d.name = name;
    }
    return {};
  }

 private:
  Result<void> Present() {
    if (!w_.mode_)
      return Fail(ErrorCode::kUnsupported, "this kernel has no RDMA subsystem", EPROTONOSUPPORT);
    return {};
  }
  FakeWorld& w_;
};

// A PF driver's VF table: List reports it, Set applies attributes in the kernel's order
// (do_setvfinfo: MAC, VLAN, rate, spoof-check, link state, trust, GUIDs) and stops at the first
// the driver refuses, leaving the earlier ones applied.
class FakeVfs final : public link::VfOps {
 public:
  explicit FakeVfs(FakeWorld& w) : w_(w) {}
  Result<std::vector<link::VfConfig>> List(const NetNs& ns, int pf_ifindex) override {
    KUBERDMA_TRY(w_.Tick("vf list #" + std::to_string(pf_ifindex)));
    if (w_.Find(ns.inode(), pf_ifindex) == nullptr)
      return Fail(ErrorCode::kNotFound, "ifindex not found", ENODEV);
    auto it = w_.vfs_.find(pf_ifindex);
    return it == w_.vfs_.end() ? std::vector<link::VfConfig>{} : it->second;
  }
  Result<void> Set(const NetNs& ns, int pf_ifindex, const link::VfChange& c) override {
    KUBERDMA_TRY(w_.Tick("vf set #" + std::to_string(pf_ifindex) + " vf " + std::to_string(c.vf)));
    auto it = w_.vfs_.find(pf_ifindex);
    if (w_.Find(ns.inode(), pf_ifindex) == nullptr || it == w_.vfs_.end() ||
        c.vf >= it->second.size()) {
      return Fail(ErrorCode::kInvalidArgument, "set vf: Invalid argument", EINVAL);
    }
    link::VfConfig& v = it->second[c.vf];
    auto refused = [&](const char* what, int err) -> Result<void> {
      if (!w_.vf_refuses.contains(what)) return {};
      return Fail(err == EOPNOTSUPP ? ErrorCode::kUnsupported : ErrorCode::kInvalidArgument,
                  std::string("set vf ") + what + ": refused", err);
    };
    if (c.mac) v.mac = *c.mac;
    if (c.vlan) {
      v.vlan = *c.vlan;
      v.qos = c.qos;
    }
    if (c.min_tx_rate || c.max_tx_rate) {
      if (c.min_tx_rate.value_or(0) > 0) KUBERDMA_TRY(refused("min_tx_rate", EINVAL));
      v.min_tx_rate = c.min_tx_rate.value_or(0);
      v.max_tx_rate = c.max_tx_rate.value_or(0);
    }
    if (c.spoofchk) v.spoofchk = *c.spoofchk;
    if (c.link_state) {
      KUBERDMA_TRY(refused("link_state", EOPNOTSUPP));
      v.link_state = *c.link_state;
    }
    if (c.trust) v.trust = *c.trust;
    if (c.node_guid || c.port_guid) KUBERDMA_TRY(refused("guid", EOPNOTSUPP));
    if (c.node_guid) v.node_guid = *c.node_guid;
    if (c.port_guid) v.port_guid = *c.port_guid;
    return {};
  }

 private:
  FakeWorld& w_;
};

void FakeWorld::AddVfs(const std::string& pf, std::vector<link::VfConfig> vfs) {
  const LinkInfo* l = FindLink(kHostPath, pf);
  KUBERDMA_CHECK(l != nullptr);
  vfs_[l->ifindex] = std::move(vfs);
}

const link::VfConfig* FakeWorld::FindVf(const std::string& pf, uint32_t vf) const {
  const LinkInfo* l = FindLink(kHostPath, pf);
  if (l == nullptr) return nullptr;
  auto it = vfs_.find(l->ifindex);
  if (it == vfs_.end() || vf >= it->second.size()) return nullptr;
  return &it->second[vf];
}

link::VfOps& FakeWorld::vfs() { return *vf_ops_; }

FakeWorld::FakeWorld()
    : links_ops_(std::make_unique<FakeLinks>(*this)),
      addr_ops_(std::make_unique<FakeAddrs>(*this)),
      rdma_ops_(std::make_unique<FakeRdma>(*this)),
      ns_ops_(std::make_unique<FakeNamespaces>(*this)),
      vf_ops_(std::make_unique<FakeVfs>(*this)) {
  AddNamespace(kHostPath);
}
FakeWorld::~FakeWorld() = default;

link::LinkOps& FakeWorld::links() { return *links_ops_; }
link::AddrOps& FakeWorld::addrs() { return *addr_ops_; }

void FakeWorld::FlushAddresses(ino_t ino, int ifindex) {
  addrs_[ino].erase(ifindex);
  auto& routes = routes_[ino];
  routes.erase(std::remove_if(routes.begin(), routes.end(),
                              [&](const link::Route& r) { return r.ifindex == ifindex; }),
               routes.end());
}

std::vector<std::string> FakeWorld::Addresses() const {
  std::vector<std::string> out;
  for (const auto& [ino, links] : addrs_) {
    for (const auto& [ifindex, list] : links) {
      for (const auto& a : list)
        out.push_back(PathOf(ino) + " #" + std::to_string(ifindex) + " " + a.Cidr());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> FakeWorld::Routes() const {
  std::vector<std::string> out;
  for (const auto& [ino, list] : routes_) {
    for (const auto& r : list) {
      out.push_back(PathOf(ino) + " " + r.dst.Cidr() + " via " + r.gateway + " #" +
                    std::to_string(r.ifindex));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

cni::CniResult<nlohmann::json> FakeIpam::Run(const std::string& type,
                                             const cni::DelegateRequest& req,
                                             const nlohmann::json& config) {
  static const char* kVerbs[] = {"ADD", "DEL", "CHECK", "VERSION", "STATUS", "GC"};
  std::string verb = kVerbs[static_cast<int>(req.command)];
  std::string key = req.container_id + "/" + req.ifname;
  calls.push_back(verb + " " + key);
  configs.push_back(config);
  if (auto t = w_.Tick("ipam " + verb + " " + type); !t) {
    return cni::CniFail(cni::kTryAgainLater, "IPAM " + type + ": " + t.error().message());
  }
  std::string v = config.value("cniVersion", "");
  if (std::find(versions.begin(), versions.end(), v) == versions.end()) {
    return cni::CniFail(cni::kIncompatibleVersion, "IPAM " + type + ": incompatible CNI versions");
  }
  if (req.command == cni::Command::kDel) {
    allocated.erase(key);
    return nlohmann::json(nullptr);
  }
  if (req.command == cni::Command::kCheck) {
    if (!allocated.contains(key))
      return cni::CniFail(cni::kInvalidConfig, "IPAM " + type + ": no allocation");
    return nlohmann::json(nullptr);
  }
  if (!allocated.contains(key)) allocated[key] = "10.9.0." + std::to_string(next_++) + "/24";
  return nlohmann::json{{"cniVersion", v},
                        {"ips", {{{"address", allocated[key]}, {"gateway", "10.9.0.1"}}}},
                        {"routes", {{{"dst", "0.0.0.0/0"}}}},
                        {"dns", {{"nameservers", {"10.9.0.53"}}}}};
}

cni::CniResult<std::vector<std::string>> FakeIpam::Versions(const std::string&,
                                                            const cni::DelegateRequest&) {
  return versions;
}
rdma::RdmaOps& FakeWorld::rdma() { return *rdma_ops_; }
netns::NamespaceOps& FakeWorld::namespaces() { return *ns_ops_; }

void FakeWorld::AddNamespace(const std::string& path) { ns_by_path_[path] = next_ino_++; }

void FakeWorld::KillNamespace(const std::string& path) {
  auto it = ns_by_path_.find(path);
  if (it == ns_by_path_.end()) return;
  ino_t ino = it->second;
  ino_t host = ns_by_path_[kHostPath];
  for (auto l : links_[ino]) {
    // Virtual children die with their namespace (default_device_exit_batch deletes every device
    // with rtnl_link_ops); physical devices go home.
    if (l.kind == "macvlan" || l.kind == "ipvlan") continue;
    auto& h = links_[host];
    if (std::any_of(h.begin(), h.end(), [&](const LinkInfo& o) { return o.name == l.name; })) {
      l.name = "dev" + std::to_string(l.ifindex);
    }
    l.admin_up = false;
    h.push_back(l);
  }
  for (const auto& d : rdma_[ino]) rdma_[host].push_back(d);
  addrs_.erase(ino);
  routes_.erase(ino);
  links_.erase(ino);
  rdma_.erase(ino);
  ns_by_path_.erase(it);
}

void FakeWorld::AddLink(const std::string& ns_path, const std::string& name, const std::string& mac,
                        uint32_t mtu, bool up, uint32_t max_mtu) {
  LinkInfo l{.ifindex = next_ifindex_++, .name = name, .mac = mac, .mtu = mtu, .admin_up = up};
  l.max_mtu = max_mtu;
  links_[ns_by_path_.at(ns_path)].push_back(l);
}

void FakeWorld::Enslave(const std::string& ns_path, const std::string& name,
                        const std::string& master) {
  auto& links = links_[ns_by_path_.at(ns_path)];
  int master_index = 0;
  for (const auto& l : links) {
    if (l.name == master) master_index = l.ifindex;
  }
  for (auto& l : links) {
    if (l.name == name) l.master_ifindex = master_index;
  }
}

void FakeWorld::SetOperState(const std::string& ns_path, const std::string& name,
                             const std::string& state) {
  for (auto& l : links_[ns_by_path_.at(ns_path)]) {
    if (l.name == name) {
      l.oper_state = state;
      l.oper_up = state == "up";
    }
  }
}

void FakeWorld::AddRdma(const std::string& ns_path, const std::string& name, uint32_t index) {
  rdma_[ns_by_path_.at(ns_path)].push_back(rdma::RdmaDevice{.index = index, .name = name});
}

const LinkInfo* FakeWorld::FindLink(const std::string& ns_path, const std::string& name) const {
  auto it = ns_by_path_.find(ns_path);
  if (it == ns_by_path_.end() || !links_.contains(it->second)) return nullptr;
  for (const auto& l : links_.at(it->second)) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

bool FakeWorld::HasRdma(const std::string& ns_path, const std::string& name) const {
  auto it = ns_by_path_.find(ns_path);
  if (it == ns_by_path_.end() || !rdma_.contains(it->second)) return false;
  const auto& devs = rdma_.at(it->second);
  return std::any_of(devs.begin(), devs.end(), [&](const auto& d) { return d.name == name; });
}

std::string FakeWorld::Snapshot() const {
  std::set<std::string> lines;
  for (const auto& [ino, links] : links_) {
    for (const auto& l : links) {
      lines.insert(PathOf(ino) + " " + l.name + " " + l.mac + " " + std::to_string(l.mtu) +
                   (l.admin_up ? " up" : " down"));
    }
  }
  for (const auto& [ino, devs] : rdma_) {
    for (const auto& d : devs) lines.insert(PathOf(ino) + " rdma " + d.name);
  }
  for (const auto& [pf, vfs] : vfs_) {
    for (const auto& v : vfs) {
      lines.insert("pf#" + std::to_string(pf) + " vf " + std::to_string(v.vf) + " mac " + v.mac +
                   " vlan " + std::to_string(v.vlan) + "/" + std::to_string(v.qos) + " spoofchk " +
                   std::to_string(v.spoofchk) + " trust " + std::to_string(v.trust) + " state " +
                   std::string(link::VfLinkStateName(v.link_state)) + " rate " +
                   std::to_string(v.min_tx_rate) + "/" + std::to_string(v.max_tx_rate) + " guid " +
                   std::to_string(v.node_guid) + "/" + std::to_string(v.port_guid));
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace kuberdma::fakes
