// SPDX-License-Identifier: Apache-2.0
// The `rdma` network configuration: parsing and validation of what Multus (or a runtime) sends on
// stdin. Accepts the usual hand-written NAD as written:
//
//   {"cniVersion":"0.3.1","name":"rdma-net","type":"rdma","pkey":"0xffff","linkState":"up","mtu":9000}
//
// plus device selection, the shared-mode policy and logging options (docs/cni.md). Unknown fields
// are ignored; known fields of the wrong type are error 7; malformed JSON is error 6.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/cni/state.h"
#include "kuberdma/cni/types.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/link/vf_ops.h"
#include "kuberdma/rails/node_config.h"

namespace kuberdma::cni {

enum class LinkState { kLeave, kUp, kDown };
enum class SharedPolicy { kContinue, kError };

// How the device to attach was named, in precedence order (the first one present wins).
enum class SelectorKind { kAuto, kRuntimeDeviceId, kDeviceId, kPciBusId, kHca, kNetdev, kMac };
std::string_view SelectorName(SelectorKind kind);

struct Selector {
  SelectorKind kind = SelectorKind::kAuto;
  std::string value;
};

struct Attachment {
  std::string container_id;
  std::string ifname;
};

// The `ipam` section: the IPAM plugin to delegate to and its own configuration.
struct IpamConf {
  std::string type;
  nlohmann::json section;  // the whole `ipam` object, as given
};

// What the node, not the NAD, decides: the roots that a config's `stateDir`, `logFile` and
// runtimeConfig.CNIDeviceInfoFile must lie under. A NAD is written by any user of a namespace and
// `rdma` runs as root, so a NAD may only choose among places kube-rdma owns. The node config
// (rails/node_config.h: "stateRoots", "logRoots", "deviceInfoDirs") can add roots, never remove
// these; so can, for nodes set up before it could, the older file of those three keys alone
// (KUBERDMA_CNI_NODE_CONFIG, default /etc/kube-rdma/cni-node.json; deprecated).
struct NodePolicy {
  std::vector<std::string> state_roots{"/run/kube-rdma", "/var/lib/kube-rdma"};
  std::vector<std::string> log_roots{"/var/log/kube-rdma", "/run/kube-rdma"};
  // Where Multus keeps CNI device-info files (the NPWG device-info spec): the file itself must
  // be directly in one of these.
  std::vector<std::string> device_info_dirs{"/var/run/k8s.cni.cncf.io/devinfo/cni",
                                            "/run/k8s.cni.cncf.io/devinfo/cni"};
};

// The IPAM type a record of "addresses": "node" carries: no plugin is run, the result is the
// netdev's host addresses and routes (reserved: a NAD's ipam.type cannot name it).
inline constexpr char kNodeAddressesIpam[] = "rdma:node-addresses";

// The older, deprecated file of the roots alone (the node config holds them now).
inline constexpr char kNodePolicyEnv[] = "KUBERDMA_CNI_NODE_CONFIG";
inline constexpr char kNodePolicyPath[] = "/etc/kube-rdma/cni-node.json";

// `policy` (the defaults unless given) with the node config's roots added.
NodePolicy NodePolicyOf(const rails::NodeConfig& node, NodePolicy policy = {});

// Reads the deprecated file, `{"stateRoots":[...],"logRoots":[...],"deviceInfoDirs":[...]}`
// (each optional, absolute clean paths), adding its roots to `policy`. Error 7 naming `path` and
// the field when it is malformed; a missing file adds nothing.
CniResult<NodePolicy> LoadNodePolicy(const std::string& path, NodePolicy policy = {});

// Mode vf: what the PF sets on the pod's VF before its netdev moves, in sriov-cni's and
// ib-sriov-cni's field names so their NADs carry over (docs/cni.md#sr-iov-vfs). Unset fields are
// left as the PF has them, except spoof-check, which is on unless the NAD says "off": a tenant's
// VF must not send as another's MAC.
struct VfConf {
  std::optional<std::string> mac;  // runtimeConfig.mac (Multus' "mac" capability); else generated
  std::optional<uint16_t> vlan;    // "vlan": 0..4094 (0: none)
  uint8_t qos = 0;                 // "vlanQoS": 0..7, with a VLAN
  bool spoofchk = true;            // "spoofchk": "on" / "off"
  std::optional<bool> trust;       // "trust": "on" / "off"
  std::optional<link::VfLinkState> link_state;  // "link_state": "auto" / "enable" / "disable"
  std::optional<uint32_t> min_tx_rate;          // "min_tx_rate", Mbit/s
  std::optional<uint32_t> max_tx_rate;          // "max_tx_rate", Mbit/s
  std::optional<uint64_t> guid;  // runtimeConfig.infinibandGUID (else CNI_ARGS GUID, generated)
};

struct NetConf {
  std::string cni_version;
  std::string name;
  std::string type;
  std::optional<uint16_t> pkey;  // unset: the full-membership default
  LinkState link_state = LinkState::kLeave;
  // move (default): the HCA's netdev into the pod; macvlan/ipvlan: a child of it (RoCE only);
  // vf: an SR-IOV VF's netdev into the pod, set up through its PF first (`vf`); ipoib: an IPoIB
  // child of an InfiniBand HCA's netdev on `pkey` (InfiniBand only).
  AttachMode mode = AttachMode::kMove;
  std::optional<link::IpoibMode> ipoib_mode;  // "ipoibMode", mode ipoib only; unset: datagram
  std::optional<VfConf> vf;                   // mode vf only
  std::optional<uint32_t> mtu;
  // The physical rail (1-based, rails/rails.h) this network is: the HCA attached must be the
  // one on this rail, whatever device was named, in whatever order Multus passed them.
  std::optional<int> rail;
  Selector selector;
  std::vector<Selector> other_selectors;  // also given, lower precedence (logged)
  std::string device_info_file;           // runtimeConfig.CNIDeviceInfoFile
  SharedPolicy shared_policy = SharedPolicy::kContinue;
  // Attachments do not survive a reboot (every device is back on the host then), so neither does
  // their state: /run is a tmpfs, cleared at boot, and fast.
  std::string state_dir = "/run/kube-rdma/cni";
  std::string state_root = "/run/kube-rdma";  // the NodePolicy root state_dir lies under
  std::string log_root;                       // likewise for log_file
  std::string log_file;
  std::string log_level = "info";
  uint32_t lock_timeout_ms = 10000;
  std::optional<nlohmann::json> prev_result;
  std::optional<std::vector<Attachment>> valid_attachments;  // GC: cni.dev/valid-attachments
  std::optional<IpamConf> ipam;                              // absent: no addresses (IB, RoCE v1)
  // "addresses": "node" (routed rails): the netdev keeps the addresses and routes it has on the
  // node; they go into the pod with it and come back on DEL (recorded as IPAM kNodeAddressesIpam).
  bool node_addresses = false;
  // The config as received: what a delegated IPAM plugin gets on stdin.
  nlohmann::json raw = nlohmann::json::object();
};

// Parses `text` as the configuration for `command`. Errors: 6 for bad JSON (also nesting deeper
// than kMaxJsonDepth), 7 for a bad field (a path outside `policy`'s roots, a device name that is
// not a plain name), 1 for an unsupported cniVersion or a verb the version does not have (CHECK
// < 0.4.0, STATUS/GC < 1.1.0).
CniResult<NetConf> ParseConfig(std::string_view text, Command command,
                               const NodePolicy& policy = NodePolicy{});

// What DEL can still use of a config that ParseConfig refused: `name` and `stateDir` where they
// are valid (else empty name and the default state directory), the config as JSON if it is
// JSON. DEL then finds the attachment by what its record says, so a NAD that breaks after ADD
// never makes its sandbox impossible to remove.
NetConf SalvageForDel(std::string_view text, const NodePolicy& policy = NodePolicy{});

// The cniVersion an error about `text` is written in: the config's own when it is JSON naming a
// version this plugin supports, else "" (the newest). A config that parses but has a bad field
// is answered in its own version.
std::string ErrorVersion(std::string_view text);

// The cniVersion values this plugin reads and answers in.
const std::vector<std::string>& SupportedVersions();

// Compares dotted versions ("0.4.0" < "1.0.0").
int CompareVersions(std::string_view a, std::string_view b);

}  // namespace kuberdma::cni
