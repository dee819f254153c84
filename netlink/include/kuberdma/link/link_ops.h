// SPDX-License-Identifier: Apache-2.0
// Link operations: the narrow seam between kube-rdma and rtnetlink. The real implementation
// (NetlinkLinkOps) speaks libnl3; tests use fakes that can fail the N-th call.
//
//   NetlinkLinkOps ops;
//   KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, ops.GetByName(host, "ens1f0np0"));
//   // One RTM_NEWLINK: into the pod, renamed, with the new MTU, up. No temporary name, so udev
//   // never sees a half-configured device.
//   KUBERDMA_TRY(ops.MoveTo(host, l.ifindex, pod, {.name = "net1", .mtu = 9000, .up = true}));
//
// Every operation names the namespace it acts in, so links that live in another namespace (a
// pod's) are handled without the caller ever entering it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/netns/netns.h"

namespace kuberdma::link {

using netns::NetNs;

struct LinkInfo {
  int ifindex = 0;
  std::string name;
  std::string mac;  // "aa:bb:cc:dd:ee:ff" (20 bytes for IPoIB)
  uint32_t mtu = 0;
  bool admin_up = false;   // IFF_UP
  bool oper_up = false;    // IF_OPER_UP (or UNKNOWN on links without carrier reporting)
  std::string oper_state;  // "up", "down", "lowerlayerdown", ...
  std::string alias;       // IFLA_IFALIAS
  std::string kind;        // "veth", "" for a physical device
  // IFLA_MASTER: the bond, team, bridge or VRF this link is a port of; 0 for none.
  int master_ifindex = 0;
  // IFLA_MAX_MTU: the largest MTU the driver accepts (IPoIB datagram mode: 4092); 0 where unknown
  // (List does not read it; GetByName and GetByIndex do).
  uint32_t max_mtu = 0;
  // IFLA_STATS64 counters (the validator's proof of traffic on Socket-transport netdevs; read over
  // netlink so they are the calling namespace's own, whatever /sys is mounted from).
  uint64_t tx_bytes = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_errors = 0;
  uint64_t rx_errors = 0;
  uint64_t tx_dropped = 0;
  uint64_t rx_dropped = 0;
};

// What to change on a link; unset fields are left as they are.
struct LinkChange {
  std::optional<std::string> name;
  std::optional<uint32_t> mtu;
  std::optional<bool> up;
  std::optional<std::string> alias;
  std::optional<std::string> mac;  // IFLA_ADDRESS, "aa:bb:cc:dd:ee:ff" (an SR-IOV VF's new MAC)
};

// The kinds of child link that share a parent netdev (and so its RDMA device) among namespaces.
enum class ChildKind { kMacvlan, kIpvlan, kIpoib };
// "macvlan", "ipvlan", "ipoib": the kernel's IFLA_INFO_KIND.
std::string_view ChildKindName(ChildKind kind);

// An IPoIB child's transport (IFLA_IPOIB_MODE): unreliable datagram QPs (MTU at most 4092, the
// only mode of mlx5's enhanced IPoIB) or connected QPs (MTU up to 65520).
enum class IpoibMode { kDatagram, kConnected };

// A child link to create on a parent: macvlan in bridge mode (its own MAC, so children of one
// parent reach each other), ipvlan in L2 mode (the parent's MAC, for fabrics that allow one MAC per
// port), or an IPoIB child of an InfiniBand port's IPoIB netdev on a partition of its own.
struct ChildLink {
  ChildKind kind = ChildKind::kMacvlan;
  std::string name;             // in the namespace it is created in
  std::string mac;              // macvlan only; empty: the kernel picks one
  std::optional<uint32_t> mtu;  // unset: the parent's
  // IPoIB only. IFLA_IPOIB_PKEY: the partition (the kernel sets the full-membership bit 0x8000);
  // unset: the parent's. IFLA_IPOIB_MODE: unset, the kernel's default (datagram).
  std::optional<uint16_t> pkey;
  std::optional<IpoibMode> ipoib_mode;
};

class LinkOps {
 public:
  virtual ~LinkOps() = default;

  // Looks a link up by name or alternative name in `ns`. kNotFound if absent.
  virtual Result<LinkInfo> GetByName(const NetNs& ns, const std::string& name) = 0;
  // Looks a link up by ifindex in `ns`. kNotFound if absent.
  virtual Result<LinkInfo> GetByIndex(const NetNs& ns, int ifindex) = 0;
  // All links of `ns`.
  virtual Result<std::vector<LinkInfo>> List(const NetNs& ns) = 0;
  // Applies `change` to the link in place, in one RTM_NEWLINK.
  virtual Result<void> Change(const NetNs& ns, int ifindex, const LinkChange& change) = 0;
  // Moves the link from `from` into `to` and applies `change` there, in one RTM_NEWLINK sent from
  // `from`. The kernel moves the link first, so on failure the link may already be in `to`
  // (possibly under its old name): callers locate it before undoing.
  virtual Result<void> MoveTo(const NetNs& from, int ifindex, const NetNs& to,
                              const LinkChange& change) = 0;
  // Creates `child` on link `parent_ifindex` of `parent_ns`, directly in `into` (one RTM_NEWLINK
  // sent from `parent_ns`), down. kAlreadyExists when the name is taken there.
  virtual Result<void> CreateChild(const NetNs& parent_ns, int parent_ifindex, const NetNs& into,
                                   const ChildLink& child) = 0;
  // Deletes link `ifindex` of `ns` (RTM_DELLINK). kNotFound when it is already gone.
  virtual Result<void> Delete(const NetNs& ns, int ifindex) = 0;
};

// Finds the link with hardware address `mac` (case-insensitive) in `ns`; kNotFound otherwise.
Result<LinkInfo> FindByMac(LinkOps& ops, const NetNs& ns, std::string_view mac);

// Lower-cases a MAC for comparisons.
std::string NormalizeMac(std::string_view mac);

// "aa:bb:cc:dd:ee:ff" as its six bytes; kInvalidArgument for anything else.
Result<std::vector<uint8_t>> MacBytes(std::string_view mac);

}  // namespace kuberdma::link
