// SPDX-License-Identifier: Apache-2.0
// The DRA driver's kubelet side: the DRAPlugin service (v1 for 1.34+ kubelets and v1beta1 for
// 1.32-1.33 ones: NodePrepareResources and NodeUnprepareResources, over Preparer) and the
// DRAResourceHealth service (v1alpha1: NodeWatchResources, each device's health for the pod's
// allocatedResourcesStatus) on its socket, and the plugin-registration service the kubelet's
// plugin watcher calls on the registration socket (GetInfo: type DRAPlugin, the driver name,
// the DRAPlugin socket, "v1.DRAPlugin" and "v1beta1.DRAPlugin"; NotifyRegistrationStatus). Claims
// are read through a ClaimSource (the API server; a map in tests). Every claim of a request gets an
// entry in the answer: its devices, or the error that refused it.
//
//   DraServer::Options o{.driver = kDriverName, .dra_socket =
//   ".../plugins/rdma.kube-rdma.io/dra.sock",
//                        .registration_socket = ".../plugins_registry/rdma.kube-rdma.io-reg.sock"};
//   auto srv = DraServer::Start(shared, publish, cdi_dir, claims, o);
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kuberdma/base/error.h"
#include "kuberdma/deviceplugin/server.h"
#include "kuberdma/dra/prepare.h"
#include "kuberdma/dra/slices.h"

namespace grpc {
class Server;
}

namespace kuberdma::dra {

// Where claims come from.
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // The ResourceClaim `ref` names, as the API server returns it; kNotFound when it is gone.
  virtual Result<nlohmann::json> Get(const ClaimRef& ref) = 0;
};

class DraServer {
 public:
  struct Options {
    std::string driver = kDriverName;
    std::string dra_socket;
    std::string registration_socket;
    // Called (from a gRPC thread) when the kubelet says the plugin is registered: the kubelet
    // wipes the node's slices when it starts, so the driver publishes again at once.
    std::function<void()> on_registered;
  };
  static Result<std::unique_ptr<DraServer>> Start(std::shared_ptr<deviceplugin::SharedResource> res,
                                                  PublishOptions publish, std::string cdi_dir,
                                                  ClaimSource& claims, Options o);
  ~DraServer();  // stops serving, removes both sockets
  DraServer(const DraServer&) = delete;
  DraServer& operator=(const DraServer&) = delete;

  // What the kubelet last said of the registration.
  bool registered() const { return registered_; }

  // The node's devices and their health now: streamed to every NodeWatchResources watcher when
  // it differs from what they were last sent (and to a new watcher at once).
  void SetHealth(const std::vector<DeviceState>& devices);
  // How many NodeWatchResources streams are open.
  int health_watchers() const;

  class Services;  // the gRPC services (server.cc)

 private:
  DraServer() = default;
  Options o_;
  std::atomic<bool> registered_ = false;
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> dra_;
  std::unique_ptr<grpc::Server> registration_;
};

}  // namespace kuberdma::dra
