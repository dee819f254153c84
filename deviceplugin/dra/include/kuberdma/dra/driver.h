// SPDX-License-Identifier: Apache-2.0
// The DRA driver as rdma-device-plugin runs it beside the device plugin (`--dra`): the node's
// ResourceSlices kept on the API server, and the kubelet plugin (DraServer) serving them, both on
// the device plugin's own Resource (its SharedResource, refreshed by the device plugin's loop).
//
//   Driver d({.publish = {.node = "gpu-node-7"}}, *ApiServer::InCluster(getenv));
//   options.on_rescan = [&](const auto& resources, const auto* roles) {
//     d.OnRescan(resources, roles);
//   };                                     // the Manager calls it after every scan
//
// Slices are written from the driver's own thread (the device plugin's loop never waits on the
// API server): at once when what the node offers changes (a hot-plugged HCA, a port down, an HCA
// unhealthy), and every `resync` anyway (a slice deleted by someone else comes back).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/deviceplugin/server.h"
#include "kuberdma/dra/apiserver.h"
#include "kuberdma/dra/server.h"
#include "kuberdma/dra/slices.h"
#include "kuberdma/rails/rails.h"

namespace kuberdma::dra {

inline constexpr const char* kSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";

struct SyncCounts {
  int created = 0;
  int updated = 0;
  int deleted = 0;
  int unchanged = 0;
  // A slice written with device taints came back without them: the API server has
  // DRADeviceTaints off and drops the field.
  bool taints_dropped = false;
  std::string Text() const;  // "created 1, updated 0, deleted 0, unchanged 0"
};

// Brings the API server's ResourceSlices of `driver` on `node` to `desired` (ResourceSlices()'s
// objects): listed by field selector, missing ones created, changed ones replaced (PUT with the
// listed resourceVersion), others of this driver and node deleted. A pool whose devices changed
// gets the generation after the highest the API server held, so the scheduler never mixes old
// and new slices of it; an unchanged pool is left alone. `node` "" means every node (an
// uninstall's clean-up). Errors name the request that failed (a 409: someone wrote in between,
// the next resync reads again).
Result<SyncCounts> SyncSlices(const ApiServer& api, const std::string& driver,
                              const std::string& node, std::vector<nlohmann::json> desired);

// Makes the Node `node` (uid `node_uid`) the owner of each slice, so the garbage collector
// removes them with the node; nothing when the uid is unknown ("").
void OwnBy(std::vector<nlohmann::json>& slices, const std::string& node,
           const std::string& node_uid);

class Driver {
 public:
  struct Options {
    std::string resource;  // the per-HCA resource it publishes ("rdma/hca"); "": the first
    PublishOptions publish;
    std::string cdi_dir = "/var/run/cdi";
    std::string plugins_dir = "/var/lib/kubelet/plugins";            // <dir>/<driver>/dra.sock
    std::string registry_dir = "/var/lib/kubelet/plugins_registry";  // <dir>/<driver>-reg.sock
    std::chrono::milliseconds resync{60000};
    // Watch this node's slices and write them back at once when one is deleted (the kubelet
    // wipes a node's slices when it starts); off in tests of the resync alone.
    bool watch = true;
    std::chrono::milliseconds watch_retry{2000};
  };
  Driver(Options o, ApiServer api);
  ~Driver();  // stops the writer and the kubelet plugin (its sockets removed); slices stay
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // After every scan of the device plugin's loop: (re)starts the kubelet plugin on the resource's
  // SharedResource (a config reload replaces it) and queues the slices when they changed.
  void OnRescan(const std::map<std::string, std::shared_ptr<deviceplugin::SharedResource>>& res,
                const rails::NodeRoles* roles);

  struct Status {
    int syncs = 0;           // successful writes
    std::string last_error;  // "" after a successful one
    std::vector<std::string> devices;
    bool serving = false;
  };
  Status status() const;
  // Waits until `pred(status())` or `timeout`.
  bool WaitFor(const std::function<bool(const Status&)>& pred, std::chrono::milliseconds timeout);

 private:
  void Loop();
  void WatchLoop();
  // The tainted devices into `dir` (the allocations directory) for rdma-doctor, when changed.
  void RecordTaintsFor(const std::string& dir, const std::vector<DeviceState>& devices);
  // The publish options with the fleet acceptance's verdicts in `dir` (none when unreadable).
  PublishOptions WithVerdicts(const std::string& dir);
  // Publish again now (`why` logged).
  void Kick(const char* why);
  // The Node's uid for the slices' ownerReferences (read once; "" while it cannot be read).
  std::string NodeUid();
  // SyncSlices with this driver's settings, the Node as owner; an exception from a malformed
  // answer is an error.
  Result<SyncCounts> SyncOnce(std::vector<nlohmann::json> want);
  // The resource it publishes among `res`; nullptr when there is no per-HCA one.
  std::shared_ptr<deviceplugin::SharedResource> Pick(
      const std::map<std::string, std::shared_ptr<deviceplugin::SharedResource>>& res) const;
  void StartServer(std::shared_ptr<deviceplugin::SharedResource> shared);

  Options o_;
  ApiServer api_;
  ApiServerClaims claims_;
  std::shared_ptr<deviceplugin::SharedResource> serving_;
  std::unique_ptr<DraServer> server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<nlohmann::json> desired_;
  std::string desired_text_;  // desired_ as written last, to see a change
  bool dirty_ = false;
  bool stop_ = false;
  Status status_;
  std::string node_uid_;                                // the writer thread's
  std::vector<contract::TaintRecord> recorded_taints_;  // the scan thread's
  bool taints_written_ = false;
  bool verdicts_warned_ = false;
  std::atomic<bool> omit_tainted_{false};  // the API server drops taints: leave them out
  bool node_warned_ = false;
  std::thread thread_;
  std::thread watcher_;
};

}  // namespace kuberdma::dra
