// SPDX-License-Identifier: Apache-2.0
// Manager: the device plugin's event loop. Serves one ResourceServer per configured resource,
// registers each with the kubelet and keeps it registered (kubelet.sock re-created, our socket
// removed, a ListAndWatch stream closed), re-reads HCAs on kernel events and on a short port-state
// timer, reloads the config on SIGHUP or when its file changes (a bad config is rejected and the
// last good one keeps serving), and on SIGTERM stops serving and removes its sockets.
//
//   auto m = Manager::Create(options, *ParseConfig(text));
//   (*m)->Run(/*handle_signals=*/true);   // returns after SIGTERM/SIGINT or Stop()
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/deviceplugin/cabling_watch.h"
#include "kuberdma/deviceplugin/config.h"
#include "kuberdma/deviceplugin/metrics.h"
#include "kuberdma/deviceplugin/pod_usage.h"
#include "kuberdma/deviceplugin/pods_endpoint.h"
#include "kuberdma/deviceplugin/port_counters.h"
#include "kuberdma/deviceplugin/server.h"
#include "kuberdma/events/kernel_events.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::deviceplugin {

inline constexpr const char* kDefaultPluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr const char* kKubeletSocket = "kubelet.sock";

struct Options {
  std::string config_path;  // watched for changes; empty: no reloads from a file
  std::string plugin_dir = kDefaultPluginDir;
  sysfs::SysfsRoot sysfs;
  int metrics_port = 9109;  // negative: no HTTP endpoint; 0: any free port
  // Where /metrics and /healthz listen: every address by default (Prometheus and the kubelet's
  // probe reach a hostNetwork pod on the node's address); the DaemonSet can bind the node IP.
  std::string metrics_address = "0.0.0.0";
  bool kernel_events = true;
  // The node config, resolved for this node (rails/node_config.h): HCAs that are the node's own
  // NICs are never offered, and `rails` selectors number HCAs by it.
  rails::NodeConfig node;
  // Where per-HCA allocations are recorded for the CNI (contract/allocation.h); "" for nowhere.
  std::string allocations_dir = contract::AllocationsDir();
  // The kubelet's pod-resources socket, asked when the CNI checks a pod's allocation (the pods
  // endpoint, <allocations_dir>/pods.sock).
  std::string pod_resources = kPodResourcesSocket;
  // Resources the DRA driver publishes (full names): scanned and served as the others, never
  // registered with the kubelet, so that one HCA is never offered both as a device plugin slot
  // and as a DRA device.
  std::set<std::string> dra_resources;
  // Called on the loop after every scan with each resource (by full name) and the node's roles:
  // the DRA driver publishes from the same model (dra/driver.h). Must not block.
  std::function<void(const std::map<std::string, std::shared_ptr<SharedResource>>&,
                     const rails::NodeRoles*)>
      on_rescan;
  // Listen for each rail's LLDP neighbour for as long as the plugin runs, rounds of `lldp_round`
  // (cabling_watch.h); needs CAP_NET_RAW and an allocations directory.
  bool lldp = false;
  std::chrono::milliseconds lldp_round = std::chrono::seconds(35);
  // Told each time the rails' neighbours change (the topology labels' writer).
  CablingWatch::OnChange on_cabling;
};

class Manager {
 public:
  static Result<std::unique_ptr<Manager>> Create(Options opts, Config cfg);
  ~Manager();

  // Runs until Stop(), or SIGTERM/SIGINT when `handle_signals` (the caller must have blocked
  // SIGTERM, SIGINT and SIGHUP in every thread before creating any). Removes its sockets on return.
  Result<void> Run(bool handle_signals);

  // Thread-safe requests to the loop.
  void Stop();
  void RequestRescan();
  void RequestReload();

  Metrics& metrics() { return metrics_; }
  uint16_t metrics_port() const;
  // Socket path of a resource ("rdma/shared"), for tests and the doctor.
  std::string SocketPath(const std::string& full_name) const;

 private:
  Manager(Options opts, Config cfg);
  // The node's HCAs (kPorts) with their roles judged against the host namespace (roles_), the
  // changes logged and exported.
  Result<std::vector<sysfs::Hca>> Discover();
  const rails::NodeRoles* roles() const { return roles_ ? &*roles_ : nullptr; }
  Result<void> StartResources();
  void StopResources();
  void Rescan();
  // Each resource's present HCAs, for the pods endpoint's thread.
  void SnapshotHcas();
  // Hands every resource to Options::on_rescan (the DRA driver) after a scan.
  void NotifyRescan();
  // Refreshes one resource's view of `hcas` and its gauges; true when its device list changed.
  bool Refresh(const std::string& name, ResourceServer& srv, const std::vector<sysfs::Hca>& hcas);
  void Reload();
  void RegisterAll(const char* why);
  void RegisterOne(const std::string& full_name, ResourceServer& srv);
  void HandleInotify();
  // Sleeps until a request, a signal, a kernel event, a file event or the next timer.
  void WaitForWork(const UniqueFd& sigfd, const std::optional<events::KernelEvents>& kernel,
                   int64_t next_poll);
  // Re-registers after a lost stream, retries failed registrations, when their time has come.
  void RunTimers(int64_t now);
  void Wake(uint64_t bits);

  // The pods endpoint's answer for one pod's allocations: our resources' HCAs, and those of the
  // DRA claims prepared for it.
  contract::PodAnswer PodHcas(const contract::PodQuery& pod,
                              const std::vector<PodDevices>& devices) const;
  // The HCAs (and slot IDs) of our resources among one pod's `devices`, into `answer`.
  void AddResourceHcas(const std::vector<PodDevices>& devices, contract::PodAnswer& answer) const;
  // Every pod holding one of our HCAs: the kubelet's allocations (PodHcas per pod) and the DRA
  // claims' pods; kIo when the kubelet does not answer (PodHcaInfo keeps its last answer).
  Result<PodHcaMap> PodsHoldingHcas();
  // The rails whose netdev is on the host as of the last scan (rail order), for the LLDP watch.
  std::vector<rails::RailNeighbor> RailNetdevs() const;

  Options opts_;
  Config cfg_;
  // Each resource's present HCAs as of the last scan, for the pods endpoint's thread.
  mutable std::mutex snapshot_mu_;
  std::map<std::string, std::vector<std::string>> resource_hcas_;
  std::vector<rails::RailNeighbor> rail_netdevs_;
  std::unique_ptr<PodsEndpoint> pods_;
  link::NetlinkLinkOps links_;
  link::NetlinkAddrOps addrs_;
  std::optional<rails::NodeRoles> roles_;
  std::string cfg_fingerprint_;
  Metrics metrics_;
  std::map<std::string, std::unique_ptr<ResourceServer>> servers_;  // by full resource name
  std::map<std::string, bool> registered_;
  std::unique_ptr<HttpEndpoint> http_;
  std::shared_ptr<PortCounters> port_counters_;        // read on scrape
  std::shared_ptr<PodHcaInfo> pod_hca_info_;           // read on scrape, cached
  std::unique_ptr<PodResourcesClient> usage_kubelet_;  // its own channel: the scrape's thread
  lldp::PacketLldpListener lldp_listener_;
  smp::UmadHopProbe hop_probe_;
  std::unique_ptr<CablingWatch> cabling_;  // after what it reads: stopped first
  UniqueFd wake_;                          // eventfd
  UniqueFd inotify_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<bool> running_{false};
  int64_t recheck_at_ms_ = -1;  // re-register streamless resources at this time
  int64_t retry_at_ms_ = -1;    // retry failed registrations at this time
};

}  // namespace kuberdma::deviceplugin
