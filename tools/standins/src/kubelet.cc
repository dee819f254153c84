// SPDX-License-Identifier: Apache-2.0
// The kubelet's side of the device plugin protocol, for tests, benchmarks and the demo.
#include "kuberdma/standins/kubelet.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>

namespace kuberdma::standins {

std::vector<std::vector<std::string>> ListedCdi(const std::vector<std::vector<std::string>>& own,
                                                CdiListing listing) {
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> so_far;  // the kubelet's `cdiDevices`, declared outside the loop
  for (const auto& ids : own) {
    so_far.insert(so_far.end(), ids.begin(), ids.end());
    out.push_back(listing == CdiListing::kAccumulated ? so_far : ids);
  }
  return out;
}

// v1 PodResourcesLister::List over what AssignPod recorded.
class KubeletStandIn::PodResources final : public ::v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext* /*context*/, const ::v1::ListPodResourcesRequest* /*req*/,
                    ::v1::ListPodResourcesResponse* resp) override {
    std::lock_guard lock(mu_);
    for (const auto& [pod, devices] : pods_) {
      auto* p = resp->add_pod_resources();
      p->set_namespace_(pod.first);
      p->set_name(pod.second);
      auto* c = p->add_containers();
      c->set_name("main");
      for (const auto& [resource, ids] : devices) {
        auto* d = c->add_devices();
        d->set_resource_name(resource);
        for (const auto& id : ids) d->add_device_ids(id);
      }
      for (const auto& [claim, devs] : claims_[pod]) {
        auto* dr = c->add_dynamic_resources();
        dr->set_claim_name(claim);
        dr->set_claim_namespace(pod.first);
        std::vector<std::vector<std::string>> own;
        for (const auto& d : devs) own.push_back(d.cdi_ids);
        const auto listed = ListedCdi(own, listing_);
        for (size_t i = 0; i < devs.size(); ++i) {
          auto* cr = dr->add_claim_resources();
          cr->set_driver_name(devs[i].driver);
          cr->set_pool_name(devs[i].pool);
          cr->set_device_name(devs[i].device);
          for (const auto& id : listed[i]) cr->add_cdi_devices()->set_name(id);
        }
      }
    }
    return grpc::Status::OK;
  }
  void AssignClaim(const std::string& ns, const std::string& name, const std::string& claim,
                   const std::vector<ClaimDevice>& devices) {
    std::lock_guard lock(mu_);
    pods_[{ns, name}];  // listed even with no device plugin resource
    claims_[{ns, name}][claim] = devices;
  }
  void Assign(const std::string& ns, const std::string& name, const std::string& resource,
              const std::vector<std::string>& ids) {
    std::lock_guard lock(mu_);
    pods_[{ns, name}][resource] = ids;
  }
  void SetListing(CdiListing listing) {
    std::lock_guard lock(mu_);
    listing_ = listing;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::vector<std::string>>>
      pods_;
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::vector<ClaimDevice>>>
      claims_;
  CdiListing listing_ = CdiListing::kAccumulated;
};

KubeletStandIn::KubeletStandIn(std::string dir)
    : dir_(std::move(dir)), pod_resources_(std::make_unique<PodResources>()) {
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
  b.RegisterService(this);
  server_ = b.BuildAndStart();
  grpc::ServerBuilder pr;
  pr.AddListeningPort("unix:" + pod_resources_socket(), grpc::InsecureServerCredentials());
  pr.RegisterService(pod_resources_.get());
  pod_resources_server_ = pr.BuildAndStart();
}

KubeletStandIn::~KubeletStandIn() {
  Stop();
  if (pod_resources_server_) {
    pod_resources_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    pod_resources_server_.reset();
    ::unlink(pod_resources_socket().c_str());
  }
}

void KubeletStandIn::AssignClaim(const std::string& ns, const std::string& name,
                                 const std::string& claim,
                                 const std::vector<ClaimDevice>& devices) {
  pod_resources_->AssignClaim(ns, name, claim, devices);
}

void KubeletStandIn::set_cdi_listing(CdiListing listing) { pod_resources_->SetListing(listing); }

void KubeletStandIn::AssignPod(const std::string& ns, const std::string& name,
                               const std::string& resource, const std::vector<std::string>& ids) {
  pod_resources_->Assign(ns, name, resource, ids);
}

grpc::Status KubeletStandIn::Register(grpc::ServerContext* /*context*/,
                                      const v1beta1::RegisterRequest* req,
                                      v1beta1::Empty* /*response*/) {
  std::lock_guard lock(mu_);
  if (req->version() != "v1beta1") {
    return {grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + req->version()};
  }
  registrations_.push_back(*req);
  endpoints_[req->resource_name()] = req->endpoint();
  auto ctx = std::make_shared<grpc::ClientContext>();
  contexts_.push_back(ctx);
  watchers_.emplace_back([this, r = *req, ctx] { Watch(r, ctx); });
  cv_.notify_all();
  return grpc::Status::OK;
}

void KubeletStandIn::Watch(const v1beta1::RegisterRequest& r,
                           const std::shared_ptr<grpc::ClientContext>& ctx) {
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
  return static_cast<size_t>(
      std::count_if(registrations_.begin(), registrations_.end(),
                    [&](const auto& r) { return r.resource_name() == resource; }));
}

Result<std::unique_ptr<v1beta1::DevicePlugin::Stub>> KubeletStandIn::StubFor(
    const std::string& resource) {
  std::lock_guard lock(mu_);
  auto it = endpoints_.find(resource);
  if (it == endpoints_.end()) return Fail(ErrorCode::kNotFound, resource + " has not registered");
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + dir_ + "/" + it->second, grpc::InsecureChannelCredentials()));
}

Result<std::vector<std::string>> KubeletStandIn::Preferred(
    const std::string& resource, const std::vector<std::string>& available, int size) {
  KUBERDMA_ASSIGN_OR_RETURN(auto stub, StubFor(resource));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : available) c->add_available_deviceids(id);
  c->set_allocation_size(size);
  v1beta1::PreferredAllocationResponse resp;
  auto st = stub->GetPreferredAllocation(&ctx, req, &resp);
  if (!st.ok())
    return Fail(ErrorCode::kInvalidArgument,
                "GetPreferredAllocation " + resource + ": " + st.error_message());
  if (resp.container_responses_size() == 0) return std::vector<std::string>{};
  const auto& ids = resp.container_responses(0).deviceids();
  return std::vector<std::string>(ids.begin(), ids.end());
}

Result<deviceplugin::ContainerAllocation> KubeletStandIn::Allocate(
    const std::string& resource, const std::vector<std::string>& ids) {
  KUBERDMA_ASSIGN_OR_RETURN(auto stub, StubFor(resource));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1beta1::AllocateRequest req;
  auto* c = req.add_container_requests();
  for (const auto& id : ids) c->add_devices_ids(id);
  v1beta1::AllocateResponse resp;
  auto st = stub->Allocate(&ctx, req, &resp);
  if (!st.ok())
    return Fail(ErrorCode::kInvalidArgument, "Allocate " + resource + ": " + st.error_message());
  deviceplugin::ContainerAllocation out;
  if (resp.container_responses_size() == 0) return out;
  const auto& c0 = resp.container_responses(0);
  for (const auto& d : c0.devices())
    out.devices.push_back({d.container_path(), d.host_path(), d.permissions()});
  for (const auto& [k, v] : c0.envs()) out.envs[k] = v;
  for (const auto& cdi : c0.cdi_devices()) out.cdi_devices.push_back(cdi.name());
  return out;
}

}  // namespace kuberdma::standins
