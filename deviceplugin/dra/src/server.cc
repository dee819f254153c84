// SPDX-License-Identifier: Apache-2.0
// The DRAPlugin and plugin-registration gRPC services (server.h).
#include "kuberdma/dra/server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "draplugin.grpc.pb.h"
#include "pluginregistration.grpc.pb.h"

namespace kuberdma::dra {

namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
namespace regpb = pluginregistration;

namespace {

ClaimRef RefOf(const drapb::Claim& c) {
  return {.ns = c.namespace_(), .uid = c.uid(), .name = c.name()};
}

}  // namespace

class DraServer::Services {
 public:
  Services(std::shared_ptr<deviceplugin::SharedResource> res, PublishOptions publish,
           std::string cdi_dir, ClaimSource& claims, const Options& o,
           std::atomic<bool>& registered)
      : dra(*this),
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
      for (const auto& id : done->cdi_ids) dev->add_cdi_device_ids(id);
    }
  }

  std::string UnprepareOne(const drapb::Claim& c) {
    std::lock_guard lock(res_->mu);
    Preparer p(res_->resource, publish_, cdi_dir_, res_->allocations_dir);
    auto r = p.Unprepare(RefOf(c));
    return r ? "" : r.error().message();
  }

  class Dra final : public drapb::DRAPlugin::CallbackService {
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
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status::OK);
      return r;
    }
    grpc::ServerUnaryReactor* NotifyRegistrationStatus(
        grpc::CallbackServerContext* ctx, const regpb::RegistrationStatus* status,
        regpb::RegistrationStatusResponse* /*response*/) override {
      s_.registered_ = status->plugin_registered();
      auto* r = ctx->DefaultReactor();
      r->Finish(grpc::Status::OK);
      return r;
    }

   private:
    Services& s_;
  };

  Dra dra;
  Registration registration;

 private:
  std::shared_ptr<deviceplugin::SharedResource> res_;
  PublishOptions publish_;
  std::string cdi_dir_;
  ClaimSource& claims_;
  const Options& o_;
  std::atomic<bool>& registered_;
};

namespace {

// A gRPC server for `service` on the unix socket `path`, only root (the kubelet) may connect.
Result<std::unique_ptr<grpc::Server>> Serve(grpc::Service* service, const std::string& path) {
  ::unlink(path.c_str());  // a stale socket from a previous run would block bind
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(service);
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
  KUBERDMA_ASSIGN_OR_RETURN(s->dra_, Serve(&s->services_->dra, s->o_.dra_socket));
  KUBERDMA_ASSIGN_OR_RETURN(s->registration_,
                            Serve(&s->services_->registration, s->o_.registration_socket));
  return s;
}

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
