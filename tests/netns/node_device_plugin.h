// SPDX-License-Identifier: Apache-2.0
// rdma-device-plugin as the DaemonSet runs it on a simulated node, for the tests whose CNI asks
// it about a pod's allocation: the per-HCA resource "hca", the node's config and allocations
// directory, the kubelet stand-in's pod-resources API. Stopped (SIGTERM, reaped) when it goes,
// also when a test fails.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>

#include <csignal>
#include <string>

#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/kubelet.h"
#include "kuberdma/testing/test_net.h"
#include "roce8_node.h"

namespace kuberdma::sim {

class NodeDevicePlugin {
 public:
  // Writes its config to `dir` and starts it in `node`'s namespace; started() once it runs.
  NodeDevicePlugin(const SimNode& node, const std::string& dir,
                   const standins::KubeletStandIn& kubelet) {
    if (!WriteFileAtomic(dir + "/device-plugin.json",
                         R"({"configList":[{"resourceName":"hca","rdmaHcaMax":1,)"
                         R"("policy":"per-hca"}]})")) {
      return;
    }
    UniqueFd log(
        ::open((dir + "/device-plugin.log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    pid_ = testing::SpawnIn(
               node.node(),
               {KUBERDMA_DP_BIN, "--config", dir + "/device-plugin.json", "--device-plugin-dir",
                dir, "--sysfs-root", kRoce8, "--metrics-port", "-1", "--node-config",
                node.node_config_path(), "--allocations-dir", node.allocations_dir(),
                "--pod-resources", kubelet.pod_resources_socket()},
               {"PATH=/usr/bin:/bin"}, -1, log.get(), log.get())
               .value_or(-1);
  }
  ~NodeDevicePlugin() { Stop(); }
  NodeDevicePlugin(const NodeDevicePlugin&) = delete;
  NodeDevicePlugin& operator=(const NodeDevicePlugin&) = delete;

  bool started() const { return pid_ > 0; }
  // Stops it now (a test of what works without it); again is fine.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace kuberdma::sim
