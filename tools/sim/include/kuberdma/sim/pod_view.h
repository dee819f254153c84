// SPDX-License-Identifier: Apache-2.0
// The kernel's part that a simulated node cannot play: what a pod's /sys shows once its HCAs'
// netdevs were moved in, renamed and addressed. The kernel fills a RoCE port's GID table from its
// netdev's addresses (IPv4-mapped v1 and v2 entries after the link-local ones) and a pod's sysfs
// names netdevs as the pod does; the demo writes that view from a fixture so rdma-doctor pod can
// show and check it.
//
//   WritePodView(fixture, state_dir + "/sysfs-trainer-0",
//                {{.hca = "mlx5_0", .ifname = "net1", .ipv4 = "10.10.1.2"}});
#pragma once

#include <string>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::sim {

struct PodAttachment {
  std::string hca;     // "mlx5_0"
  std::string ifname;  // its netdev's name in the pod ("net1")
  std::string ipv4;    // its address, "" when it has none
};

// Copies the sysfs tree at `fixture` to `out` (replacing it) and, for each attachment, renames the
// HCA's netdev to its pod name and writes IPv4-mapped RoCE v1/v2 GIDs at indices 2 and 3.
Result<void> WritePodView(const std::string& fixture, const std::string& out,
                          const std::vector<PodAttachment>& attachments);

}  // namespace kuberdma::sim
