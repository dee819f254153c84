// SPDX-License-Identifier: Apache-2.0
// Placeholder until the fleet acceptance lands.
#include <cstdio>

#include "demo.h"

namespace kuberdma::demo {

int RunFleetDemo(const Options&) {
  std::fprintf(stderr, "--fleet is not available yet\n");
  return 2;
}

}  // namespace kuberdma::demo
