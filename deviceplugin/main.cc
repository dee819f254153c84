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
#include <csignal>
#include <cstdio>

#include "kuberdma/base/files.h"
#include "kuberdma/base/version.h"
#include "kuberdma/deviceplugin/manager.h"

namespace {

struct Cli {
  std::string config = "/etc/kube-rdma/device-plugin.json";
  std::string sysfs_root = kuberdma::sysfs::SysfsRoot::FromEnv().root();
  std::string level = "info";
  bool check_only = false;
  kuberdma::deviceplugin::Options opts;
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
  app.add_option("--log-level", c.level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

void SetUpLogging(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("rdma-device-plugin",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e level=%l %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

// --check-config: the resources the config defines.
void PrintResources(const kuberdma::deviceplugin::Config& cfg) {
  for (const auto& r : cfg.resources) {
    bool per_hca = r.policy == kuberdma::deviceplugin::Policy::kPerHca;
    std::printf("%s: policy %s, %u slots%s\n", r.FullName().c_str(), per_hca ? "per-hca" : "pool",
                r.rdma_hca_max, per_hca ? " per HCA" : "");
  }
}

// Serves until SIGTERM/SIGINT; its exit code.
int Serve(Cli& c, kuberdma::deviceplugin::Config cfg) {
  c.opts.config_path = c.config;
  c.opts.sysfs = kuberdma::sysfs::SysfsRoot(c.sysfs_root);
  // Signals go to the event loop's signalfd: block them before gRPC starts its threads.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto mgr = kuberdma::deviceplugin::Manager::Create(c.opts, std::move(cfg));
  if (!mgr) {
    spdlog::error("event=start_failed error=\"{}\"", mgr.error().message());
    return 1;
  }
  spdlog::info("event=start config={} plugin_dir={} sysfs_root={} metrics={}:{}", c.config,
               c.opts.plugin_dir, c.sysfs_root, c.opts.metrics_address, (*mgr)->metrics_port());
  auto r = (*mgr)->Run(true);
  if (!r) {
    spdlog::error("event=stopped error=\"{}\"", r.error().message());
    return 1;
  }
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
  CLI11_PARSE(app, argc, argv);
  SetUpLogging(c.level);
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
  if (c.check_only) {
    PrintResources(*cfg);
    return 0;
  }
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
