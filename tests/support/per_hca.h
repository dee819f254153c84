// SPDX-License-Identifier: Apache-2.0
// The per-HCA resource the DRA tests publish and prepare from: rdma/hca, one slot per Mellanox
// HCA (what the chart's config defines).
#pragma once

#include "kuberdma/deviceplugin/config.h"

namespace kuberdma::testing {

inline deviceplugin::ResourceConfig PerHcaResource() {
  deviceplugin::ResourceConfig c;
  c.resource_name = "hca";
  c.rdma_hca_max = 1;
  c.policy = deviceplugin::Policy::kPerHca;
  c.selectors.vendors = {"15b3"};
  return c;
}

}  // namespace kuberdma::testing
