// SPDX-License-Identifier: Apache-2.0
// What every namespace test starts from: the `rdma` binary under test and the 8-HCA RoCE fixture
// node with its netdev names (the veths a SimNode creates for it).
#pragma once

#include <string>
#include <vector>

namespace kuberdma::sim {

inline const std::string kBin = KUBERDMA_RDMA_BIN;
inline const std::string kRoce8 = std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8";

// ens1f0np0 .. ens8f0np0, the fixture's netdevs in HCA order.
inline std::vector<std::string> Roce8Netdevs() {
  std::vector<std::string> out;
  for (int i = 1; i <= 8; ++i) out.push_back("ens" + std::to_string(i) + "f0np0");
  return out;
}

}  // namespace kuberdma::sim
