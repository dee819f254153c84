// SPDX-License-Identifier: Apache-2.0
// The DRAPlugin and plugin-registration gRPC services (server.h).
#include "kuberdma/dra/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <list>
#include <mutex>

#include "drahealth.grpc.pb.h"
#include "draplugin.grpc.pb.h"
#include "draplugin_v1beta1.grpc.pb.h"
#include "pluginregistration.grpc.pb.h"

namespace kuberdma::dra {

namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
namespace drabeta = k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace healthpb = v1alpha1;
namespace regpb = pluginregistration;

namespace {

ClaimRef RefOf(const drapb::Claim& c) {
  return {.ns = c.namespace_(), .uid = c.uid(), .name = c.name()};
}

healthpb::NodeWatchResourcesResponse HealthMessage(const std::vector<DeviceState>& devices,
                                                   int64_t now) {
  healthpb::NodeWatchResourcesResponse out;
  for (const auto& d : devices) {
    auto* h = out.add_devices();
    h->mutable_device()->set_pool_name(d.pool);
    h->mutable_device()->set_device_name(d.device);
    h->set_health(d.Healthy() ? healthpb::HEALTHY : healthpb::UNHEALTHY);
    h->set_last_updated_time(now);
  }
  return out;
}

}  // namespace

class DraServer::Services {
 public:
  Services(std::shared_ptr<deviceplugin::SharedResource> res, PublishOptions publish,
           std::string cdi_dir, ClaimSource& claims, const Options& o,
           std::atomic<bool>& registered)
      : dra(*this),
        dra_beta(*this),
        health(*this),
        registration(*this),
        res_(std::move(res)),
        publish_(std::move(publish)),
        cdi_dir_(std::move(cdi_dir)),
        claims_(claims),
        o_(o),
        registered_(registered) {}

  // One claim prepared, or the error that refused it, into `out`.
  void PrepareOne(const drapb::Claim& c, drapb::NodePrepareResourceResponse* out) {
    ClaimRef ref = RefOf(c);
    auto claim = claims_.Get(ref);
    if (!claim) {
      out->set_error("claim " + ref.Text() + ": " + claim.error().message());
      return;
    }
    std::lock_guard lock(res_->mu);
    Preparer p(res_->resource, publish_, cdi_dir_, res_->allocations_dir);
    auto done = p.Prepare(ref, *claim);
    if (!done) {
      out->set_error(done.error().message());
      return;
    }
    for (const auto& d : done->devices) {
      auto* dev = out->add_devices();
      dev->add_request_names(d.request);
      dev->set_pool_name(d.pool);
      dev->set_device_name(d.device);
      dev->add_cdi_device_ids(d.cdi_id);
    }
  }

  std::string UnprepareOne(const drapb::Claim& c) {
    std::lock_guard lock(res_->mu);
    Preparer p(res_->resource, publish_, cdi_dir_, res_->allocations_dir);
    auto r = p.Unprepare(RefOf(c));
    return r ? "" : r.error().message();
  }

  // The DRAPlugin service of one version (`Service`: v1's or v1beta1's, both on v1's messages).
  template <class Service>
  class Dra final : public Service::CallbackService {
   public:
    explicit Dra(Services& s) : s_(s) {}
    grpc::ServerUnaryReactor* NodePrepareResources(
        grpc::CallbackServerContext* ctx, const drapb::NodePrepareResourcesRequest* req,
        drapb::NodePrepareResourcesResponse* resp) override {
      for (const auto& c : req->claims()) s_.PrepareOne(c, &(*resp->mutable_claims())[c.uid()]);
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status::OK);
      return r;
    }
    grpc::ServerUnaryReactor* NodeUnprepareResources(
        grpc::CallbackServerContext* ctx, const drapb::NodeUnprepareResourcesRequest* req,
        drapb::NodeUnprepareResourcesResponse* resp) override {
      for (const auto& c : req->claims()) {
        (*resp->mutable_claims())[c.uid()].set_error(s_.UnprepareOne(c));
      }
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status::OK);
      return r;
    }

