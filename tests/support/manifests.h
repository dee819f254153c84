// SPDX-License-Identifier: Apache-2.0
// Unit tests reading the objects deploy/ ships, as the cluster reads them (tools/sim's
// LoadRendered): a ConfigMap's JSON, a NAD's config.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "kuberdma/sim/manifests.h"

namespace kuberdma::test_support {

// deploy/<file>'s objects; the test fails when the file is missing or is not YAML.
inline sim::Rendered Shipped(const std::string& file) {
  auto r = sim::LoadRendered(std::string(KUBERDMA_DEPLOY) + "/" + file);
  INFO("deploy/" << file);
  REQUIRE(r);
  return *r;
}

}  // namespace kuberdma::test_support
