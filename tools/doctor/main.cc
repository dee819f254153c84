// SPDX-License-Identifier: Apache-2.0
// rdma-doctor: node, pod and topo views of RDMA injection, with named checks and their fixes.
//
//   rdma-doctor node|pod|topo [--json] [--host-root DIR] [--state-dir DIR]
//               [--device-plugin-dir DIR] [--checkpoint FILE] [--pod-resources SOCKET]
//   rdma-doctor node [--roce-priority 3]
//
// Exit: 0 no failed check, 1 a check failed, 2 usage.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "kuberdma/doctor/doctor.h"
#include "kuberdma/dcb/dcb_ops.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/rdma/netlink_rdma_ops.h"

int main(int argc, char** argv) {
  try {
    CLI::App app{"rdma-doctor: what was injected, where every HCA is, and what is wrong"};
    kuberdma::doctor::Inputs in{.root = kuberdma::sysfs::SysfsRoot::FromEnv()};
    bool json = false;
    app.add_flag("--json", json, "print the view as JSON");
    app.add_option("--host-root", in.host_root,
                   "the host's root file system, when run in a container (kubectl debug node: "
                   "/host); the host paths below default under it");
    auto* state = app.add_option("--state-dir", in.state_dir, "the rdma CNI's state directory");
    auto* plugin =
        app.add_option("--device-plugin-dir", in.plugin_dir, "kubelet's device plugin directory");
    auto* checkpoint =
        app.add_option("--checkpoint", in.checkpoint, "kubelet device-manager checkpoint file");
    auto* pod_resources = app.add_option("--pod-resources", in.pod_resources,
                                         "kubelet pod-resources socket (tried first)");
    app.require_subcommand(1);
    auto* node = app.add_subcommand(
        "node", "every HCA, netns mode, device plugin, allocations, CNI records, stranded devices");
    auto* pod = app.add_subcommand(
        "pod", "(inside a pod) what was injected, and NCCL configuration sanity");
    auto* topo =
        app.add_subcommand("topo", "GPU-to-HCA affinity matrix (PIX, PXB, PHB, NODE, SYS)");
    node->add_option("--roce-priority", in.roce_priority,
                     "the priority lossless RoCE uses where the port's DSCP table does not say")
        ->check(CLI::Range(0, 7));
    topo->add_option("--gpus", in.gpus, "the pod's GPUs (PCI addresses); default: every GPU")
        ->delimiter(',');
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? 0 : 2;
    }
    // Paths given explicitly are taken as they are; the defaults are the host's.
    for (auto [opt, path] :
         {std::pair{state, &in.state_dir}, std::pair{plugin, &in.plugin_dir},
          std::pair{checkpoint, &in.checkpoint}, std::pair{pod_resources, &in.pod_resources}}) {
      if (opt->count() == 0) *path = kuberdma::doctor::HostPath(in, *path);
    }
    kuberdma::link::NetlinkLinkOps links;
    kuberdma::rdma::NetlinkRdmaOps rdma;
    kuberdma::link::NetlinkAddrOps addrs;
    kuberdma::dcb::NetlinkDcbOps dcb;
    in.links = &links;
    in.rdma = &rdma;
    in.addrs = &addrs;
    in.dcb = &dcb;
    in.getenv = [](const char* k) { return std::getenv(k); };
    kuberdma::doctor::View v =
        node->parsed() ? NodeView(in) : (pod->parsed() ? PodView(in) : TopoView(in));
    (void)topo;
    std::fputs(json ? (v.ToJson().dump(2) + "\n").c_str() : Render(v).c_str(), stdout);
    return v.ExitCode();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdma-doctor: internal error: %s\n", e.what());
    return 2;
  }
}