   private:
    Services& s_;
  };

  // One NodeWatchResources stream: the whole list at once, then again on every change.
  class HealthStream final : public grpc::ServerWriteReactor<healthpb::NodeWatchResourcesResponse> {
   public:
    explicit HealthStream(Services& s) : s_(s) {}
    // Under s_.health_mu_.
    void Send(const healthpb::NodeWatchResourcesResponse& m) {
      if (done_) return;
      if (writing_) {
        next_ = m;
        pending_ = true;
        return;
      }
      now_ = m;
      writing_ = true;
      StartWrite(&now_);
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard l(s_.health_mu_);
      writing_ = false;
      if (!ok) {
        Close();
        return;
      }
      if (pending_) {
        pending_ = false;
        Send(next_);
      }
    }
    void OnCancel() override {
      std::lock_guard l(s_.health_mu_);
      Close();
    }
    void OnDone() override {
      {
        std::lock_guard l(s_.health_mu_);
        s_.watchers_.remove(this);
      }
      delete this;
    }

   private:
    void Close() {
      if (done_) return;
      done_ = true;
      Finish(grpc::Status::OK);
    }
    Services& s_;
    healthpb::NodeWatchResourcesResponse now_;
    healthpb::NodeWatchResourcesResponse next_;
    bool writing_ = false;
    bool pending_ = false;
    bool done_ = false;
  };

  class Health final : public healthpb::DRAResourceHealth::CallbackService {
   public:
    explicit Health(Services& s) : s_(s) {}
    grpc::ServerWriteReactor<healthpb::NodeWatchResourcesResponse>* NodeWatchResources(
        grpc::CallbackServerContext* /*ctx*/,
        const healthpb::NodeWatchResourcesRequest* /*request*/) override {
      auto* stream = new HealthStream(s_);
      std::lock_guard l(s_.health_mu_);
      s_.watchers_.push_back(stream);
      stream->Send(s_.health_);
      return stream;
    }

   private:
    Services& s_;
  };

  void SetHealth(const std::vector<DeviceState>& devices) {
    auto now = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    std::lock_guard l(health_mu_);
    auto m = HealthMessage(devices, now);
    // Unchanged but for the time: nothing to send.
    auto same = [](healthpb::NodeWatchResourcesResponse a, healthpb::NodeWatchResourcesResponse b) {
      for (auto* x : {&a, &b}) {
        for (auto& d : *x->mutable_devices()) d.set_last_updated_time(0);
      }
      return a.SerializeAsString() == b.SerializeAsString();
    };
    if (same(m, health_)) return;
    health_ = m;
    for (auto* w : watchers_) w->Send(health_);
  }

  int Watchers() const {
    std::lock_guard l(health_mu_);
    return static_cast<int>(watchers_.size());
  }

  class Registration final : public regpb::Registration::CallbackService {
   public:
    explicit Registration(Services& s) : s_(s) {}
    grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx,
                                      const regpb::InfoRequest* /*request*/,
                                      regpb::PluginInfo* info) override {
      info->set_type("DRAPlugin");
      info->set_name(s_.o_.driver);
      info->set_endpoint(s_.o_.dra_socket);
      info->add_supported_versions("v1.DRAPlugin");
      info->add_supported_versions("v1beta1.DRAPlugin");
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status::OK);
      return r;
    }
    grpc::ServerUnaryReactor* NotifyRegistrationStatus(
        grpc::CallbackServerContext* ctx, const regpb::RegistrationStatus* status,
        regpb::RegistrationStatusResponse* /*response*/) override {
      s_.registered_ = status->plugin_registered();
      if (status->plugin_registered() && s_.o_.on_registered) s_.o_.on_registered();
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status::OK);
      return r;
    }

   private:
    Services& s_;
  };

  Dra<drapb::DRAPlugin> dra;
  Dra<drabeta::DRAPlugin> dra_beta;
  Health health;
  Registration registration;

 private:
  mutable std::mutex health_mu_;
  healthpb::NodeWatchResourcesResponse health_;
  std::list<HealthStream*> watchers_;
  std::shared_ptr<deviceplugin::SharedResource> res_;
  PublishOptions publish_;
  std::string cdi_dir_;
  ClaimSource& claims_;
  const Options& o_;
  std::atomic<bool>& registered_;
};

namespace {

// A gRPC server for `services` on the unix socket `path`, only root (the kubelet) may connect.
Result<std::unique_ptr<grpc::Server>> Serve(std::initializer_list<grpc::Service*> services,
                                            const std::string& path) {
  ::unlink(path.c_str());  // a stale socket from a previous run would block bind
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  for (auto* service : services) builder.RegisterService(service);
  auto server = builder.BuildAndStart();
  if (!server) {
    return Fail(ErrorCode::kIo,
                "serve on " + path + " (is the directory writable and the path short enough?)");
  }
  if (::chmod(path.c_str(), 0600) != 0) return FailErrno(errno, "chmod 0600 " + path);
  return server;
}

}  // namespace

Result<std::unique_ptr<DraServer>> DraServer::Start(
    std::shared_ptr<deviceplugin::SharedResource> res, PublishOptions publish, std::string cdi_dir,
    ClaimSource& claims, Options o) {
  std::unique_ptr<DraServer> s(new DraServer());
  s->o_ = std::move(o);
  s->services_ = std::make_unique<Services>(std::move(res), std::move(publish), std::move(cdi_dir),
                                            claims, s->o_, s->registered_);
  // The DRA service first: the kubelet learns of it from the registration socket.
  auto& sv = *s->services_;
  KUBERDMA_ASSIGN_OR_RETURN(s->dra_, Serve({&sv.dra, &sv.dra_beta, &sv.health}, s->o_.dra_socket));
  KUBERDMA_ASSIGN_OR_RETURN(s->registration_, Serve({&sv.registration}, s->o_.registration_socket));
  return s;
}

void DraServer::SetHealth(const std::vector<DeviceState>& devices) {
  services_->SetHealth(devices);
}

int DraServer::health_watchers() const { return services_->Watchers(); }

DraServer::~DraServer() {
  for (auto* server : {registration_.get(), dra_.get()}) {
    if (server == nullptr) continue;
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server->Wait();
  }
  ::unlink(o_.registration_socket.c_str());
  ::unlink(o_.dra_socket.c_str());
}

}  // namespace kuberdma::dra
