// SPDX-License-Identifier: Apache-2.0
// rdma-doctor: what a cluster admin runs when injection goes wrong. Three views, each a JSON
// document plus named findings (every pitfall of the seed article's section 5 is a check with its
// fix in the message):
//   node  every HCA, where its netdev and RDMA device are, the netns mode, the device plugin's
//         sockets, kubelet allocations (pod-resources API, else the checkpoint file), the CNI's
//         records, stranded devices;
//   pod   what was injected (netdevs, RDMA devices, /dev/infiniband, env) and NCCL sanity;
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

#include "kuberdma/link/link_ops.h"
#include "kuberdma/rdma/rdma_ops.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::doctor {

enum class Status { kOk, kWarn, kFail };

struct Finding {
  std::string check;  // "pitfall-3: every HCA in NCCL_IB_HCA"
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
  std::function<const char*(const char*)> getenv;
  std::string state_dir = "/run/kube-rdma/cni";
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string checkpoint;  // default <plugin_dir>/kubelet_internal_checkpoint
  std::string pod_resources = "/var/lib/kubelet/pod-resources/kubelet.sock";  // tried first
  // Where the host's root file system is mounted when the doctor runs in a container (`kubectl
  // debug node/N` mounts it at /host); empty: this is the host. The CNI records' namespace paths
  // are looked up under it, except /proc/... paths, which need the host's PID namespace instead.
  std::string host_root;
  std::vector<std::string> gpus;  // topo: the pod's GPUs (PCI addresses); empty: every GPU
  std::vector<std::string> lib_dirs = {"/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64",
                                       "/usr/lib64", "/usr/lib"};
};

// A host path as this process sees it, given Inputs::host_root.
std::string HostPath(const Inputs& in, const std::string& path);

View NodeView(const Inputs& in);
View PodView(const Inputs& in);
View TopoView(const Inputs& in);
std::string Render(const View& v);

// Allocations of rdma/* resources in a kubelet device-manager checkpoint (old list and newer
// NUMA-keyed formats): one entry per pod, container and resource.
struct Allocation {
  std::string pod_uid;
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
};
Result<std::vector<Allocation>> ReadCheckpoint(const std::string& path);

}  // namespace kuberdma::doctor
