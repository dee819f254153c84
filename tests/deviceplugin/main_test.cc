// SPDX-License-Identifier: Apache-2.0
// rdma-device-plugin, the binary (main.cc): SIGTERM and a bad config at start.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "plugin_node.h"

namespace kuberdma::deviceplugin::testing {
namespace {

TEST_CASE("SIGTERM stops the binary with exit 0 and removes its sockets") {
  Node n;
  pid_t pid = fork();
  if (pid == 0) {
    std::string cfg = n.dir + "/etc/config.json";
    std::string plugins = n.dir + "/plugins";
    std::string root = n.dir + "/root";
    execl(KUBERDMA_DP_BIN, KUBERDMA_DP_BIN, "--config", cfg.c_str(), "--device-plugin-dir",
          plugins.c_str(), "--sysfs-root", root.c_str(), "--metrics-port", "-1", "--log-level",
          "warn", nullptr);
    _exit(127);
  }
  std::string sock = n.dir + "/plugins/kuberdma-rdma-shared.sock";
  for (int i = 0; i < 100 && !fs::exists(sock); ++i) std::this_thread::sleep_for(20ms);
  REQUIRE(fs::exists(sock));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(fs::exists(sock));
  CHECK(fs::is_empty(n.dir + "/plugins"));
}

TEST_CASE("A bad config at start exits 2 naming the entry and field") {
  Node n;
  REQUIRE(WriteFileAtomic(n.dir + "/etc/bad.json",
                          R"({"configList":[{"resourceName":"a","rdmaHcaMax":"many"}]})"));
  std::string cmd = std::string(KUBERDMA_DP_BIN) + " --config " + n.dir +
                    "/etc/bad.json --device-plugin-dir " + n.dir + "/plugins --metrics-port -1 2>" +
                    n.dir + "/err";
  int rc = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(rc) == 2);
  CHECK_THAT(*ReadFile(n.dir + "/err"), Catch::Contains("configList[0].rdmaHcaMax"));
}

}  // namespace
}  // namespace kuberdma::deviceplugin::testing
