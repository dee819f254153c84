// SPDX-License-Identifier: Apache-2.0
// A simulated node for tests, benchmarks and the demo: a private "node" namespace holding veths
// named like a fixture's HCA netdevs (their peers in a "fabric" namespace), pod namespaces, a state
// directory, and a runner that executes a CNI binary inside the node namespace the way a runtime
// would. Everything it creates is removed by its destructor, also when a test fails.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/sysfs/sysfs.h"
#include "kuberdma/testing/test_net.h"

namespace kuberdma::sim {

struct CniRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

struct CniCall {
  std::string command;
  std::string container_id;
  std::string netns;
  std::string ifname;
  std::string config;
  std::string cni_path = "/opt/cni/bin";  // where delegated (IPAM) plugins are looked for
  std::string args;                       // CNI_ARGS, as the runtime (and Multus) pass them
};

class SimNode {
 public:
  // `netdevs` are created as veths in the node namespace; `sysfs_root` maps them to HCAs.
  SimNode(std::string sysfs_root, const std::vector<std::string>& netdevs);
  ~SimNode();
  SimNode(const SimNode&) = delete;
  SimNode& operator=(const SimNode&) = delete;

  // Creates a pod namespace; returns its path (/run/netns/<unique>).
  std::string AddPod(const std::string& name);
  // Deletes a pod namespace now (as the runtime does when a sandbox dies).
  void DeletePod(const std::string& path);

  const netns::NetNs& node() const { return node_; }
  // Where the switch ends of the node's netdevs are ("sw<i>" for netdevs()[i]).
  const netns::NetNs& fabric() const { return fabric_; }
  const std::vector<std::string>& netdevs() const { return netdevs_; }
  netns::NetNs Pod(const std::string& path) const;
  link::NetlinkLinkOps& links() { return links_; }
  link::NetlinkAddrOps& addrs() { return addrs_; }
  // Test-only link setup (veths, bridges, qdiscs) in any of the node's namespaces.
  testing::TestNet& net() { return net_; }
  const std::string& state_dir() const { return state_dir_; }
  // The node policy file (cni::NodePolicy) every CNI call of this node is given: state_dir()
  // is its state and log root, state_dir()/devinfo its device-info directory.
  std::string policy_path() const { return state_dir_ + "/node-policy.json"; }
  // The node config (rails/node_config.h) every CNI call of this node is given: at first
  // {"allowUnallocated": true} (no kubelet here), until a test or the demo writes its own.
  std::string node_config_path() const { return state_dir_ + "/node.json"; }
  // Where this node's device plugin records allocations and its CNI calls look them up.
  std::string allocations_dir() const { return state_dir_ + "/allocations"; }
  const std::string& sysfs_root() const { return sysfs_root_; }

  // Cables HCA netdevs to one switch: their fabric ends become ports of bridge `rail` in the
  // fabric namespace, all up with a switch's jumbo MTU (9216). Pods holding these netdevs can
  // then reach each other over them.
  Result<void> Connect(const std::string& rail, const std::vector<std::string>& netdevs);

  // Runs `binary` with CNI_* from `call` and `call.config` on stdin, inside the node namespace.
  CniRun Run(const std::string& binary, const CniCall& call) const;
  // Starts several calls at once and waits for all (concurrency tests).
  std::vector<CniRun> RunAll(const std::string& binary, const std::vector<CniCall>& calls) const;

 private:
  Result<void> Up(const netns::NetNs& ns, const std::string& name);
  pid_t Start(const std::string& binary, const CniCall& call, int out[2], int err[2]) const;
  std::string prefix_;
  std::string sysfs_root_;
  std::string state_dir_;
  netns::NetNs node_;
  netns::NetNs fabric_;
  std::vector<std::string> names_;    // named namespaces to delete
  std::vector<std::string> netdevs_;  // node netdev i's fabric end is "sw<i>"
  link::NetlinkLinkOps links_;
  link::NetlinkAddrOps addrs_;
  testing::TestNet net_{links_};
};

// Writes a minimal RoCE sysfs tree with `n` HCAs mlx5_0..n-1 whose netdevs are `netdev(i)`.
std::string WriteMiniNode(const std::string& dir, int n, const std::string& netdev_prefix);

// Finds the netdev of the device at bus address `address` (PCI BDF or auxiliary device name) that
// is present in `ns`, using `root`'s sysfs view to map the address to netdev names.
Result<link::LinkInfo> FindByBusAddress(link::LinkOps& ops, const netns::NetNs& ns,
                                        const sysfs::SysfsRoot& root, const std::string& address);

// Removes namespaces left by earlier runs that were killed (prefix "krt-", creator pid gone).
void RemoveStaleNamespaces();

}  // namespace kuberdma::sim
