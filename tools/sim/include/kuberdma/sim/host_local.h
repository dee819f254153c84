// SPDX-License-Identifier: Apache-2.0
// Debian's host-local IPAM as the demo and the namespace tests use it: its store kept in a
// directory of theirs instead of the machine's /var/lib/cni, and what that store still holds.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kuberdma/sim/manifests.h"

namespace kuberdma::sim {

// `nads` with every host-local IPAM section's dataDir set to `dir`, and each whereabouts section
// played by host-local over the same range (whereabouts is not in Debian; on one node the two
// allocate alike: what whereabouts adds is the same range across nodes).
std::vector<Nad> WithHostLocalStore(std::vector<Nad> nads, const std::string& dir);

// Addresses host-local holds in the store `dir` (one file per address in dir/<network>/).
size_t HostLocalHeld(const std::string& dir);

}  // namespace kuberdma::sim
