// SPDX-License-Identifier: Apache-2.0
// The DevicePlugin service over the callback API.
#include "kuberdma/deviceplugin/server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "api.grpc.pb.h"
#include "kuberdma/base/log_text.h"
#include "kuberdma/contract/allocation.h"

namespace kuberdma::deviceplugin {

namespace {

v1beta1::ListAndWatchResponse ToResponse(const std::vector<DeviceView>& devs) {
  v1beta1::ListAndWatchResponse r;
  for (const auto& d : devs) {
    auto* dev = r.add_devices();
    dev->set_id(d.id);
    dev->set_health(d.healthy ? "Healthy" : "Unhealthy");
    if (!d.numa_nodes.empty()) {
      for (int64_t n : d.numa_nodes) dev->mutable_topology()->add_nodes()->set_id(n);
    }
  }
  return r;
}

}  // namespace

// One ListAndWatch stream. Writes are serialised: a new list that arrives while one is in flight
// replaces any list still waiting (only the latest state matters).
class Watcher final : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
 public:
  Watcher(std::shared_ptr<Watchers> hub, v1beta1::ListAndWatchResponse first);
  void Push(v1beta1::ListAndWatchResponse r) {
    std::lock_guard lock(mu_);
    if (finished_) return;
    if (writing_) {
      pending_ = std::move(r);
      return;
    }
    writing_ = true;
    current_ = std::move(r);
    StartWrite(&current_);
  }
  void End(grpc::Status s) {
    std::lock_guard lock(mu_);
    if (finished_) return;
    finished_ = true;
    Finish(std::move(s));
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    if (!ok) {
      if (!finished_) {
        finished_ = true;
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream closed by the kubelet"));
      }
      return;
    }
    if (pending_ && !finished_) {
      current_ = std::move(*pending_);
      pending_.reset();
      StartWrite(&current_);
    } else {
      writing_ = false;
    }
  }
  void OnCancel() override { End(grpc::Status::CANCELLED); }
  void OnDone() override;

 private:
  std::shared_ptr<Watchers> hub_;
  std::mutex mu_;
  bool writing_ = false;
  bool finished_ = false;
  v1beta1::ListAndWatchResponse current_;
  std::optional<v1beta1::ListAndWatchResponse> pending_;
};

class Watchers {
 public:
  explicit Watchers(std::function<void()> on_closed) : on_closed_(std::move(on_closed)) {}
  void Add(Watcher* w) {
    std::lock_guard lock(mu_);
    set_.insert(w);
  }
  void Remove(Watcher* w) {
    bool notify = false;
    {
      std::lock_guard lock(mu_);
      set_.erase(w);
      notify = !stopping_;
    }
    if (notify && on_closed_) on_closed_();
  }
  void PushAll(const v1beta1::ListAndWatchResponse& r) {
    std::lock_guard lock(mu_);
    for (auto* w : set_) w->Push(r);
  }
  void EndAll() {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto* w : set_) w->End(grpc::Status::OK);
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return set_.size();
  }

 private:
  mutable std::mutex mu_;
  std::set<Watcher*> set_;
  bool stopping_ = false;
  std::function<void()> on_closed_;
};

Watcher::Watcher(std::shared_ptr<Watchers> hub, v1beta1::ListAndWatchResponse first)
    : hub_(std::move(hub)) {
  hub_->Add(this);
  Push(std::move(first));
}

void Watcher::OnDone() {
  hub_->Remove(this);
  delete this;
}

class Service final : public v1beta1::DevicePlugin::CallbackService {
 public:
  Service(std::shared_ptr<SharedResource> res, std::shared_ptr<Watchers> hub, Metrics& m)
      : res_(std::move(res)),
        hub_(std::move(hub)),
        metrics_(m),
        per_hca_(res_->resource.config().policy == Policy::kPerHca) {}

  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::Empty* /*unused*/,
                                                   v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(per_hca_);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(
      grpc::CallbackServerContext* /*unused*/, const v1beta1::Empty* /*unused*/) override {
    std::vector<DeviceView> devs;
    {
      std::lock_guard lock(res_->mu);
      devs = res_->resource.Devices();
    }
    return new Watcher(hub_, ToResponse(devs));
  }

