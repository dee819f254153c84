// SPDX-License-Identifier: Apache-2.0
// rdma-doctor: node, pod and topo views of RDMA injection, with named checks and their fixes.
//
//   rdma-doctor node|pod|topo [--json] [--sysfs-root DIR] [--host-root DIR] [--state-dir DIR]
//               [--device-plugin-dir DIR] [--checkpoint FILE] [--pod-resources SOCKET]
//   rdma-doctor node [--roce-priority 3] [--lldp-wait SECONDS] [--node NAME]
//   rdma-doctor cabling NODE.json ...   (the fleet's cabling from each node's node --json)
//   rdma-doctor partitions [--pkey 0x8001 ...] [--node NAME]   (opensm partitions.conf entries)
//
// Exit: 0 no failed check, 1 a check failed, 2 usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/base/files.h"
#include "kuberdma/base/host.h"
#include "kuberdma/base/json.h"
#include "kuberdma/base/version.h"
#include "kuberdma/dcb/dcb_ops.h"
#include "kuberdma/doctor/doctor.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/rdma/netlink_rdma_ops.h"

namespace {

using kuberdma::doctor::Inputs;

struct Cli {
  Inputs in{.root = kuberdma::sysfs::SysfsRoot::FromEnv()};
  bool json = false;
  std::string output = "text";  // -o: text or json
  CLI::App* node = nullptr;
  CLI::App* pod = nullptr;
  CLI::App* partitions = nullptr;
  CLI::App* cabling = nullptr;
  std::vector<std::string> cabling_files;
  bool cabling_labels = false;
  std::vector<std::string> pkeys;
  std::string node_name;
  // The host paths the admin named; the others default under --host-root.
  std::vector<std::pair<CLI::Option*, std::string*>> host_paths;
};

// The host paths the views read, each defaulting under --host-root unless given.
void AddHostPaths(CLI::App& app, Cli& c) {
  Inputs& in = c.in;
  c.host_paths = {
      {app.add_option("--state-dir", in.state_dir, "the rdma CNI's state directory"),
       &in.state_dir},
      {app.add_option("--device-plugin-dir", in.plugin_dir, "kubelet's device plugin directory"),
       &in.plugin_dir},
      {app.add_option("--allocations-dir", in.allocations_dir,
                      "the device plugin's allocations directory (the DRA driver's claims)"),
       &in.allocations_dir},
      {app.add_option("--checkpoint", in.checkpoint, "kubelet device-manager checkpoint file"),
       &in.checkpoint},
      {app.add_option("--pod-resources", in.pod_resources,
                      "kubelet pod-resources socket (tried first)"),
       &in.pod_resources},
      {app.add_option("--node-config", in.node_config,
                      "the node config the CNI reads (declared rails, the node's addresses)"),
       &in.node_config},
      {app.add_option("--cni-bin-dir", in.cni_bin_dir,
                      "the host's CNI binary directory (whose kube-rdma and rdma are)"),
       &in.cni_bin_dir}};
}

void AddOptions(CLI::App& app, Cli& c) {
  Inputs& in = c.in;
  app.add_flag("--json", c.json, "print the view as JSON (before or after the view's name)");
  app.add_option("-o,--output", c.output, "text (default) or json, as kubectl's -o")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option_function<std::string>(
      "--sysfs-root",
      [&in](const std::string& root) { in.root = kuberdma::sysfs::SysfsRoot(root); },
      "root holding sys/ and dev/ (the fixtures in tests/fixtures/sysfs, or a copy of a node's; "
      "default /, or $KUBERDMA_SYSFS_ROOT)");
  app.add_option("--host-root", in.host_root,
                 "the host's root file system, when run in a container (kubectl debug node: "
                 "/host); the host paths below default under it");
  AddHostPaths(app, c);
  app.require_subcommand(1);
  c.node = app.add_subcommand(
      "node", "every HCA, netns mode, device plugin, allocations, CNI records, stranded devices");
  c.pod =
      app.add_subcommand("pod", "(inside a pod) what was injected, and NCCL configuration sanity");
  auto* topo = app.add_subcommand("topo", "GPU-to-HCA affinity matrix (PIX, PXB, PHB, NODE, SYS)");
  c.partitions = app.add_subcommand(
      "partitions", "opensm partitions.conf entries for the GUIDs this node hands out per pkey");
  c.partitions->add_option("--pkey", c.pkeys,
                           "also list every GUID the node can hand out on this pkey (its IB "
                           "PFs' ports, their VFs' derived GUIDs): configure the SM ahead");
  c.partitions->add_option("--node", c.node_name, "the node's name in the output (default: host)");
  c.node->add_option("--node", c.node_name, "the node's name in the output (default: host)");
  c.cabling = app.add_subcommand(
      "cabling", "the fleet's rail cabling from each node's `rdma-doctor node --json --lldp-wait`");
  c.cabling->add_option("documents", c.cabling_files, "one file per node")->required();
  // The top-level options (--json, -o, --sysfs-root, --host-root, the host paths) are taken
  // after a view's name too: `rdma-doctor node --json` as `rdma-doctor --json node`.
  for (auto* sub : {c.node, c.pod, topo, c.partitions, c.cabling}) sub->fallthrough();
  c.cabling->add_flag("--labels", c.cabling_labels,
                      "print the kubectl label commands for each node's topology labels instead");
  c.node
      ->add_option_function<double>(
          "--lldp-wait", [&in](double s) { in.lldp_wait_ms = static_cast<int>(s * 1000); },
          "listen this many seconds for each rail's LLDP neighbour (its switch and port) and "
          "check it against the node config's railSwitches; switches send every 30 s by default")
      ->check(CLI::Range(0.0, 300.0));
  c.node
      ->add_option("--roce-priority", in.roce_priority,
                   "the priority lossless RoCE uses where the port's DSCP table does not say")
      ->check(CLI::Range(0, 7));
  // sysfs shows a pod every GPU of the node: both views count the pod's own when told them.
  for (auto* sub : {topo, c.pod}) {
    sub->add_option("--gpus", in.gpus, "the pod's GPUs (PCI addresses); default: every GPU")
        ->delimiter(',');
  }
}

// --node, else this host's name.
std::string NodeName(const Cli& c) {
  if (!c.node_name.empty()) return c.node_name;
  return kuberdma::HostName();
}

int Partitions(const Cli& c) {
  auto conf = kuberdma::doctor::PartitionsConf(c.in, c.pkeys, NodeName(c));
  if (!conf) {
    std::fprintf(stderr, "rdma-doctor partitions: %s\n", conf.error().message().c_str());
    // A --pkey that is not one is a usage error (2), as in every view; the node's state is 1.
    return conf.error().code() == kuberdma::ErrorCode::kInvalidArgument ? 2 : 1;
  }
  std::fputs(conf->c_str(), stdout);
  return 0;
}

int Print(const Cli& c, const kuberdma::doctor::View& v) {
  std::fputs(c.json ? (kuberdma::DumpJson(v.ToJson(), 2) + "\n").c_str() : Render(v).c_str(),
             stdout);
  return v.ExitCode();
}

int Cabling(const Cli& c) {
  std::vector<std::pair<std::string, std::string>> docs;
  for (const auto& f : c.cabling_files) {
    auto text = kuberdma::ReadRegularFile(f);
    if (!text) {
      std::fprintf(stderr, "rdma-doctor cabling: %s\n", text.error().message().c_str());
      return 2;
    }
    docs.emplace_back(f, std::move(*text));
  }
  kuberdma::doctor::View v = kuberdma::doctor::FleetCablingView(docs);
  if (c.cabling_labels) {
    std::fputs(kuberdma::doctor::LabelCommands(v).c_str(), stdout);
    return 0;
  }
  return Print(c, v);
}

int Run(int argc, char** argv) {
  CLI::App app{"rdma-doctor: what was injected, where every HCA is, and what is wrong"};
  app.set_version_flag("--version", kuberdma::kVersionLine);
  Cli c;
  AddOptions(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (c.output == "json") c.json = true;
  // Paths given explicitly are taken as they are; the defaults are the host's.
  for (auto [opt, path] : c.host_paths) {
    if (opt->count() == 0) *path = kuberdma::doctor::HostPath(c.in, *path);
  }
  if (c.partitions->parsed()) return Partitions(c);
  if (c.cabling->parsed()) return Cabling(c);
  kuberdma::link::NetlinkLinkOps links;
  kuberdma::rdma::NetlinkRdmaOps rdma;
  kuberdma::link::NetlinkAddrOps addrs;
  kuberdma::dcb::NetlinkDcbOps dcb;
  kuberdma::lldp::PacketLldpListener lldp;
  c.in.lldp = &lldp;
  kuberdma::smp::UmadHopProbe ib_probe;
  if (c.in.lldp_wait_ms > 0) c.in.ib_probe = &ib_probe;
  c.in.links = &links;
  c.in.rdma = &rdma;
  c.in.addrs = &addrs;
  c.in.dcb = &dcb;
  c.in.getenv = [](const char* k) { return std::getenv(k); };
  c.in.node_name = NodeName(c);
  kuberdma::doctor::View v =
      c.node->parsed() ? NodeView(c.in) : (c.pod->parsed() ? PodView(c.in) : TopoView(c.in));
  return Print(c, v);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdma-doctor: internal error: %s\n", e.what());
    return 2;
  }
}
