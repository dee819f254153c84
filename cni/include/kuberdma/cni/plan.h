// SPDX-License-Identifier: Apache-2.0
// ADD's read-only half: which HCA, which netdev, what moves where under which name, with which MTU
// and link state, and whether the pkey applies. Planning only looks (LinkOps and RdmaOps Get/List
// calls, sysfs reads, the state store's List): it changes nothing, so any plan can be thrown away.
// Plugin::Add executes the plan it gets.
//
//   Planner planner(links, rdma, root);
//   KUBERDMA_CNI_ASSIGN_OR_RETURN(AttachPlan plan, planner.Plan(req, conf, store, host, pod), 0);
//   // plan.record: what to save before the first change; plan.into: what the move applies
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>

#include "kuberdma/cni/config.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/cni/types.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/link/vf_ops.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/rdma/rdma_ops.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::cni {

// In an ipam section, replaced by the physical rail (1-based) of the HCA the attachment got:
// "range": "10.10.{rail}.0/24" gives every rail its own range, whichever network lands on it.
inline constexpr char kRailPlaceholder[] = "{rail}";

// The largest MTU of an IPoIB netdev in datagram mode: the IB MTU (4096) less the IPoIB header.
inline constexpr uint32_t kIpoibDatagramMaxMtu = 4092;
// The largest MTU of an IPoIB netdev in connected mode (IPOIB_CM_MTU).
inline constexpr uint32_t kIpoibConnectedMaxMtu = 65520;

struct AttachPlan {
  // The attachment as it will be once done (done == false, nothing moved yet): everything the
  // undo needs, saved before the first change.
  AttachmentRecord record;
  sysfs::Hca hca;
  // Another plugin of the chain already put the netdev in the pod: only the RDMA device moves.
  bool chained = false;
  // Applied in the same RTM_NEWLINK as the netdev's move: the pod's name, the MTU, and the admin
  // state (unset when it is set later, after IPAM's addresses).
  link::LinkChange into;
  // The admin state the pod's interface ends in (nullopt: leave it).
  std::optional<bool> want_up;
  // Child modes: the link created in the pod on the host's netdev (record.host_ifindex) instead
  // of a move; `into` then carries only the admin state.
  std::optional<link::ChildLink> child;
  // Mode vf: what the PF (pf_ifindex on the host) sets on the VF before the move; the VF's netdev
  // also takes the new MAC itself, or its driver is rebound (`rebind`: InfiniBand's GUIDs) so it
  // comes up with what the PF set. record.vf keeps what the VF had.
  struct VfStep {
    int pf_ifindex = 0;
    std::string pf_name;
    link::VfChange change;
    bool rebind = false;
  };
  std::optional<VfStep> vf;
};

class Planner {
 public:
  // `addrs` reads the host's addresses and routes (the node's own NICs are never moved);
  // `node` is the node config (declared rails, the node's addresses).
  // `allocations` is where the device plugin records which slots went to a container together
  // (contract/allocation.h): a rail's network takes its rail's HCA out of them.
  // `vfs` reads the PFs' view of their VFs (mode vf; nullptr: mode vf is refused).
  Planner(link::LinkOps& links, rdma::RdmaOps& rdma, link::AddrOps& addrs, sysfs::SysfsRoot root,
          rails::NodeConfig node = {}, std::string allocations = "", link::VfOps* vfs = nullptr)
      : links_(links),
        rdma_(rdma),
        addrs_(addrs),
        root_(std::move(root)),
        node_(std::move(node)),
        allocations_(std::move(allocations)),
        vfs_(vfs) {}

  // The plan for attaching `req` with `conf`, or the CNI error that stops it (7 for a config that
  // cannot apply, no free device or a device on another rail than the network's, 100 for a device
  // attached elsewhere, 102 for shared mode under sharedNetnsPolicy "error", 107 for the node's
  // own NIC or a VF of it, 4 for an ifname already in the pod).
  CniResult<AttachPlan> Plan(const Request& req, const NetConf& conf, const StateStore& store,
                             const netns::NetNs& host, const netns::NetNs& pod);

