// SPDX-License-Identifier: Apache-2.0
// kube-rdma's demos: the node-in-a-box (a simulated 8-HCA GPU node, the device plugin, pods
// attached through the rdma CNI with host-local IPAM per rail, validation, the doctor, DEL) and
// the simulated fleet (K nodes with M rails, one degraded, found by rdma-validate's acceptance
// mode). Internal to tools/demo.
#pragma once

#include <string>
#include <vector>

#include "kuberdma/netns/netns.h"

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
  std::string fleet_size = "32M";     // each AllReduce's size
  bool keep = false;                  // keep the fleet's reports and logs after a pass
  int cluster = 0;                    // --cluster: the two-node demo on --manifests
};

// Counts and prints failures; the demo's verdict.
class Failures {
 public:
  void operator()(const std::string& what);
  int count() const { return count_; }

 private:
  int count_ = 0;
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
