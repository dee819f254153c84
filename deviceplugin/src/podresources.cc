// SPDX-License-Identifier: Apache-2.0
// The pod-resources API client.
#include "kuberdma/deviceplugin/podresources.h"

#include <grpcpp/grpcpp.h>

#include "podresources.grpc.pb.h"

namespace kuberdma::deviceplugin {

struct PodResourcesClient::Impl {
  std::string socket;
  std::unique_ptr<::v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::PodResourcesClient(std::string socket) : impl_(std::make_unique<Impl>()) {
  impl_->socket = std::move(socket);
  impl_->stub = ::v1::PodResourcesLister::NewStub(
      grpc::CreateChannel("unix:" + impl_->socket, grpc::InsecureChannelCredentials()));
}

PodResourcesClient::~PodResourcesClient() = default;

Result<std::vector<PodDevices>> PodResourcesClient::List(std::chrono::milliseconds timeout) {
  auto& stub = impl_->stub;
  const std::string& socket = impl_->socket;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  ::v1::ListPodResourcesResponse resp;
  grpc::Status st = stub->List(&ctx, ::v1::ListPodResourcesRequest(), &resp);
  if (!st.ok()) {
    return Fail(ErrorCode::kIo, "pod-resources API at " + socket + ": " + st.error_message());
  }
  std::vector<PodDevices> out;
  for (const auto& pod : resp.pod_resources()) {
    for (const auto& c : pod.containers()) {
      for (const auto& d : c.devices()) {
        out.push_back({pod.namespace_() + "/" + pod.name(), c.name(), d.resource_name(),
                       std::vector<std::string>(d.device_ids().begin(), d.device_ids().end())});
      }
    }
  }
  return out;
}

Result<std::vector<PodDevices>> ListPodResources(const std::string& socket,
                                                 std::chrono::milliseconds timeout) {
  return PodResourcesClient(socket).List(timeout);
}

}  // namespace kuberdma::deviceplugin
