// SPDX-License-Identifier: Apache-2.0
// host-local's store, for the demo and the namespace tests.
#include "kuberdma/sim/host_local.h"

#include <filesystem>

#include "kuberdma/link/addr_ops.h"

namespace kuberdma::sim {

std::vector<Nad> WithHostLocalStore(std::vector<Nad> nads, const std::string& dir) {
  for (auto& n : nads) {
    if (!n.config.contains("ipam") || !n.config["ipam"].is_object()) continue;
    nlohmann::json& ipam = n.config["ipam"];
    // whereabouts is not in Debian: on one node host-local allocates from the same range alike.
    if (ipam.value("type", "") == "whereabouts" && ipam.contains("range")) {
      ipam = {{"type", "host-local"},
              {"ranges",
               nlohmann::json::array({nlohmann::json::array({{{"subnet", ipam["range"]}}})})}};
    }
    if (ipam.value("type", "") == "host-local") ipam["dataDir"] = dir;
  }
  return nads;
}

size_t HostLocalHeld(const std::string& dir) {
  namespace fs = std::filesystem;
  size_t n = 0;
  std::error_code ec;
  for (const auto& net : fs::directory_iterator(dir, ec)) {
    for (const auto& e : fs::directory_iterator(net.path(), ec)) {
      n += link::ParseAddress(e.path().filename().string()) ? 1u : 0u;
    }
  }
  return n;
}

}  // namespace kuberdma::sim
