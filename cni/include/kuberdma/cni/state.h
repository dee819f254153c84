// SPDX-License-Identifier: Apache-2.0
// The CNI's state: one versioned JSON record per (network, container ID, ifname), written before
// the first change and holding everything needed to undo it; and the node-wide lock that serialises
// verbs.
//
//   StateStore store("/run/kube-rdma/cni");
//   KUBERDMA_ASSIGN_OR_RETURN(NodeLock lock, NodeLock::Acquire(store.dir(), 10000));
//   KUBERDMA_TRY(store.Save(record));          // before touching the device
//
// Layout: <dir>/<network>/<containerID>:<ifname>.json (network names are %-escaped).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/rdma/netns_mode.h"

namespace kuberdma::cni {

inline constexpr int kStateVersion = 1;

// The RDMA subsystem's netns mode as the plugin found it (rdma/netns_mode.h): exclusive (the RDMA
// device moves with its netdev), shared (it stays visible to every namespace) or nullopt,
// "unavailable" (no RDMA subsystem). A record naming none of these reads as unavailable (nothing
// was moved).
using RdmaNetnsMode = std::optional<rdma::NetnsMode>;

// How an attachment gives the pod its interface: the HCA's own netdev moved into the pod (the HCA
// is the pod's alone), an SR-IOV VF's netdev moved into the pod after its PF set the VF's MAC,
// VLAN, spoof-check, trust, link state, rates or GUIDs (the VF is the pod's alone; its PF and
// sibling VFs serve other pods), or a child link of the netdev created in the pod (the netdev and
// its HCA stay on the host and serve every pod given a child: macvlan and ipvlan on RoCE, an
// IPoIB child on a partition of its own on InfiniBand).
enum class AttachMode { kMove, kMacvlan, kIpvlan, kVf, kIpoib };
// "move", "macvlan", "ipvlan", "vf", "ipoib": the names configs and records use.
std::string_view AttachModeName(AttachMode mode);
// The mode `name` names; nullopt for any other name.
std::optional<AttachMode> ParseAttachMode(std::string_view name);
// Whether `mode` creates a child link (the HCA is shared).
inline bool IsChildMode(AttachMode mode) {
  return mode == AttachMode::kMacvlan || mode == AttachMode::kIpvlan || mode == AttachMode::kIpoib;
}

// Who an HCA is across records and rediscovery: its bus address, or, for a software HCA
// (Soft-RoCE: no bus address), its name.
inline std::string HcaIdentity(const std::string& address, const std::string& name) {
  return address.empty() ? name : address;
}

// What an attachment asked of its IPAM plugin: enough to release the address on every undo path,
// even when the runtime's config no longer names the plugin.
struct IpamState {
  std::string type;
  nlohmann::json section;  // the `ipam` object ADD delegated with
  bool requested = false;  // IPAM ADD was started: every undo calls IPAM DEL
  nlohmann::json result;   // what IPAM ADD returned (IpamResult::ToJson), null until then
};

// Mode vf: the VF as its PF had it before ADD, restored through the PF on every undo path (DEL,
// GC, a failed or crashed ADD), and what ADD set. The settings are kept as the CNI's JSON
// (cni/vf.h), which the doctor shows as it is.
struct VfRecord {
  std::string pf_address;  // the PF's PCI address: its netdev is found from it on every undo
  uint32_t index = 0;      // the VF's number on its PF
  // Armed (saved) before the first PF-side change: every undo with it set restores `before`.
  bool changed = false;
  nlohmann::json before = nlohmann::json::object();  // the PF's report of the VF before ADD
  std::string host_mac;  // the VF netdev's own MAC before ADD (set back with `before.mac`)
  nlohmann::json set = nlohmann::json::object();  // what ADD set through the PF
  bool rebound = false;  // the VF's driver was rebound to take a new MAC or GUID
};

struct AttachmentRecord {
  int version = kStateVersion;
  std::string network;
  std::string container_id;
  std::string ifname;
  std::string netns;
  bool done = false;  // false while ADD is in progress (or died half-way)

  std::string hca;          // RDMA device name on the host ("mlx5_3")
  std::string hca_address;  // its bus address, the stable identity (HcaIdentity)
  std::string link_layer;   // "Ethernet" / "InfiniBand"

  AttachMode mode = AttachMode::kMove;
  bool netdev_moved = false;  // false when chained (another plugin owns the netdev) or a child
  std::string host_name;      // the netdev's name on the host (a child's parent), restored on DEL
  int host_ifindex = 0;
  // How the netdev is found again wherever it is; for a child, the child's own MAC (an ipvlan
  // child has its parent's).
  std::string mac;
  uint32_t host_mtu = 0;
  bool host_admin_up = false;

  RdmaNetnsMode netns_mode;  // nullopt: unavailable
  bool rdma_moved = false;
  uint16_t pkey = 0xffff;
  int pkey_index = -1;  // index in the port's pkey table (InfiniBand), -1 if not applicable
  std::optional<IpamState> ipam;  // absent without an ipam section
  std::optional<VfRecord> vf;     // mode vf only

  nlohmann::json ToJson() const;
  static Result<AttachmentRecord> FromJson(const nlohmann::json& j);
};

// Reads one record file: not a symbolic link, bounded JSON, a version this plugin reads.
// kNotFound when it does not exist; kInvalidArgument naming `path` otherwise.
Result<AttachmentRecord> ReadRecord(const std::string& path);

class StateStore {
 public:
  // Records live in `dir`, which is `root` or below it (NetConf::state_root). Directories from
  // `root` down are created 0700 and must not be symbolic links (MakePrivateDirs); an empty
  // `root` means `dir` itself.
  explicit StateStore(std::string dir, std::string root = "")
      : dir_(std::move(dir)), root_(root.empty() ? dir_ : std::move(root)) {}
  const std::string& dir() const { return dir_; }

  // The record, or nullopt when none exists. kInvalidArgument for an unreadable or newer record.
  Result<std::optional<AttachmentRecord>> Load(const std::string& network,
                                               const std::string& container_id,
                                               const std::string& ifname) const;
  // Writes the record atomically (temp file + rename).
  Result<void> Save(const AttachmentRecord& rec) const;
  // Removes the record; succeeds if it is already gone.
  Result<void> Remove(const std::string& network, const std::string& container_id,
                      const std::string& ifname) const;
  // All records, of one network or (empty) of every network. A record that cannot be read
  // fails the listing, unless `unreadable` is given: then it is skipped and its error (naming the
  // file) appended there, so one corrupt file never hides the good ones beside it.
  Result<std::vector<AttachmentRecord>> List(const std::string& network = "",
                                             std::vector<Error>* unreadable = nullptr) const;

  // Whether the state directory exists (nothing was ever recorded when it does not).
  bool Exists() const;

  // Whether the directory exists or can be created, and is writable.
  Result<void> CheckWritable() const;

 private:
  std::string PathFor(const std::string& network, const std::string& container_id,
                      const std::string& ifname) const;
  std::string dir_;
  std::string root_;
};

// An exclusive flock on <dir>/.lock, held until destruction.
class NodeLock {
 public:
  // Waits up to `timeout_ms` for the lock; kBusy when another verb holds it longer. `dir` is
  // created as StateStore creates it (0700 below `root`; empty `root`: `dir` itself).
  static Result<NodeLock> Acquire(const std::string& dir, uint32_t timeout_ms,
                                  const std::string& root = "");

 private:
  explicit NodeLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// %-escapes a network name into a safe single path component.
std::string EscapeName(std::string_view name);

}  // namespace kuberdma::cni
