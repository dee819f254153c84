// SPDX-License-Identifier: Apache-2.0
// FakeWorld: an in-memory node (namespaces, links, RDMA devices) behind LinkOps, RdmaOps and
// NamespaceOps, with the kernel semantics that matter to rollback: a move can fail after the device
// already moved (rename or MTU rejected in the target), and devices go back to the host when a
// namespace dies. Any call can be made to fail: set fail_at = N and the N-th call returns an error.
//
//   FakeWorld w;
//   w.AddLink(kHostPath, "ens1f0np0", "b8:3f:d2:00:00:01", 1500, true);
//   Plugin p({w.links(), w.rdma(), w.namespaces(), root});
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kuberdma/cni/config.h"
#include "kuberdma/cni/ipam.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/link/vf_ops.h"
#include "kuberdma/netns/namespace_ops.h"
#include "kuberdma/rdma/rdma_ops.h"

namespace kuberdma::fakes {

// The node's policy plus /tmp as a root for state, logs and device-info files: the tests keep
// everything they write in temporary directories.
// `devinfo_dir`, when given, is also a device-info directory.
inline cni::NodePolicy TestPolicy(const std::string& devinfo_dir = "") {
  cni::NodePolicy p;
  p.state_roots.emplace_back("/tmp");
  p.log_roots.emplace_back("/tmp");
  if (!devinfo_dir.empty()) p.device_info_dirs.push_back(devinfo_dir);
  return p;
}

using link::LinkChange;
using link::LinkInfo;
using netns::NetNs;

inline constexpr const char* kHostPath = "/proc/1/ns/net";

class FakeWorld {
 public:
  FakeWorld();
  ~FakeWorld();

  // ---- Setting the scene ----
  void AddNamespace(const std::string& path);
  // The namespace dies: links and RDMA devices go back to the host; a link keeps its name unless
  // it is taken there, then becomes dev<ifindex> (the kernel's default_device_exit_net).
  void KillNamespace(const std::string& path);
  void AddLink(const std::string& ns_path, const std::string& name, const std::string& mac,
               uint32_t mtu, bool up, uint32_t max_mtu = 9978);
  void AddRdma(const std::string& ns_path, const std::string& name, uint32_t index);
  // Makes `name` a port of `master` (a bond, bridge, ...: IFLA_MASTER), both in `ns_path`.
  void Enslave(const std::string& ns_path, const std::string& name, const std::string& master);
  // Sets the operational state the kernel reports ("up", "down", "lowerlayerdown").
  void SetOperState(const std::string& ns_path, const std::string& name, const std::string& state);
  void SetMode(std::optional<rdma::NetnsMode> mode) { mode_ = mode; }  // nullopt: no subsystem
  // Gives host link `pf` SR-IOV VFs as its driver reports them (VfOps): `vfs` in VF order.
  void AddVfs(const std::string& pf, std::vector<link::VfConfig> vfs);
  // The PF-side settings this driver refuses, as igb does ("link_state": EOPNOTSUPP,
  // "min_tx_rate": EINVAL, "guid": EOPNOTSUPP); the kernel stops at the first refused attribute.
  std::set<std::string> vf_refuses;
  // Host links whose own MAC cannot be changed (igbvf with trust off): EINVAL.
  std::set<std::string> mac_locked;

  // The IPoIB children created, as rtnl_newlink got them (their pkey and mode are not part of
  // LinkInfo): by name, the last one of a name wins.
  std::map<std::string, link::ChildLink> ipoib_children;

  // ---- Inspecting ----
  // "ns ifname cidr" of every address, and "ns dst via gw dev ifname" of every route, sorted.
  std::vector<std::string> Addresses() const;
  std::vector<std::string> Routes() const;
  const LinkInfo* FindLink(const std::string& ns_path, const std::string& name) const;
  // VF `vf` of host link `pf` as the PF reports it, nullptr when there is none.
  const link::VfConfig* FindVf(const std::string& pf, uint32_t vf) const;
  bool HasRdma(const std::string& ns_path, const std::string& name) const;
  // "ns name mac mtu up" lines for every link and RDMA device, sorted: equal before and after
  // proves a full restoration.
  std::string Snapshot() const;

