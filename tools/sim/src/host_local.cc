// SPDX-License-Identifier: Apache-2.0
// host-local's store, for the demo and the namespace tests.
#include "kuberdma/sim/host_local.h"

#include <filesystem>

#include "kuberdma/link/addr_ops.h"

namespace kuberdma::sim {

std::vector<Nad> WithHostLocalStore(std::vector<Nad> nads, const std::string& dir) {
  for (auto& n : nads) {
    if (n.config.contains("ipam") && n.config["ipam"].value("type", "") == "host-local") {
      n.config["ipam"]["dataDir"] = dir;
    }
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