 private:
  // The chosen HCA, and its netdev on the host when selection already looked it up.
  struct Selected {
    sysfs::Hca hca;
    std::optional<link::LinkInfo> host_link;
  };
  // Who holds each HCA (by bus address, a software HCA by name): the attachment it is moved into
  // ("cid/ifname"), or how many child attachments share it.
  struct Claims {
    std::map<std::string, std::string> moved;
    std::map<std::string, int> children;
    // PF address -> an attachment holding one of its VFs (mode vf): the PF cannot move then.
    std::map<std::string, std::string> vf_pfs;
    std::string container_id;  // the attachment asking (its pod's sandbox)
  };

  static CniResult<Claims> ClaimsOf(const StateStore& store, const NetConf& conf,
                                    const std::string& self_key);
  CniResult<Selected> SelectForPoolSlot(const NetConf& conf, const netns::NetNs& host, bool chained,
                                        const Claims& claimed);
  CniResult<Selected> Select(const NetConf& conf, const netns::NetNs& host, bool chained,
                             const Claims& claimed);
  Result<sysfs::Hca> FindNamed(const Selector& sel, const netns::NetNs& host);
  // A DRA claim device this pod already holds (`held`, named by `sel`): the claim's first device,
  // in the order its record lists them, that nobody holds and can serve `conf`; nullopt when `sel`
  // is no claim device, another pod holds `held`, or the claim has no such device. Released Multus
  // under the kubelets whose pod-resources List accumulates a claim's CDI IDs gives every later
  // attachment of a claim an earlier device (docs/dra.md#released-multus-and-the-kubelets-list).
  std::optional<Selected> NextOfClaim(const Selector& sel, const sysfs::Hca& held,
                                      const NetConf& conf, const netns::NetNs& host,
                                      const Claims& claimed);
  // Why `hca` cannot serve `conf` with `claimed` as it is, or "" when it can.
  static std::string WhyNot(const sysfs::Hca& hca, const NetConf& conf, const Claims& claimed);
  // `h` with its ports and host netdev when it can serve `conf`; kNotFound saying why not.
  Result<Selected> Candidate(const sysfs::Hca& h, const NetConf& conf, const netns::NetNs& host,
                             const Claims& claimed);
  // Move: the first HCA nobody holds. Child modes: the Ethernet HCA with the fewest children.
  CniResult<Selected> FirstFree(const NetConf& conf, const netns::NetNs& host,
                                const Claims& claimed);
  CniResult<RdmaNetnsMode> NetnsMode(const netns::NetNs& host, const NetConf& conf);
  // Child modes: the HCA stays on the host, so the pod sees it only in shared mode.
  static CniResult<RdmaNetnsMode> ChildNetnsMode(RdmaNetnsMode mode, const NetConf& conf);
  // The index of `pkey` in the HCA's port 1 table (-1: RoCE's default, or an InfiniBand VF on a
  // partition, whose table follows the GUID ADD gives it); error 7 naming the subnet manager's
  // step when the port is not a member.
  CniResult<int> CheckPkey(const sysfs::Hca& hca, uint16_t pkey, AttachMode mode);
  // Error 7 when `conf.mtu` is above what `netdev` can take (IFLA_MAX_MTU; IPoIB datagram mode).
  CniResult<void> CheckMaxMtu(const sysfs::Hca& hca, const link::LinkInfo& netdev,
                              const NetConf& conf);
  // Error 100 when a child's parent is down or has no carrier.
  // Error 7 when `conf.mtu` is above what a child of `parent` can take: the parent's MTU for
  // macvlan/ipvlan, IPoIB's limit of the child's transport mode for an IPoIB child.
  static CniResult<void> CheckChildMtu(const sysfs::Hca& hca, const link::LinkInfo& parent,
                                       const NetConf& conf);
  static CniResult<void> CheckParentUp(const sysfs::Hca& hca, const link::LinkInfo& parent,
                                       const NetConf& conf);
  // The host's links, addresses and routes, read once per plan.
  Result<const rails::HostNet*> HostNetwork(const netns::NetNs& host);
  // Why `hca`'s netdev carries the node's own traffic (rails.h), or "".
  Result<std::string> NodeOwn(const sysfs::Hca& hca, const netns::NetNs& host);
  // Every HCA's rail (rails.h), judged once per plan.
  CniResult<const rails::NodeRoles*> Rails(const netns::NetNs& host);
  // `conf.rail`'s HCA when the network names a rail and no device; error 7 when none is.
  CniResult<Selected> SelectOnRail(const NetConf& conf, const netns::NetNs& host,
                                   const Claims& claimed);
  // A rail's network named by a per-HCA slot: the HCA on its rail among the slots allocated with
  // it (nullopt when the device plugin recorded no allocation for the slot).
  // The allocation the pod's device ID belongs to: the device plugin's record of a per-HCA slot,
  // or the DRA claim record holding the HCA a PCI-address deviceID names; nullopt for none.
  Result<std::optional<contract::AllocationGroup>> GroupOf(const Selector& sel,
                                                           const netns::NetNs& host);
  CniResult<std::optional<Selected>> SelectFromAllocation(const NetConf& conf,
                                                          const netns::NetNs& host,
                                                          const Claims& claimed);
  // Error 7 when `conf` names a rail and `hca` is on another.
  CniResult<void> CheckRail(const sysfs::Hca& hca, const NetConf& conf, const netns::NetNs& host);
  // `section` with every "{rail}" replaced by `hca`'s physical rail, so a network's addresses
  // follow the rail of the HCA it got; error 7 when it is on none.
  CniResult<nlohmann::json> RailSection(const nlohmann::json& section, const sysfs::Hca& hca,
                                        const netns::NetNs& host);
  // The record's IPAM: the config's section (its {rail} replaced), or the node's rail addresses.
  CniResult<void> PlanAddresses(const NetConf& conf, const link::LinkInfo& netdev,
                                const netns::NetNs& host, AttachPlan* plan);
  // "addresses": "node": the netdev's routable addresses and the routes through it that the
  // kernel does not make from them, as the record's IPAM result; error 7 when it has none.
  CniResult<IpamState> NodeAddresses(const link::LinkInfo& netdev, const sysfs::Hca& hca,
                                     const netns::NetNs& host);
  // Error 107 when a move would take the node's own NIC.
  CniResult<void> CheckNotNodeOwn(const sysfs::Hca& hca, const NetConf& conf,
                                  const netns::NetNs& host);
  CniResult<link::LinkInfo> Netdev(const Request& req, const NetConf& conf,
                                   const Selected& selected, bool chained, const netns::NetNs& host,
                                   const netns::NetNs& pod);