  // ---- Failure injection ----
  // false: lookups report no IFLA_MAX_MTU (a kernel before 4.19, or a driver that sets none), so
  // only the kernel's refusal after a move stops a too-large MTU.
  bool report_max_mtu = true;
  int fail_at = 0;  // 1-based number of the call that fails; 0 for none
  // With fail_at: every call from fail_at on fails too, as if the process had been killed there
  // (nothing more reaches the kernel); a later plugin finds the node as the kill left it.
  bool fail_after = false;
  int calls = 0;
  std::vector<std::string> trace;

  link::LinkOps& links();
  link::AddrOps& addrs();
  rdma::RdmaOps& rdma();
  netns::NamespaceOps& namespaces();
  link::VfOps& vfs();

 private:
  friend class FakeLinks;
  friend class FakeAddrs;
  friend class FakeIpam;
  friend class FakeRdma;
  friend class FakeNamespaces;
  friend class FakeVfs;

  Result<void> Tick(const std::string& what);
  std::vector<LinkInfo>& LinksOf(ino_t ino) { return links_[ino]; }
  std::string PathOf(ino_t ino) const;
  LinkInfo* Find(ino_t ino, int ifindex);
  Result<void> Rename(ino_t ino, LinkInfo& l, const std::string& name);

  std::map<std::string, ino_t> ns_by_path_;
  std::map<ino_t, std::vector<LinkInfo>> links_;
  std::map<ino_t, std::vector<rdma::RdmaDevice>> rdma_;
  std::optional<rdma::NetnsMode> mode_ = rdma::NetnsMode::kExclusive;
  ino_t next_ino_ = 100;
  int next_ifindex_ = 100;
  // Addresses and routes per namespace and ifindex; a link that changes namespace loses both, as
  // in the kernel.
  std::map<ino_t, std::map<int, std::vector<link::IpPrefix>>> addrs_;
  std::map<ino_t, std::vector<link::Route>> routes_;
  void FlushAddresses(ino_t ino, int ifindex);
  std::unique_ptr<link::LinkOps> links_ops_;
  std::unique_ptr<link::AddrOps> addr_ops_;
  std::unique_ptr<rdma::RdmaOps> rdma_ops_;
  std::unique_ptr<netns::NamespaceOps> ns_ops_;
  std::unique_ptr<link::VfOps> vf_ops_;
  // VFs by the PF's host ifindex.
  std::map<int, std::vector<link::VfConfig>> vfs_;
};

// An IPAM plugin in memory: ADD hands out 10.9.0.<n>/24 (gateway 10.9.0.1, a default route) per
// container/ifname and is idempotent; DEL releases; CHECK verifies the allocation exists. Each
// call ticks the world, so fail_at can make any of them fail (code 11, as a busy IPAM would).
class FakeIpam final : public cni::IpamPlugin {
 public:
  explicit FakeIpam(FakeWorld& w) : w_(w) {}
  cni::CniResult<nlohmann::json> Run(const std::string& type, const cni::DelegateRequest& req,
                                     const nlohmann::json& config) override;
  cni::CniResult<std::vector<std::string>> Versions(const std::string& type,
                                                    const cni::DelegateRequest& req) override;

  std::map<std::string, std::string> allocated;  // "cid/ifname" -> address
  std::vector<std::string> calls;                // "ADD c1/net1", ...
  std::vector<std::string> versions = {"0.3.0", "0.3.1", "0.4.0", "1.0.0"};
  std::vector<nlohmann::json> configs;  // what each call got on stdin

 private:
  FakeWorld& w_;
  int next_ = 2;
};

}  // namespace kuberdma::fakes
