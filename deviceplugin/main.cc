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
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "kuberdma/base/files.h"
#include "kuberdma/deviceplugin/manager.h"

namespace {

int Run(int argc, char** argv) {
  // gRPC's threads would each grow a malloc arena; two are plenty for this load and keep RSS small.
  mallopt(M_ARENA_MAX, 2);
  CLI::App app{"rdma-device-plugin: kubelet device plugin for RDMA HCAs (kube-rdma)"};
  std::string config = "/etc/kube-rdma/device-plugin.json";
  kuberdma::deviceplugin::Options opts;
  std::string sysfs_root = kuberdma::sysfs::SysfsRoot::FromEnv().root();
  std::string level = "info";
  app.add_option("--config", config, "device plugin config (the shared plugin's JSON format)");
  app.add_option("--device-plugin-dir", opts.plugin_dir, "kubelet's device plugin directory");
  app.add_option("--sysfs-root", sysfs_root, "root holding sys/ and dev/ (fixtures, tests)");
  app.add_option("--metrics-port", opts.metrics_port, "port for /metrics and /healthz (-1: off)");
  bool check_only = false;
  app.add_flag("--check-config", check_only,
               "validate --config, print the resources it defines, and exit (0 valid, 2 not)");
  app.add_option("--log-level", level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  CLI11_PARSE(app, argc, argv);

  auto logger = std::make_shared<spdlog::logger>("rdma-device-plugin",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e level=%l %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);

  auto text = kuberdma::ReadFile(config);
  if (!text) {
    std::fprintf(stderr, "rdma-device-plugin: read config: %s\n", text.error().message().c_str());
    return 2;
  }
  auto cfg = kuberdma::deviceplugin::ParseConfig(*text);
  if (!cfg) {
    std::fprintf(stderr, "rdma-device-plugin: %s\n", cfg.error().message().c_str());
    return 2;
  }
  if (check_only) {
    for (const auto& r : cfg->resources) {
      std::printf("%s: policy %s, %u slots%s\n", r.FullName().c_str(),
                  r.policy == kuberdma::deviceplugin::Policy::kPerHca ? "per-hca" : "pool",
                  r.rdma_hca_max,
                  r.policy == kuberdma::deviceplugin::Policy::kPerHca ? " per HCA" : "");
    }
    return 0;
  }
  opts.config_path = config;
  opts.sysfs = kuberdma::sysfs::SysfsRoot(sysfs_root);
  // Signals go to the event loop's signalfd: block them before gRPC starts its threads.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto mgr = kuberdma::deviceplugin::Manager::Create(opts, std::move(*cfg));
  if (!mgr) {
    spdlog::error("event=start_failed error=\"{}\"", mgr.error().message());
    return 1;
  }
  spdlog::info("event=start config={} plugin_dir={} sysfs_root={} metrics_port={}", config,
               opts.plugin_dir, sysfs_root, (*mgr)->metrics_port());
  auto r = (*mgr)->Run(true);
  if (!r) {
    spdlog::error("event=stopped error=\"{}\"", r.error().message());
    return 1;
  }
  spdlog::info("event=exit sockets_removed=true");
  return 0;
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
