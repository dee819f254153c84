// SPDX-License-Identifier: Apache-2.0
// rdma-device-plugin: the kubelet device plugin for rdma/shared and per-HCA pools.
//
//   rdma-device-plugin --config /etc/kube-rdma/device-plugin.json
//       [--device-plugin-dir /var/lib/kubelet/device-plugins] [--sysfs-root /] [--metrics-port
//       9109]
//
// Exit codes: 0 after SIGTERM/SIGINT, 2 for a bad flag or config (the message names the entry and
// field), 1 for anything else that stops it.
#include <malloc.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "kuberdma/base/files.h"
#include "kuberdma/base/log_text.h"
#include "kuberdma/base/version.h"
#include "kuberdma/deviceplugin/manager.h"
#include "kuberdma/deviceplugin/resource.h"
#include "kuberdma/dra/driver.h"
#include "kuberdma/dra/node_labels.h"
#include "kuberdma/dra/slices.h"
#include "kuberdma/rails/cabling.h"
#include "kuberdma/rails/node_config.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/sriov/vfs.h"

namespace {

const char* EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

struct Cli {
  std::string config = "/etc/kube-rdma/device-plugin.json";
  std::string sysfs_root = kuberdma::sysfs::SysfsRoot::FromEnv().root();
  std::string level = "info";
  bool check_only = false;
  bool dra_slices = false;
  // The node config (ConfigMap key node.json, mounted beside the config), resolved for this node.
  std::string node_config = kuberdma::rails::NodeConfigPath();
  std::string node_name = EnvOr("NODE_NAME", "");
  std::string node_ip = EnvOr("NODE_IP", "");
  std::string write_node_config;
  bool configure_vfs = false;
  kuberdma::deviceplugin::Options opts;
  // The DRA driver beside the device plugin (docs/dra.md).
  bool dra = false;
  bool dra_remove_slices = false;
  std::string api_server;  // "" in a cluster: the ServiceAccount's
  bool node_labels = false;
  kuberdma::dra::Driver::Options dra_opts;
};

void AddOptions(CLI::App& app, Cli& c) {
  app.add_option("--config", c.config, "device plugin config (the shared plugin's JSON format)");
  app.add_option("--device-plugin-dir", c.opts.plugin_dir, "kubelet's device plugin directory");
  app.add_option("--sysfs-root", c.sysfs_root, "root holding sys/ and dev/ (fixtures, tests)");
  app.add_option("--metrics-port", c.opts.metrics_port, "port for /metrics and /healthz (-1: off)");
  app.add_option("--metrics-address", c.opts.metrics_address,
                 "address /metrics and /healthz listen on (default 0.0.0.0: every address)");
  app.add_flag("--check-config", c.check_only,
               "validate --config, print the resources it defines, and exit (0 valid, 2 not)");
  app.add_flag("--dra-slices", c.dra_slices,
               "print the resource.k8s.io/v1 ResourceSlices the DRA driver publishes for this "
               "node's per-HCA resources (a JSON List) and exit (docs/dra.md)");
  app.add_option("--node-config", c.node_config,
                 "node config: declared rails, the node's addresses (default " + c.node_config +
                     "; absent: none declared)");
  app.add_option("--node-name", c.node_name,
                 "this node's name, for the node config's \"nodes\" "
                 "(default $NODE_NAME)");
  app.add_option("--node-ip", c.node_ip,
                 "the address the node is known by, never taken (default $NODE_IP)");
  app.add_option("--pod-resources", c.opts.pod_resources,
                 "the kubelet's pod-resources socket, for the CNI's allocation check");
  app.add_option("--allocations-dir", c.opts.allocations_dir,
                 "where per-HCA allocations are recorded for the CNI (default " +
                     c.opts.allocations_dir + ")");
  app.add_option("--write-node-config", c.write_node_config,
                 "write the node config resolved for this node (with --node-ip) to this path, "
                 "where the CNI reads it, and exit (0 written, 2 bad config)");
  app.add_flag("--configure-vfs", c.configure_vfs,
               "create the SR-IOV VFs the node config's \"sriov\" asks for (sriov_numvfs), "
               "never past the firmware's total or while a VF is in a pod, say what was done, "
               "and exit (0, also when an entry is blocked: rdma-doctor node shows why; 2 bad "
               "config, 1 a write the kernel refused)");
  app.add_option("--log-level", c.level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

// The DRA driver's flags (docs/dra.md).
// The fabric (docs/fabric.md): LLDP for the node's life, and the node's topology labels.
void AddCablingOptions(CLI::App& app, Cli& c) {
  app.add_flag("--lldp", c.opts.lldp,
               "listen for each rail's LLDP neighbour (its switch and port) for as long as the "
               "plugin runs, into <allocations-dir>/cabling.json (needs CAP_NET_RAW; "
               "docs/fabric.md)");
  app.add_option_function<double>(
         "--lldp-round",
         [&c](double s) {
           c.opts.lldp_round = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
         },
         "seconds a round of listening lasts (default 35: switches send every 30 s)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_flag(
      "--node-labels", c.node_labels,
      "with --lldp: write the node's topology labels (topology.kube-rdma.io/rail-<n>-leaf, "
      "block) on its Node object as its rails' neighbours change (needs patch on nodes)");
}

void AddDraOptions(CLI::App& app, Cli& c) {
  app.add_flag("--dra", c.dra,
               "also run the DRA driver: publish this node's ResourceSlices and serve the "
               "kubelet's NodePrepareResources (Kubernetes 1.34+, docs/dra.md)");
  app.add_option("--dra-resource", c.dra_opts.resource,
                 "the per-HCA resource the DRA driver publishes (default: the config's first); "
                 "it is then not registered with the kubelet as a device plugin resource");
  app.add_option("--cdi-dir", c.dra_opts.cdi_dir, "where the DRA driver writes CDI specs");
  app.add_option("--kubelet-plugins-dir", c.dra_opts.plugins_dir,
                 "the kubelet's plugins directory (the DRA socket: <dir>/" +
                     std::string(kuberdma::dra::kDriverName) + "/dra.sock)");
  app.add_option("--kubelet-registry-dir", c.dra_opts.registry_dir,
                 "the kubelet's plugin watcher directory (plugins_registry)");
  app.add_option("--api-server", c.api_server,
                 "the API server's URL (default: in-cluster, with the pod's ServiceAccount)");
  app.add_option("--dra-taint-effect", c.dra_opts.publish.taint_effect,
                 "the effect of an unhealthy device's taint: NoSchedule (no new claim gets it) or "
                 "NoExecute (also evicts the pods whose claims hold it)")
      ->check(CLI::IsMember({"NoSchedule", "NoExecute"}));
  app.add_flag("--dra-remove-slices", c.dra_remove_slices,
               "delete the DRA driver's ResourceSlices of --node-name (of every node when it is "
               "empty: the chart's uninstall hook) and exit");
}

void SetUpLogging(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("rdma-device-plugin",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e level=%l %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

// The node's HCAs and their roles (rails, the node's own NICs) as this namespace shows them.
struct NodeView {
  std::vector<kuberdma::sysfs::Hca> hcas;
  std::optional<kuberdma::rails::NodeRoles> roles;
};

NodeView ViewNode(const Cli& c, const kuberdma::rails::NodeConfig& node) {
  NodeView v;
  auto hcas = kuberdma::sysfs::DiscoverHcas(kuberdma::sysfs::SysfsRoot(c.sysfs_root),
                                            kuberdma::sysfs::HcaDetail::kPorts);
  if (hcas) v.hcas = std::move(*hcas);
  kuberdma::link::NetlinkLinkOps links;
  kuberdma::link::NetlinkAddrOps addrs;
  auto host = kuberdma::netns::NetNs::Current();
  if (!host) return v;
  auto net = kuberdma::rails::ReadHostNet(links, addrs, *host);
  if (!net) {
    std::fprintf(stderr, "rdma-device-plugin: cannot judge the node's own NICs: %s\n",
                 net.error().message().c_str());
    return v;
  }
  v.roles = kuberdma::rails::JudgeHcas(v.hcas, *net, node);
  return v;
}

// --check-config: the resources the config defines, and which of this node's HCAs each takes
// and skips, and why.
void PrintResources(const kuberdma::deviceplugin::Config& cfg, const Cli& c,
                    const kuberdma::rails::NodeConfig& node) {
  NodeView v = ViewNode(c, node);
  const kuberdma::rails::NodeRoles* roles = v.roles ? &*v.roles : nullptr;
  for (const auto& r : cfg.resources) {
    bool per_hca = r.policy == kuberdma::deviceplugin::Policy::kPerHca;
    std::printf("%s: policy %s, %u slots%s\n", r.FullName().c_str(), per_hca ? "per-hca" : "pool",
                r.rdma_hca_max, per_hca ? " per HCA" : "");
    kuberdma::deviceplugin::Resource res(r, kuberdma::sysfs::SysfsRoot(c.sysfs_root));
    for (const auto& h : v.hcas) {
      std::string why = res.WhyNotSelected(h, v.hcas, roles);
      const kuberdma::rails::HcaRole* role = roles ? roles->Find(h.name) : nullptr;
      std::string rail = role && role->rail > 0 ? ", rail " + std::to_string(role->rail) : "";
      std::printf("  %s %s (%s%s)%s%s\n", why.empty() ? "takes" : "skips", h.name.c_str(),
                  h.address.empty() ? "virtual" : h.address.c_str(), rail.c_str(),
                  why.empty() ? "" : ": ", why.c_str());
    }
  }
  if (v.hcas.empty())
    std::printf("(no HCAs under %s/sys/class/infiniband)\n", c.sysfs_root.c_str());
  for (const auto& u : roles ? roles->unmatched : std::vector<std::string>{}) {
    std::printf("node config: %s\n", u.c_str());
  }
}

// --dra-slices: each per-HCA resource's HCAs as the DRA driver publishes them; 0, or 2 saying why.
int PrintDraSlices(const kuberdma::deviceplugin::Config& cfg, const Cli& c,
                   const kuberdma::rails::NodeConfig& node) {
  NodeView v = ViewNode(c, node);
  const kuberdma::rails::NodeRoles* roles = v.roles ? &*v.roles : nullptr;
  kuberdma::sysfs::SysfsRoot root(c.sysfs_root);
  kuberdma::dra::PublishOptions o{.node = c.node_name,
                                  .netns_mode = kuberdma::sysfs::BootNetnsMode(root),
                                  .taint_effect = c.dra_opts.publish.taint_effect};
  nlohmann::json items = nlohmann::json::array();
  for (const auto& r : cfg.resources) {
    if (r.policy != kuberdma::deviceplugin::Policy::kPerHca) continue;  // a pool has no devices
    kuberdma::deviceplugin::Resource res(r, root);
    res.Refresh(v.hcas, roles);
    auto published = kuberdma::dra::ResourceSlices(res, o, roles);
    if (!published) {
      std::fprintf(stderr, "rdma-device-plugin: %s\n", published.error().message().c_str());
      return 2;
    }
    for (const auto& d : published->dropped) {
      std::fprintf(stderr, "rdma-device-plugin: left out %s\n", d.c_str());
    }
    for (auto& s : published->objects) items.push_back(std::move(s));
  }
  std::printf(
      "%s\n",
      nlohmann::json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}.dump(2).c_str());
  return 0;
}

// The node's topology labels from what the LLDP watch recorded; a failure is logged and tried
// again at the next change (a restart writes them anew from the kept record).
void LabelNode(const kuberdma::dra::ApiServer& api, const std::string& node,
               const std::vector<kuberdma::contract::CablingRecord>& recs) {
  auto labels = kuberdma::rails::TopologyLabels(kuberdma::contract::RailNeighbors(recs));
  if (auto done = kuberdma::dra::ApplyTopologyLabels(api, node, labels); !done) {
    spdlog::error("event=node_labels_failed error={}", kuberdma::LogQuoted(done.error().message()));
  } else {
    spdlog::info("event=node_labels node={} labels={}", node, labels.size());
  }
}

// The API server: --api-server (tests, the demo), else in-cluster.
kuberdma::Result<kuberdma::dra::ApiServer> ApiServerOf(const Cli& c) {
  if (!c.api_server.empty()) return kuberdma::dra::ApiServer{.base = c.api_server};
  return kuberdma::dra::ApiServer::InCluster(std::getenv);
}

// --dra-remove-slices: 0 when none of the driver's slices are left, 1 saying why not.
int RemoveSlices(const Cli& c) {
  auto api = ApiServerOf(c);
  auto done = !api ? kuberdma::Result<kuberdma::dra::SyncCounts>(kuberdma::Fail(api.error()))
                   : kuberdma::dra::SyncSlices(*api, kuberdma::dra::kDriverName, c.node_name, {});
  if (!done) {
    std::fprintf(stderr, "rdma-device-plugin: removing ResourceSlices: %s\n",
                 done.error().message().c_str());
    return 1;
  }
  std::printf("removed %d ResourceSlice(s) of %s%s\n", done->deleted, kuberdma::dra::kDriverName,
              c.node_name.empty() ? " on every node" : (" on " + c.node_name).c_str());
  return 0;
}

// The per-HCA resource --dra publishes, taken off the kubelet's device plugin registrations;
// kInvalidArgument saying why --dra cannot start.
kuberdma::Result<void> DraResource(Cli& c, const kuberdma::deviceplugin::Config& cfg) {
  using kuberdma::ErrorCode;
  using kuberdma::Fail;
  if (c.node_name.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "--dra needs --node-name (or $NODE_NAME)");
  }
  for (const auto& r : cfg.resources) {
    if (r.policy != kuberdma::deviceplugin::Policy::kPerHca) continue;
    const std::string& want = c.dra_opts.resource;
    if (want.empty() || want == r.resource_name || want == r.FullName()) {
      c.opts.dra_resources.insert(r.FullName());
      c.dra_opts.resource = r.FullName();
      spdlog::info(
          "event=dra_resource resource={} (published through DRA, not registered with "
          "the kubelet as a device plugin resource)",
          r.FullName());
      return {};
    }
  }
  return Fail(ErrorCode::kInvalidArgument,
              "--dra publishes a per-HCA resource, and the config has none" +
                  (c.dra_opts.resource.empty() ? std::string() : " named " + c.dra_opts.resource) +
                  R"( (add one with "policy": "per-hca", or set --dra-resource))");
}

// The DRA driver, when --dra: hooked to the device plugin's scans; nullptr and a message when it
// cannot start.
std::unique_ptr<kuberdma::dra::Driver> StartDra(Cli& c) {
  auto api = ApiServerOf(c);
  if (!api) {
    spdlog::error("event=dra_start_failed error={}", kuberdma::LogQuoted(api.error().message()));
    return nullptr;
  }
  kuberdma::sysfs::SysfsRoot root(c.sysfs_root);
  c.dra_opts.publish.node = c.node_name;
  c.dra_opts.publish.netns_mode = kuberdma::sysfs::BootNetnsMode(root);
  auto d = std::make_unique<kuberdma::dra::Driver>(c.dra_opts, *api);
  c.opts.on_rescan = [raw = d.get()](const auto& resources, const auto* roles) {
    raw->OnRescan(resources, roles);
  };
  spdlog::info("event=dra_start driver={} node={} api_server={}", kuberdma::dra::kDriverName,
               c.node_name, api->base);
  return d;
}

// The node config for this node: its entry in "nodes" applied, the node IP added.
kuberdma::Result<kuberdma::rails::NodeConfig> NodeConfigFor(const Cli& c) {
  KUBERDMA_ASSIGN_OR_RETURN(auto node, kuberdma::rails::LoadNodeConfig(c.node_config, c.node_name));
  if (!c.node_ip.empty() && std::find(node.node_addresses.begin(), node.node_addresses.end(),
                                      c.node_ip) == node.node_addresses.end()) {
    node.node_addresses.push_back(c.node_ip);
  }
  return node;
}

// --write-node-config: the resolved node config where the CNI reads it; 0, or 2 saying why not.
int WriteNodeConfig(const Cli& c, const kuberdma::rails::NodeConfig& node) {
  auto w = kuberdma::WriteFileAtomic(c.write_node_config, kuberdma::rails::FormatNodeConfig(node));
  if (!w) {
    std::fprintf(stderr, "rdma-device-plugin: %s\n", w.error().message().c_str());
    return 2;
  }
  std::printf("wrote %s: node %s, %zu declared rail(s), node addresses [%s]\n",
              c.write_node_config.c_str(), c.node_name.empty() ? "(unnamed)" : c.node_name.c_str(),
              node.rails.size(), fmt::format("{}", fmt::join(node.node_addresses, ", ")).c_str());
  return 0;
}

// --configure-vfs: every "sriov" entry of the node config planned and, where safe, applied.
int ConfigureVfs(const Cli& c, const kuberdma::rails::NodeConfig& node) {
  NodeView v = ViewNode(c, node);
  if (!v.roles) return 1;
  kuberdma::sysfs::SysfsRoot root(c.sysfs_root);
  int rc = 0;
  for (auto& plan : kuberdma::sriov::PlanVfCounts(root, node, *v.roles, v.hcas)) {
    auto line = kuberdma::sriov::ApplyVfCount(root, plan);
    if (!line) {
      std::fprintf(stderr, "rdma-device-plugin: sriov %s: %s\n", plan.want.Target().c_str(),
                   line.error().message().c_str());
      rc = 1;
      continue;
    }
    std::printf("sriov %s\n", line->c_str());
  }
  if (node.sriov.empty()) std::printf("sriov: the node config asks for no VFs; none changed\n");
  return rc;
}

// Serves until SIGTERM/SIGINT; its exit code.
// Signals go to the event loop's signalfd: block them before gRPC starts its threads.
void BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// The running manager, for the LLDP watch's callback (null until it exists, and after).
std::atomic<kuberdma::deviceplugin::Manager*> g_running{nullptr};

// New cabling is a rescan (the DRA driver republishes each device's leaf) and, with
// --node-labels, the node's topology labels (on the watch's thread: it may wait on the API).
// Why --node-labels cannot work here, or "".
kuberdma::Result<void> WireCabling(Cli& c) {
  std::optional<kuberdma::dra::ApiServer> api;
  if (c.node_labels) {
    auto in_cluster = ApiServerOf(c);
    if (!in_cluster || c.node_name.empty() || !c.opts.lldp) {
      return kuberdma::Fail(kuberdma::ErrorCode::kInvalidArgument,
                            "--node-labels needs --lldp, --node-name and the API server" +
                                (in_cluster ? std::string() : ": " + in_cluster.error().message()));
    }
    api = *in_cluster;
  }
  c.opts.on_cabling = [node = c.node_name,
                       api](const std::vector<kuberdma::contract::CablingRecord>& recs) {
    if (auto* m = g_running.load()) m->RequestRescan();
    if (api) LabelNode(*api, node, recs);
  };
  return {};
}

int Serve(Cli& c, kuberdma::deviceplugin::Config cfg) {
  c.opts.config_path = c.config;
  c.opts.sysfs = kuberdma::sysfs::SysfsRoot(c.sysfs_root);
  BlockSignals();
  std::unique_ptr<kuberdma::dra::Driver> dra;
  if (c.dra) {
    if (auto chosen = DraResource(c, cfg); !chosen) {
      spdlog::error("event=start_failed error={}", kuberdma::LogQuoted(chosen.error().message()));
      return 2;
    }
    dra = StartDra(c);
    if (!dra) return 1;
  }
  if (auto wired = WireCabling(c); !wired) {
    spdlog::error("event=start_failed error={}", kuberdma::LogQuoted(wired.error().message()));
    return 2;
  }
  auto mgr = kuberdma::deviceplugin::Manager::Create(c.opts, std::move(cfg));
  if (mgr) g_running = mgr->get();
  if (!mgr) {
    spdlog::error("event=start_failed error={}", kuberdma::LogQuoted(mgr.error().message()));
    return 1;
  }
  spdlog::info("event=start config={} plugin_dir={} sysfs_root={} metrics={}:{}", c.config,
               c.opts.plugin_dir, c.sysfs_root, c.opts.metrics_address, (*mgr)->metrics_port());
  auto r = (*mgr)->Run(true);
  if (!r) {
    spdlog::error("event=stopped error={}", kuberdma::LogQuoted(r.error().message()));
    return 1;
  }
  g_running = nullptr;
  spdlog::info("event=exit sockets_removed=true");
  return 0;
}

int Run(int argc, char** argv) {
  // gRPC's threads would each grow a malloc arena; two are plenty for this load and keep RSS small.
  mallopt(M_ARENA_MAX, 2);
  CLI::App app{"rdma-device-plugin: kubelet device plugin for RDMA HCAs (kube-rdma)"};
  app.set_version_flag("--version", kuberdma::kVersionLine);
  Cli c;
  AddOptions(app, c);
  AddDraOptions(app, c);
  AddCablingOptions(app, c);
  CLI11_PARSE(app, argc, argv);
  SetUpLogging(c.level);
  if (c.dra_remove_slices) return RemoveSlices(c);
  auto text = kuberdma::ReadFile(c.config);
  if (!text) {
    std::fprintf(stderr, "rdma-device-plugin: read config: %s\n", text.error().message().c_str());
    return 2;
  }
  auto cfg = kuberdma::deviceplugin::ParseConfig(*text);
  if (!cfg) {
    std::fprintf(stderr, "rdma-device-plugin: %s\n", cfg.error().message().c_str());
    return 2;
  }
  auto node = NodeConfigFor(c);
  if (!node) {
    std::fprintf(stderr, "rdma-device-plugin: %s\n", node.error().message().c_str());
    return 2;
  }
  if (!c.write_node_config.empty()) return WriteNodeConfig(c, *node);
  if (c.configure_vfs) return ConfigureVfs(c, *node);
  if (c.check_only) {
    PrintResources(*cfg, c, *node);
    return 0;
  }
  if (c.dra_slices) return PrintDraSlices(*cfg, c, *node);
  c.opts.node = std::move(*node);
  return Serve(c, std::move(*cfg));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdma-device-plugin: internal error: %s\n", e.what());
    return 1;
  }
}
