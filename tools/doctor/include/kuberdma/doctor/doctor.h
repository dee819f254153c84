// SPDX-License-Identifier: Apache-2.0
// rdma-doctor: what a cluster admin runs when injection goes wrong. Three views, each a JSON
// document plus named findings (every common injection mistake is a check with its
// fix in the message):
//   node  every HCA, where its netdev and RDMA device are, the netns mode, the device plugin's
//         sockets, kubelet allocations (pod-resources API, else the checkpoint file), the CNI's
//         records, stranded devices, each RoCE port's lossless setup (PFC, trust, ECN), and with
//         --lldp-wait each rail's switch and port (LLDP) against the node config's railSwitches;
//   pod   what was injected (netdevs, addresses, RDMA devices, GID tables, /dev/infiniband, env)
//         and NCCL sanity, RoCE's GID index and retry settings included;
//   topo  the GPU-to-HCA matrix in nvidia-smi topo -m's terms, flagging GPUs whose nearest HCA is
//         not in the pod.
//
//   Inputs in{.root = SysfsRoot::FromEnv(), .links = &links, .rdma = &rdma, .getenv = ...};
//   View v = PodView(in);
//   std::cout << Render(v);   // or v.doc.dump(2) for --json
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kuberdma/dcb/dcb_ops.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/link/link_ops.h"
#include "kuberdma/lldp/lldp.h"
#include "kuberdma/rdma/rdma_ops.h"
#include "kuberdma/smp/smp.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::doctor {

// kUnknown: the check could not be made here (a driver without DCB support); never a failure.
enum class Status { kOk, kWarn, kFail, kUnknown };

struct Finding {
  std::string check;  // "nccl-ib-hca-every-hca"
  Status status = Status::kOk;
  std::string message;  // what was found, naming devices
  std::string fix;      // what to do
};

struct View {
  std::string name;
  nlohmann::json doc;
  std::vector<Finding> findings;
  int ExitCode() const;  // 1 if any finding failed
  nlohmann::json ToJson() const;
};

struct Inputs {
  sysfs::SysfsRoot root;
  link::LinkOps* links = nullptr;
  rdma::RdmaOps* rdma = nullptr;
  link::AddrOps* addrs = nullptr;  // pod: the interfaces' addresses
  dcb::DcbOps* dcb = nullptr;      // node: PFC and trust of RoCE ports
  // node: each rail's switch, heard for lldp_wait_ms (0: not listened for; switches send every
  // 30 s by default).
  lldp::LldpListener* lldp = nullptr;
  int lldp_wait_ms = 0;
  // node, with lldp_wait_ms: each InfiniBand rail's neighbour, asked with an SMP (null: not asked).
  smp::HopProbe* ib_probe = nullptr;
  std::string node_name;  // node: shown as "node" (the fleet's cabling view keys nodes by it)
  std::function<const char*(const char*)> getenv;
  // node: the priority lossless RoCE traffic uses when the port's DSCP table does not say (NCCL's
  // traffic class 106 is DSCP 26, which NVIDIA's lossless setup maps to priority 3).
  int roce_priority = 3;
  std::string state_dir = "/run/kube-rdma/cni";
  // node: the device plugin's allocations directory, where the DRA driver records each prepared
  // claim with its pods and HCAs (contract/allocation.h).
  std::string allocations_dir = "/run/kube-rdma/allocations";
  // node: the node config the CNI reads (declared rails, the node's addresses).
  std::string node_config = "/etc/kube-rdma/node.json";
  // node: where the runtime finds CNI plugins (kube-rdma's, and rdma-cni's `rdma` beside it).
  std::string cni_bin_dir = "/opt/cni/bin";
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string checkpoint;  // default <plugin_dir>/kubelet_internal_checkpoint
  std::string pod_resources = "/var/lib/kubelet/pod-resources/kubelet.sock";  // tried first
  // Where the host's root file system is mounted when the doctor runs in a container (`kubectl
  // debug node/N` mounts it at /host); empty: this is the host. The CNI records' namespace paths
  // are looked up under it, except /proc/... paths, which need the host's PID namespace instead.
  std::string host_root;
  std::vector<std::string> gpus;  // topo: the pod's GPUs (PCI addresses); empty: every GPU
  // pod: this container's process status, whose CapEff says whether it has CAP_SYS_ADMIN (what
  // NVSHMEM's IBGDA needs).
  std::string proc_status = "/proc/self/status";
  // node: Linux's version as major * 100 + minor (DMA-BUF needs 512); 0: this kernel's (uname).
  int kernel_version = 0;
  // NCCL is found as rdma-validate finds it (kuberdma::ncclfind): KUBERDMA_NCCL_LIBRARY (through
  // getenv), else the dynamic loader's libnccl.so.2, else pip's wheel.
};

// A host path as this process sees it, given Inputs::host_root.
std::string HostPath(const Inputs& in, const std::string& path);

View NodeView(const Inputs& in);
// `rdma-doctor cabling`: the fleet's cabling from each node's `rdma-doctor node --json
// --lldp-wait N` document (name, text): rail i's switch is the one most nodes' rail i reaches,
// and a node whose rail reaches another is a finding naming the rail whose switch it reached.
// A document that does not parse is a warning naming it, never a reason to stop. doc["labels"]
// holds each node's topology labels (rails::TopologyLabels), for nodes whose name is valid.
View FleetCablingView(const std::vector<std::pair<std::string, std::string>>& nodes);
View PodView(const Inputs& in);
View TopoView(const Inputs& in);
std::string Render(const View& v);
// The `kubectl label node` commands that apply a cabling view's topology labels (one a node).
std::string LabelCommands(const View& v);

// `rdma-doctor partitions`: opensm partitions.conf entries for node `node`: the GUIDs its
// attachments hold on each pkey (the CNI's records under in.state_dir) and, for each of `pkeys`,
// every GUID the node can hand out there (its InfiniBand PFs' port GUIDs, their VFs' derived
// GUIDs), so the subnet manager can be configured ahead. kInvalidArgument for a pkey that does
// not parse or is no partition; kIo when the records cannot be read.
Result<std::string> PartitionsConf(const Inputs& in, const std::vector<std::string>& pkeys,
                                   const std::string& node);

// Allocations of rdma/* resources in a kubelet device-manager checkpoint (old list and newer
// NUMA-keyed formats): one entry per pod, container and resource.
struct Allocation {
  std::string pod_uid;
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
};
// An error when the file cannot be read or is not a JSON object. Entries of the wrong shape
// (a number for an ID, Data not an object) are skipped, each described in `problems` when given,
// so one bad entry never hides the others.
Result<std::vector<Allocation>> ReadCheckpoint(const std::string& path,
                                               std::vector<std::string>* problems = nullptr);
// The same over the file's text; `path` names it in messages.
Result<std::vector<Allocation>> ParseCheckpoint(std::string_view text, const std::string& path,
                                                std::vector<std::string>* problems = nullptr);

}  // namespace kuberdma::doctor
