// SPDX-License-Identifier: Apache-2.0
// The HCA model: what kube-rdma knows about an RDMA device, read from sysfs under a SysfsRoot.
// Devices are identified by their bus address (PCI BDF or auxiliary name), never by a cached name
// alone: names change when devices move between namespaces.
//
//   SysfsRoot root("/");
//   KUBERDMA_ASSIGN_OR_RETURN(auto hcas, DiscoverHcas(root, HcaDetail::kPorts));
//   for (const Hca& h : hcas) std::cout << h.name << " " << h.address << "\n";
//
// Reads are cheap by default: pkey and GID tables are only read when asked for (kPkeys, kTables),
// since a RoCE port has 256 GID entries and the CNI's hot path needs none of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/rdma/netns_mode.h"
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::sysfs {

enum class LinkLayer { kUnknown, kInfiniBand, kEthernet };
std::string_view LinkLayerName(LinkLayer ll);  // "InfiniBand", "Ethernet", "unknown"

// IB port states as in ib_port_state / the "N: NAME" sysfs format.
inline constexpr int kPortActive = 4;

// The full-membership default partition key, valid on every port.
inline constexpr uint16_t kDefaultPkey = 0xffff;

// One entry of a port's GID table (ports/N/gids/I with gid_attrs/types/I and gid_attrs/ndevs/I),
// as `show_gids` prints it.
struct Gid {
  uint32_t index = 0;
  std::string gid;     // "0000:0000:0000:0000:0000:ffff:0a0a:0102", as sysfs spells it
  std::string type;    // "RoCE v2", "IB/RoCE v1"; "" where the kernel names none (InfiniBand)
  std::string netdev;  // the netdev the entry belongs to (RoCE); "" otherwise

  // fe80::/64: derived from the MAC, usable only on one L2 segment (never across routed rails).
  bool IsLinkLocal() const;
  bool IsRoceV2() const { return type == "RoCE v2"; }
  bool IsRoceV1() const { return type == "IB/RoCE v1" || type == "RoCE v1"; }
  // The IPv4 address of an IPv4-mapped entry (::ffff:a.b.c.d), "" for any other.
  std::string Ipv4() const;
  // The entry as an IPv6 address in canonical text ("::ffff:10.10.1.2", "fe80::ba3f:d2ff:...").
  std::string Address() const;
};

struct Port {
  uint32_t number = 0;
  int state = 0;           // 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
  std::string state_name;  // "ACTIVE"
  std::string phys_state;  // "LinkUp"
  std::string rate;        // "400 Gb/sec (4X NDR)"
  double rate_gbps = 0;    // 400
  LinkLayer link_layer = LinkLayer::kUnknown;
  std::string netdev;           // RoCE: gid_attrs/ndevs/0, when the netdev is in this namespace
  std::string umad;             // "umad3" when the port has a MAD device
  std::string issm;             // "issm3"
  std::vector<uint16_t> pkeys;  // kPkeys and kTables; non-zero entries in table order
  std::vector<Gid> gids;        // kTables only; populated (non-zero) entries in index order
};

// kVirtual: a software RDMA device (Soft-RoCE rxe, siw) with no bus device of its own; it rides
// a netdev (`parent`) and has no PCI address, NUMA node or firmware.
enum class BusKind { kPci, kAuxiliary, kVirtual };

struct Hca {
  std::string name;  // "mlx5_3"
  BusKind bus = BusKind::kPci;
  std::string address;      // "0000:1a:00.0", "mlx5_core.sf.2", or "" (kVirtual)
  std::string pci_address;  // the PCI function (the parent PF for an auxiliary device)
  std::string pf_address;   // for an SR-IOV VF, its PF; empty otherwise
  int vf_index = -1;        // for an SR-IOV VF, its number on the PF (virtfnN); -1 otherwise
  std::string vendor;       // "0x15b3"
  std::string device_id;    // "0x1021"
  std::string driver;       // "mlx5_core"
  int numa_node = -1;
  std::string node_guid;
  std::string fw_version;            // "28.39.1002" (kPorts and above)
  std::string device_path;           // resolved device directory relative to sys/
  std::vector<std::string> netdevs;  // netdev names under the device (this namespace's view)
  std::string uverbs;                // "uverbs3"
  std::vector<Port> ports;           // kPorts and above

  // The link layer of port 1 (all mlx5 ports of one HCA share it).
  LinkLayer link_layer() const;
  const Port* port(uint32_t number) const;
};

// How much of an HCA to read. kIdentity and kPorts are what the CNI's hot path needs; pkey tables
// (an InfiniBand ADD with a pkey) and GID tables (256 entries per RoCE port: the doctor and
// validator) only on request.
enum class HcaDetail { kIdentity, kPorts, kPkeys, kTables };

// All RDMA devices under class/infiniband, in natural name order. An absent class directory is an
// empty list (a node with no RDMA driver loaded), not an error.
Result<std::vector<Hca>> DiscoverHcas(const SysfsRoot& root, HcaDetail detail);

// One device by name. kNotFound if there is no such device.
Result<Hca> ReadHca(const SysfsRoot& root, const std::string& name, HcaDetail detail);

// The HCA that owns netdev `ifname` (via class/net/<ifname>/device), or kNotFound.
Result<Hca> HcaForNetdev(const SysfsRoot& root, const std::string& ifname, HcaDetail detail);

// The HCA whose bus address (PCI BDF or auxiliary name) is `address`, or kNotFound. A short BDF
// ("1a:00.0") matches domain 0000.
Result<Hca> HcaForAddress(const SysfsRoot& root, const std::string& address, HcaDetail detail);

// Netdev names of the device at bus address `address` (PCI BDF or auxiliary name), as listed under
// bus/{pci,auxiliary}/devices/<address>/net in this namespace's sysfs view. kNotFound if no such
// device.
Result<std::vector<std::string>> NetdevsAtAddress(const SysfsRoot& root,
                                                  const std::string& address);

// The boot-time RDMA netns mode (ib_core's netns_mode parameter); nullopt when ib_core is not
// loaded. The runtime mode, which `rdma system set` can change, is read over RDMA netlink; this is
// the fallback.
std::optional<rdma::NetnsMode> BootNetnsMode(const SysfsRoot& root);

// The populated entries of `hca` port `port`'s GID table, in index order (entries whose type or
// netdev the kernel cannot name, as on InfiniBand, keep those fields empty).
Result<std::vector<Gid>> ReadGidTable(const SysfsRoot& root, const std::string& hca, uint32_t port);

// The first entry of `gids` NCCL can use across routed rails: RoCE v2, for an address that is not
// link-local, of `netdev` when one is named. nullptr when there is none.
const Gid* FirstRoutableV2(const std::vector<Gid>& gids, std::string_view netdev = "");

// The first RoCE v2 entry of `gids` for one of `ipv4`'s addresses: on an HCA several pods share,
// the entry that is this pod's (every pod's child has the same name in `ndevs`, its address
// differs). nullptr when there is none.
const Gid* FirstV2ForAddresses(const std::vector<Gid>& gids, const std::vector<std::string>& ipv4);

// Parses "0xffff" / "65535" into a pkey; kInvalidArgument otherwise.
Result<uint16_t> ParsePkey(std::string_view text);
// "0x8001": a pkey as sysfs and partitions.conf write it.
std::string FormatPkey(uint16_t pkey);

// A pkey's partition is its low 15 bits; the top bit is the membership (1: full, 0: limited).
// The invalid pkey (0x0000, 0x8000) names no partition at all (IBA 10.9.1.2).
constexpr bool IsInvalidPkey(uint16_t pkey) { return (pkey & 0x7fff) == 0; }
// The default partition (0xffff full, 0x7fff limited), which every port is in.
constexpr bool IsDefaultPartition(uint16_t pkey) { return (pkey & 0x7fff) == 0x7fff; }

}  // namespace kuberdma::sysfs
