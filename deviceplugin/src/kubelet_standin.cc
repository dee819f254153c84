// SPDX-License-Identifier: Apache-2.0
// The kubelet's side of the device plugin protocol, for tests, benchmarks and the demo.
#include "kuberdma/deviceplugin/kubelet_standin.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>

namespace kuberdma::deviceplugin {

KubeletStandIn::KubeletStandIn(std::string dir) : dir_(std::move(dir)) {
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
  b.RegisterService(this);
  server_ = b.BuildAndStart();
}

KubeletStandIn::~KubeletStandIn() { Stop(); }

grpc::Status KubeletStandIn::Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req, v1beta1::Empty*) {
  std::lock_guard lock(mu_);
  if (req->version() != "v1beta1") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + req->version());
  }
  registrations_.push_back(*req);
  endpoints_[req->resource_name()] = req->endpoint();
  auto ctx = std::make_shared<grpc::ClientContext>();
  contexts_.push_back(ctx);
  watchers_.emplace_back([this, r = *req, ctx] { Watch(r, ctx); });
  cv_.notify_all();
  return grpc::Status::OK;
}

void KubeletStandIn::Watch(v1beta1::RegisterRequest r, std::shared_ptr<grpc::ClientContext> ctx) {
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + dir_ + "/" + r.endpoint(), grpc::InsecureChannelCredentials()));
  auto reader = stub->ListAndWatch(ctx.get(), v1beta1::Empty());
  v1beta1::ListAndWatchResponse resp;
  while (reader->Read(&resp)) {
    std::lock_guard lock(mu_);
    lists_[r.resource_name()].push_back(resp);
    cv_.notify_all();
  }
  (void)reader->Finish();
}

void KubeletStandIn::CloseStreams() {
  std::lock_guard lock(mu_);
  for (auto& c : contexts_) c->TryCancel();
}

void KubeletStandIn::Stop() {
  if (!server_) return;
  CloseStreams();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
  for (auto& t : watchers_) t.join();
  watchers_.clear();
  ::unlink((dir_ + "/kubelet.sock").c_str());
}

size_t KubeletStandIn::Registrations(const std::string& resource) const {
  return static_cast<size_t>(std::count_if(registrations_.begin(), registrations_.end(),
                                            [&](const auto& r) { return r.resource_name() == resource; }));
}

Result<v1beta1::AllocateResponse> KubeletStandIn::Allocate(const std::string& resource,
                                                           const std::vector<std::string>& ids) {
  std::string endpoint;
  {
    std::lock_guard lock(mu_);
    auto it = endpoints_.find(resource);
    if (it == endpoints_.end()) return Fail(ErrorCode::kNotFound, resource + " has not registered");
    endpoint = it->second;
  }
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : ids) c->add_devices_ids(id);
  v1beta1::AllocateResponse resp;
  auto st = stub->Allocate(&ctx, req, &resp);
  if (!st.ok()) return Fail(ErrorCode::kInvalidArgument, "Allocate " + resource + ": " + st.error_message());
  return resp;
}

}  // namespace kuberdma::deviceplugin
