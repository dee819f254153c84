// SPDX-License-Identifier: Apache-2.0
// KubeletStandIn: the kubelet's side of the device plugin protocol, for tests, benchmarks and the
// demo. Serves Registration on <dir>/kubelet.sock; for every registration it connects back to the
// plugin's endpoint and follows ListAndWatch, keeping every list it receives; Allocate is a client
// call away.
//
//   KubeletStandIn k("/var/lib/kubelet/device-plugins");
//   k.WaitFor([&] { return k.Lists("rdma/shared").size() > 0; });
//   auto resp = k.Allocate("rdma/shared", {"shared-000"});
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api.grpc.pb.h"
#include "kuberdma/base/error.h"
#include "kuberdma/deviceplugin/resource.h"
#include "podresources.grpc.pb.h"

namespace kuberdma::standins {

// How a kubelet's pod-resources List fills in a claim's ClaimResources' CDI devices.
enum class CdiListing {
  // As the kubelet's code does (kubernetes/kubernetes pkg/kubelet/cm/container_manager_linux.go,
  // GetDynamicResources, read at 001332b): `cdiDevices` is declared per driver, outside the loop
  // over that driver's devices, and each ClaimResource takes it as it stands, so device k lists
  // the CDI IDs of devices 1..k (docs/dra.md#released-multus-and-the-kubelets-list).
  kAccumulated,
  // A kubelet whose loop declares it per device: each device lists its own CDI IDs.
  kPerDevice,
};

// Each device's CDI IDs as `listing` lists them, from each device's own (`own`, in the order the
// driver's NodePrepareResources answer gave the devices).
std::vector<std::vector<std::string>> ListedCdi(const std::vector<std::vector<std::string>>& own,
                                                CdiListing listing);

class KubeletStandIn final : public v1beta1::Registration::Service {
 public:
  // Starts serving on <dir>/kubelet.sock; check ok() before use.
  explicit KubeletStandIn(std::string dir);
  ~KubeletStandIn() override;
  bool ok() const { return server_ != nullptr; }

  grpc::Status Register(grpc::ServerContext* context, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty* response) override;

  // Closes every ListAndWatch stream (a kubelet dropping its plugins).
  void CloseStreams();
  // Stops serving and removes kubelet.sock (a kubelet going away). Idempotent.
  void Stop();

  // Waits until `pred` (evaluated under the stand-in's lock) holds or `timeout` passes.
  template <typename Pred>
  bool WaitFor(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(); });
  }
  // Accessors: call inside WaitFor's predicate or after it returned.
  size_t Registrations(const std::string& resource) const;
  const std::vector<v1beta1::RegisterRequest>& registrations() const { return registrations_; }
  std::vector<v1beta1::ListAndWatchResponse>& Lists(const std::string& resource) {
    return lists_[resource];
  }

  // GetPreferredAllocation through the endpoint `resource` registered with.
  Result<std::vector<std::string>> Preferred(const std::string& resource,
                                             const std::vector<std::string>& available, int size);
  // Allocate through the endpoint `resource` registered with; the answer in plain types.
  Result<deviceplugin::ContainerAllocation> Allocate(const std::string& resource,
                                                     const std::vector<std::string>& ids);

  // The pod-resources API (v1 List), served on pod_resources_socket(): what AssignPod recorded,
  // as the kubelet lists a pod's devices once it was admitted.
  std::string pod_resources_socket() const { return dir_ + "/pod-resources.sock"; }
  void AssignPod(const std::string& ns, const std::string& name, const std::string& resource,
                 const std::vector<std::string>& ids);
  // A prepared DRA claim of the pod, as the kubelet lists it (dynamic_resources): the claim's
  // name and, per device, the CDI device IDs the driver returned for it, listed as `listing`
  // says (the kubelet's own code by default).
  struct ClaimDevice {
    std::string driver, pool, device;
    std::vector<std::string> cdi_ids;
  };
  void AssignClaim(const std::string& ns, const std::string& name, const std::string& claim,
                   const std::vector<ClaimDevice>& devices);
  void set_cdi_listing(CdiListing listing);

 private:
  void Watch(const v1beta1::RegisterRequest& r, const std::shared_ptr<grpc::ClientContext>& ctx);
  Result<std::unique_ptr<v1beta1::DevicePlugin::Stub>> StubFor(const std::string& resource);
  std::string dir_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<grpc::Server> server_;
  class PodResources;
  std::unique_ptr<PodResources> pod_resources_;
  std::unique_ptr<grpc::Server> pod_resources_server_;
  std::vector<v1beta1::RegisterRequest> registrations_;
  std::map<std::string, std::vector<v1beta1::ListAndWatchResponse>> lists_;
  std::map<std::string, std::string> endpoints_;
  std::vector<std::shared_ptr<grpc::ClientContext>> contexts_;
  std::vector<std::thread> watchers_;
};

}  // namespace kuberdma::standins
