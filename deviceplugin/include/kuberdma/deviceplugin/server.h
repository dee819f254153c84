// SPDX-License-Identifier: Apache-2.0
// ResourceServer: one resource's DevicePlugin gRPC service (callback API) on its own unix socket.
// ListAndWatch streams get the full device list at once and again on every change (Publish).
// Handlers never throw; every error is a gRPC status naming the resource and the cause.
//
//   auto shared = std::make_shared<SharedResource>(Resource(cfg, root));
//   auto srv = ResourceServer::Start(shared, dir + "/kuberdma-shared.sock", metrics, on_closed);
//   ... shared->Refresh(...); (*srv)->Publish();
//   srv->reset();   // finishes streams, stops serving, removes the socket
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "kuberdma/base/error.h"
#include "kuberdma/deviceplugin/metrics.h"
#include "kuberdma/deviceplugin/resource.h"

namespace grpc {
class Server;
}

namespace kuberdma::deviceplugin {

// A Resource shared between the event loop (Refresh) and gRPC handlers (Allocate).
struct SharedResource {
  explicit SharedResource(Resource r, std::string allocations = "")
      : resource(std::move(r)), allocations_dir(std::move(allocations)) {}
  mutable std::mutex mu;
  Resource resource;
  // Where per-HCA allocations are recorded for the CNI (contract/allocation.h); "" for none.
  std::string allocations_dir;
};

class Watchers;  // the set of open ListAndWatch streams
class Service;

class ResourceServer {
 public:
  static Result<std::unique_ptr<ResourceServer>> Start(std::shared_ptr<SharedResource> res,
                                                       std::string socket_path, Metrics& metrics,
                                                       std::function<void()> on_stream_closed);
  ~ResourceServer();
  ResourceServer(const ResourceServer&) = delete;
  ResourceServer& operator=(const ResourceServer&) = delete;

  // Sends the current device list to every open ListAndWatch stream.
  void Publish();
  size_t streams() const;
  const std::string& socket_path() const { return socket_path_; }
  const std::shared_ptr<SharedResource>& shared() const { return res_; }

 private:
  ResourceServer(std::shared_ptr<SharedResource> res, std::string socket_path);
  std::shared_ptr<SharedResource> res_;
  std::string socket_path_;
  std::shared_ptr<Watchers> watchers_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace kuberdma::deviceplugin
