// SPDX-License-Identifier: Apache-2.0
// kuberdma-demo: the node-in-a-box (default) or, with --fleet K, an acceptance run over a
// simulated fleet of K nodes.
//
//   kuberdma-demo [--rdma PATH] [--device-plugin PATH] [--validate PATH] [--doctor PATH]
//                 [--fixture DIR] [--cni-plugins DIR] [--manifests FILE] [--nccl auto|on|off]
//   kuberdma-demo --fleet 4 [--rails 2] [--degrade NODE:RAIL|none] [--degrade-kind rate|loss]
//                 [--degrade-gbps G] [--degrade-loss PCT] [--miscable NODE:RAIL|none]
//                 [--size 32M] [--nccl auto|on|off]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "demo.h"
#include "kuberdma/base/version.h"
#include "kuberdma/sim/sim_node.h"

namespace {

// The fleet demo's options (--fleet and what shapes it).
void AddFleetOptions(CLI::App& app, kuberdma::demo::Options& o) {
  app.add_option("--fleet", o.fleet, "run an acceptance over a simulated fleet of this many nodes")
      ->check(CLI::Range(2, 16));
  app.add_option("--rails", o.rails, "fleet: rails (HCAs) per node")->check(CLI::Range(1, 8));
  app.add_option("--degrade", o.degrade, "fleet: the degraded NODE:RAIL (1-based), or none");
  app.add_option("--degrade-kind", o.degrade_kind, "fleet: rate (tbf) or loss (netem)")
      ->check(CLI::IsMember({"rate", "loss"}));
  app.add_option("--degrade-gbps", o.degrade_gbps, "fleet, rate: the degraded cable's Gbit/s")
      ->check(CLI::Range(0.001, 400.0));
  app.add_option("--degrade-loss", o.degrade_loss, "fleet, loss: percent of packets dropped")
      ->check(CLI::Range(0.1, 100.0));
  app.add_option("--miscable", o.miscable,
                 "fleet: the NODE:RAIL cabled to the next rail's leaf (LLDP), or none");
  app.add_option("--size", o.fleet_size, "fleet: each AllReduce's size");
  app.add_option("--soak", o.soak,
                 "fleet: AllReduces for this many seconds instead of the acceptance, each rail's "
                 "bytes sampled every 5 s")
      ->check(CLI::Range(10, 3600));
  app.add_option("--soak-devices", o.soak_devices,
                 "fleet, soak: the NICs NCCL is told to use (default: every rail)");
  app.add_option("--usage-out", o.usage_out, "fleet, soak: where the byte samples go (JSON)");
  app.add_flag("--keep", o.keep, "fleet: keep the reports and NCCL logs after a pass");
}

int Run(int argc, char** argv) {
  kuberdma::demo::Options o{.rdma_bin = KUBERDMA_RDMA_BIN,
                            .device_plugin_bin = KUBERDMA_DP_BIN,
                            .validate_bin = KUBERDMA_VALIDATE_BIN,
                            .doctor_bin = KUBERDMA_DOCTOR_BIN,
                            .fixture = KUBERDMA_FIXTURES "/sysfs/roce8",
                            .manifests = KUBERDMA_DEMO_MANIFESTS};
  CLI::App app{"kube-rdma demos: node-in-a-box, or a simulated fleet's acceptance (--fleet)"};
  app.set_version_flag("--version", kuberdma::kVersionLine);
  app.add_option("--rdma", o.rdma_bin, "the rdma CNI binary");
  app.add_option("--device-plugin", o.device_plugin_bin, "the rdma-device-plugin binary");
  app.add_option("--validate", o.validate_bin, "the rdma-validate binary");
  app.add_option("--doctor", o.doctor_bin, "the rdma-doctor binary");
  app.add_option("--fixture", o.fixture, "sysfs fixture of the simulated node");
  app.add_option("--cni-plugins", o.cni_plugins,
                 "where host-local (the rails' IPAM) and bridge (the cluster network) are");
  app.add_option("--manifests", o.manifests,
                 "the objects the node demo runs: `helm template` output or deploy/render.sh's");
  app.add_option("--nccl", o.nccl, "NCCL AllReduce across the pods: auto (a GPU is here), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  AddFleetOptions(app, o);
  app.add_option("--cluster", o.cluster,
                 "run the rendered chart on two nodes joined by a leaf per rail (--manifests: "
                 "ci/demo-cluster-values.yaml's rendering)")
      ->check(CLI::IsMember({2}));
  app.add_flag("--dra", o.dra,
               "node demo: the pods get their HCAs through DRA (the rendering's claim template; "
               "--manifests: ci/demo-dra-values.yaml's rendering)");
  CLI11_PARSE(app, argc, argv);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "kuberdma-demo needs root: it creates network namespaces and veths\n");
    return 2;
  }
  kuberdma::sim::RemoveStaleNamespaces();
  if (o.cluster > 0) return kuberdma::demo::RunClusterDemo(o);
  return o.fleet > 0 ? kuberdma::demo::RunFleetDemo(o) : kuberdma::demo::RunNodeDemo(o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kuberdma-demo: internal error: %s\n", e.what());
    return 2;
  } catch (...) {
    std::fprintf(stderr, "kuberdma-demo: internal error: unknown exception\n");
    return 2;
  }
}