  // ---- Mode vf (vf_plan.cc) ----
  // The PF-side step and record.vf for `plan`'s VF: its PF found and not the node's own, the VF's
  // current settings read, the MAC or GUID chosen (unique on the node), the config checked
  // against the link (rates). Error 7 for a PF where a VF is needed or a setting the fabric has
  // not, 100 when the PF does not report the VF, 107 for a VF of the node's own NIC.
  CniResult<void> PlanVf(const Request& req, const NetConf& conf, const link::LinkInfo& netdev,
                         const netns::NetNs& host, AttachPlan* plan);
  // The VF's PF on the host: its HCA and netdev; error 100 when it has none there, 107 when it is
  // the node's own NIC.
  CniResult<std::pair<sysfs::Hca, link::LinkInfo>> VfPf(const sysfs::Hca& vf,
                                                        const netns::NetNs& host);

  link::LinkOps& links_;
  rdma::RdmaOps& rdma_;
  link::AddrOps& addrs_;
  sysfs::SysfsRoot root_;
  rails::NodeConfig node_;
  std::string allocations_;
  link::VfOps* vfs_ = nullptr;
  std::optional<rails::HostNet> host_net_;
  std::optional<rails::NodeRoles> roles_;
};

// The admin state `conf` wants in the pod for a netdev that was `host_admin_up` on the host (a
// child, new, is up unless the config says down).
std::optional<bool> WantedAdminUp(const NetConf& conf, bool host_admin_up);

// A locally administered, unicast MAC: `first_octet` (0x02, 0x06, ...: bit 1 set, bit 0 clear),
// then five bytes of FNV-1a over `parts`. The same parts give the same MAC.
std::string DerivedMac(uint8_t first_octet, std::initializer_list<std::string_view> parts);

// The MAC a macvlan child of this attachment gets: locally administered, unicast, derived from
// the network, container ID and ifname, so a retried ADD and DEL without a record know it.
std::string ChildMac(const std::string& network, const std::string& container_id,
                     const std::string& ifname);

// The state store's key of an attachment ("cid/ifname").
std::string AttachmentKey(const std::string& container_id, const std::string& ifname);

}  // namespace kuberdma::cni
