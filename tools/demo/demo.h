// SPDX-License-Identifier: Apache-2.0
// kube-rdma's demos: the node-in-a-box (a simulated 8-HCA GPU node, the device plugin, pods
// attached through the rdma CNI with host-local IPAM per rail, validation, the doctor, DEL) and
// the simulated fleet (K nodes with M rails, one degraded, found by rdma-validate's acceptance
// mode). Internal to tools/demo.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/standins/api_server.h"
#include "kuberdma/standins/kubelet_dra.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::demo {

struct Options {
  std::string rdma_bin;
  std::string device_plugin_bin;
  std::string validate_bin;
  std::string doctor_bin;
  std::string fixture;
  std::string cni_plugins = "/usr/lib/cni";  // host-local and bridge (the cluster network)
  std::string manifests;                     // the rendering whose objects the node demo runs
  std::string nccl = "auto";                 // auto (a GPU is there), on, off
  // --fleet: nodes, rails per node, the degraded node:rail (1-based), how it is degraded.
  int fleet = 0;
  int rails = 2;
  std::string degrade = "3:2";
  std::string degrade_kind = "rate";  // rate (tbf) or loss (netem)
  double degrade_gbps = 1.0;          // rate: the cable's limit each way
  double degrade_loss = 5.0;          // loss: percent of packets dropped each way
  // The node:rail whose cable is plugged into the next rail's leaf (its LLDP says so), or none.
  std::string miscable = "none";
  // --soak S: instead of the acceptance, NCCL AllReduces between every node's pod (multi-pod
  // mode, rank 0 on node-1) again and again for S seconds, each rail's byte counters sampled
  // every 5 s into --usage-out (JSON), for the usage alerts' replay (tests/gpu/usage_alerts.py).
  // --soak-devices: the NCCL_SOCKET_IFNAME list the pods are given (a NIC NCCL leaves out).
  int soak = 0;
  std::string soak_devices;
  std::string usage_out;
  std::string fleet_size = "32M";  // each AllReduce's size
  bool keep = false;               // keep the fleet's reports and logs after a pass
  int cluster = 0;                 // --cluster: the two-node demo on --manifests
  bool dra = false;                // --dra: the node demo's pods get their HCAs through DRA
};

// Counts and prints failures; the demo's verdict.
class Failures {
 public:
  void operator()(const std::string& what);
  int count() const { return count_; }

 private:
  int count_ = 0;
};

// The node demo's DRA path (dra_demo.cc): the stand-in API server and allocator, NVIDIA's GPU
// slice played from the fixture, the kubelet's DRA side, Multus' DRA path.
class DraDemo {
 public:
  DraDemo(std::string dir, std::string fixture, std::string node);
  ~DraDemo();
  // rdma-device-plugin's arguments that start its DRA driver against the stand-ins.
  std::vector<std::string> PluginArgs() const;
  // The rendering's DeviceClass and ResourceClaimTemplate.
  bool Load(const std::vector<nlohmann::json>& objects, Failures& fail);
  bool Register(Failures& fail);
  bool WaitForSlices(Failures& fail);
  size_t pairs() const { return pairs_; }

  struct PodClaim {
    std::string claim;                       // "ns/name"
    std::map<std::string, std::string> env;  // the CDI spec's
    size_t device_nodes = 0;
    std::vector<std::string> device_ids;  // Multus' DRA path: the NAD resource's deviceIDs
    std::string gpus;                     // the claim's GPUs' PCI addresses
  };
  // A claim from the template for `pod`, allocated, reserved for it and prepared.
  Result<PodClaim> ClaimFor(const std::string& ns, const std::string& pod,
                            const std::string& resource);
  // A claim pairing a GPU with an HCA on another root is refused by the allocator.
  bool ShowMisaligned(Failures& fail);
  // One of the first pod's NICs goes down (its port state in the fixture copy the device plugin
  // reads): its device tainted on the slice, the pod's health status saying so, a new claim
  // allocated around it. ShowNicUp: back up, the taint gone, healthy again.
  bool ShowNicDown(Failures& fail);
  bool ShowNicUp(Failures& fail);
  void UnprepareAll(Failures& fail);

 private:
  Result<nlohmann::json> AllocateClaim(const std::string& ns, const std::string& pod);
  bool WaitForTaint(const std::string& device, bool tainted, Failures& fail);
  bool ShowAllocatedAround(const std::string& ns, Failures& fail);
  std::string down_state_, down_device_, down_pool_, down_hca_;  // ShowNicDown's NIC
  void ShowPairs(const nlohmann::json& alloc, PodClaim& out) const;
  std::string dir_, fixture_, node_;
  standins::ApiStandIn api_;
  std::vector<nlohmann::json> classes_, slices_;
  nlohmann::json template_;
  size_t pairs_ = 0;
  std::unique_ptr<standins::KubeletDraStandIn> kubelet_;
  std::vector<sysfs::Gpu> gpus_;
  std::set<std::string> in_use_;
  std::vector<dra::ClaimRef> prepared_;
};

void Heading(int n, const std::string& text);
// Runs `argv` in `ns` with `env`, output to file `out`, printed indented; its exit code.
int RunShown(const netns::NetNs& ns, const std::vector<std::string>& argv,
             const std::vector<std::string>& env, const std::string& out);
// Runs `argv` in `ns`; stdout and stderr to `out` only. The child's pid (-1 if it did not start).
pid_t Start(const netns::NetNs& ns, const std::vector<std::string>& argv,
            const std::vector<std::string>& env, const std::string& out);
int Wait(pid_t pid);
// A plain PATH, the library path the demo was given (binaries carried with their libraries),
// NCCL's NVLS off (shared GPU hosts), and `extra`.
std::vector<std::string> ToolEnv(std::vector<std::string> extra);
// GPUs of this machine, from their device nodes (/dev/nvidia0, ...).
int CountGpus();

int RunNodeDemo(const Options& o);
int RunFleetDemo(const Options& o);
int RunClusterDemo(const Options& o);

}  // namespace kuberdma::demo
