// SPDX-License-Identifier: Apache-2.0
// Main for the namespace tests: skips (exit 77, CTest's SKIP_RETURN_CODE) where namespaces cannot
// be created, and removes namespaces left behind by an earlier run that was killed.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "kuberdma/sim/sim_node.h"
#include "kuberdma/testing/test_net.h"

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::fprintf(stderr,
                 "SKIP: namespace tests need root (they create network namespaces and veths)\n");
    return 77;
  }
  kuberdma::sim::RemoveStaleNamespaces();
  std::string probe = "krt-" + std::to_string(::getpid()) + "-probe";
  auto ns = kuberdma::testing::CreateNamed(probe);
  if (!ns) {
    std::fprintf(stderr, "SKIP: cannot create a network namespace here: %s\n",
                 ns.error().message().c_str());
    return 77;
  }
  (void)kuberdma::testing::DeleteNamed(probe);
  return Catch::Session().run(argc, argv);
}