  grpc::ServerUnaryReactor* GetPreferredAllocation(
      grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* req,
      v1beta1::PreferredAllocationResponse* out) override {
    grpc::Status status = Guard([&] {
      std::lock_guard lock(res_->mu);
      for (const auto& c : req->container_requests()) {
        std::vector<std::string> avail(c.available_deviceids().begin(),
                                       c.available_deviceids().end());
        std::vector<std::string> must(c.must_include_deviceids().begin(),
                                      c.must_include_deviceids().end());
        size_t size = c.allocation_size() < 0 ? 0 : static_cast<size_t>(c.allocation_size());
        auto* resp = out->add_container_responses();
        for (auto& id : res_->resource.Preferred(avail, must, size)) resp->add_deviceids(id);
      }
      return grpc::Status::OK;
    });
    auto* r = ctx->DefaultReactor();
    r->Finish(status);
    return r;
  }

  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx,
                                     const v1beta1::AllocateRequest* req,
                                     v1beta1::AllocateResponse* out) override {
    std::string name;
    grpc::Status status = Guard([&] {
      name = res_->resource.config().FullName();
      for (const auto& c : req->container_requests()) {
        std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
        // The lock covers reading the model only: building the answer and writing the record
        // (a file per slot) run beside other containers' Allocate calls.
        auto alloc = [&] {
          std::lock_guard lock(res_->mu);
          return res_->resource.Allocate(ids);
        }();
        if (!alloc)
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, alloc.error().message());
        auto* resp = out->add_container_responses();
        for (const auto& d : alloc->devices) {
          auto* spec = resp->add_devices();
          spec->set_container_path(d.container_path);
          spec->set_host_path(d.host_path);
          spec->set_permissions(d.permissions);
        }
        for (const auto& [k, v] : alloc->envs) (*resp->mutable_envs())[k] = v;
        for (const auto& cdi : alloc->cdi_devices) resp->add_cdi_devices()->set_name(cdi);
        spdlog::info("event=allocate resource={} ids={} hcas={}", name, ids.size(),
                     fmt::join(alloc->hcas, ","));
        Record(name, ids, alloc->hcas);
      }
      return grpc::Status::OK;
    });
    metrics_.Inc(status.ok() ? "kuberdma_allocations_total" : "kuberdma_allocation_errors_total",
                 {{"resource", name}});
    if (!status.ok())
      spdlog::warn("event=allocate_failed resource={} error={}", name,
                   LogQuoted(status.error_message()));
    auto* r = ctx->DefaultReactor();
    r->Finish(status);
    return r;
  }

  grpc::ServerUnaryReactor* PreStartContainer(
      grpc::CallbackServerContext* ctx, const v1beta1::PreStartContainerRequest* /*unused*/,
      v1beta1::PreStartContainerResponse* /*unused*/) override {
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);  // not required (pre_start_required = false); answered anyway
    return r;
  }

 private:
  // Which HCAs went to one container together, for a rail's network to find its rail among them
  // (contract/allocation.h). A failure is logged: the CNI then checks the one slot it is given.
  void Record(const std::string& name, const std::vector<std::string>& ids,
              const std::vector<std::string>& hcas) const {
    if (res_->allocations_dir.empty() || res_->resource.config().policy != Policy::kPerHca) return;
    if (ids.size() != hcas.size()) return;  // one HCA per slot in per-hca resources
    auto r = contract::RecordAllocation(res_->allocations_dir,
                                        {.resource = name, .slots = ids, .hcas = hcas});
    if (!r) {
      spdlog::warn("event=allocation_record_failed resource={} error={}", name,
                   LogQuoted(r.error().message()));
    }
  }

  // Each handler's boundary: a stray exception becomes INTERNAL, never a crash.
  template <typename F>
  static grpc::Status Guard(F&& fn) {
    try {
      return fn();
    } catch (const std::exception& e) {
      return {grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what()};
    }
  }
  std::shared_ptr<SharedResource> res_;
  std::shared_ptr<Watchers> hub_;
  Metrics& metrics_;
  const bool per_hca_;  // a resource's policy never changes (a reload re-creates the server)
};

ResourceServer::ResourceServer(std::shared_ptr<SharedResource> res, std::string socket_path)
    : res_(std::move(res)), socket_path_(std::move(socket_path)) {}

Result<std::unique_ptr<ResourceServer>> ResourceServer::Start(
    std::shared_ptr<SharedResource> res, std::string socket_path, Metrics& metrics,
    std::function<void()> on_stream_closed) {
  std::unique_ptr<ResourceServer> s(new ResourceServer(std::move(res), std::move(socket_path)));
  ::unlink(s->socket_path_.c_str());  // a stale socket from a previous run would block bind
  s->watchers_ = std::make_shared<Watchers>(std::move(on_stream_closed));
  s->service_ = std::make_unique<Service>(s->res_, s->watchers_, metrics);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + s->socket_path_, grpc::InsecureServerCredentials());
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (!s->server_) {
    return Fail(ErrorCode::kIo, "serve the device plugin API on " + s->socket_path_ +
                                    " (is the directory writable and the path short enough?)");
  }
  // Only root (the kubelet) may connect, whatever the umask made of it; the kubelet learns of the
  // socket only at Register, after this.
  if (::chmod(s->socket_path_.c_str(), 0600) != 0) {
    return FailErrno(errno, "chmod 0600 " + s->socket_path_);
  }
  return s;
}

ResourceServer::~ResourceServer() {
  if (server_) {
    watchers_->EndAll();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  ::unlink(socket_path_.c_str());
}

void ResourceServer::Publish() {
  std::vector<DeviceView> devs;
  {
    std::lock_guard lock(res_->mu);
    devs = res_->resource.Devices();
  }
  watchers_->PushAll(ToResponse(devs));
}

size_t ResourceServer::streams() const { return watchers_->size(); }

}  // namespace kuberdma::deviceplugin
