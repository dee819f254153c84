// SPDX-License-Identifier: Apache-2.0
// The RDMA subsystem's network-namespace mode (`rdma system set netns shared|exclusive`): the one
// type for it across the repo. The RDMA netlink operations report it (rdma_ops.h), the sysfs model
// reads the boot parameter (sysfs/hca.h), the CNI records it, the DRA driver publishes it.
// Header-only, so that readers of records need not link the netlink code.
//
//   std::optional<NetnsMode> m = ParseNetnsMode(record["netnsMode"]);  // nullopt: unavailable
//   if (m == NetnsMode::kExclusive) ...
#pragma once

#include <optional>
#include <string_view>

namespace kuberdma::rdma {

enum class NetnsMode { kShared, kExclusive };

// "shared" / "exclusive".
constexpr std::string_view NetnsModeName(NetnsMode mode) {
  return mode == NetnsMode::kShared ? "shared" : "exclusive";
}

// A mode that may not be known (no RDMA subsystem, or nothing said): "unavailable" for nullopt,
// the name that records and device-info files carry.
constexpr std::string_view NetnsModeName(std::optional<NetnsMode> mode) {
  return mode ? NetnsModeName(*mode) : "unavailable";
}

// "shared" and "exclusive"; nullopt for anything else ("unavailable" included).
constexpr std::optional<NetnsMode> ParseNetnsMode(std::string_view name) {
  if (name == "shared") return NetnsMode::kShared;
  if (name == "exclusive") return NetnsMode::kExclusive;
  return std::nullopt;
}

}  // namespace kuberdma::rdma
