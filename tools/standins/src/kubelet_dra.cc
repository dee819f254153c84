// SPDX-License-Identifier: Apache-2.0
// The kubelet's and the runtime's side of a DRA driver, for tests and the demo
// (kubelet_dra.h).
#include "kuberdma/standins/kubelet_dra.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "drahealth.grpc.pb.h"
#include "draplugin.grpc.pb.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "pluginregistration.grpc.pb.h"

namespace kuberdma::standins {

namespace {

namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;

std::unique_ptr<drapb::DRAPlugin::Stub> Stub(const std::string& endpoint) {
  return drapb::DRAPlugin::NewStub(
      grpc::CreateChannel("unix:" + endpoint, grpc::InsecureChannelCredentials()));
}

void Deadline(grpc::ClientContext& ctx) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
}

void AddClaim(const dra::ClaimRef& ref, drapb::Claim* c) {
  c->set_namespace_(ref.ns);
  c->set_uid(ref.uid);
  c->set_name(ref.name);
}

}  // namespace

Result<KubeletDraStandIn> KubeletDraStandIn::Register(const std::string& registry_dir,
                                                      const std::string& driver,
                                                      std::chrono::milliseconds timeout) {
  std::string reg = registry_dir + "/" + driver + "-reg.sock";
  auto until = std::chrono::steady_clock::now() + timeout;
  while (::access(reg.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() >= until) {
      return Fail(ErrorCode::kTimeout, "no registration socket " + reg + " appeared");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto stub = pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix:" + reg, grpc::InsecureChannelCredentials()));
  pluginregistration::PluginInfo info;
  grpc::ClientContext c1;
  Deadline(c1);
  if (auto st = stub->GetInfo(&c1, {}, &info); !st.ok()) {
    return Fail(ErrorCode::kIo, "GetInfo on " + reg + ": " + st.error_message());
  }
  const auto& versions = info.supported_versions();
  if (info.type() != "DRAPlugin" || info.name() != driver ||
      std::find(versions.begin(), versions.end(), "v1.DRAPlugin") == versions.end()) {
    return Fail(ErrorCode::kInvalidArgument, "the plugin at " + reg + " is a " + info.type() +
                                                 " named " + info.name() +
                                                 ", not a v1.DRAPlugin of " + driver);
  }
  pluginregistration::RegistrationStatus st;
  st.set_plugin_registered(true);
  pluginregistration::RegistrationStatusResponse none;
  grpc::ClientContext c2;
  Deadline(c2);
  (void)stub->NotifyRegistrationStatus(&c2, st, &none);
  KubeletDraStandIn k;
  k.endpoint_ = info.endpoint();
  k.version_ = "v1.DRAPlugin";
  return k;
}

Result<KubeletDraStandIn::Prepared> KubeletDraStandIn::Prepare(const dra::ClaimRef& claim) const {
  drapb::NodePrepareResourcesRequest req;
  AddClaim(claim, req.add_claims());
  drapb::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  Deadline(ctx);
  if (auto st = Stub(endpoint_)->NodePrepareResources(&ctx, req, &resp); !st.ok()) {
    return Fail(ErrorCode::kIo, "NodePrepareResources: " + st.error_message());
  }
  auto it = resp.claims().find(claim.uid);
  if (it == resp.claims().end()) {
    return Fail(ErrorCode::kInternal, "NodePrepareResources left claim " + claim.Text() + " out");
  }
  if (!it->second.error().empty()) return Fail(ErrorCode::kInvalidArgument, it->second.error());
  Prepared out;
  for (const auto& d : it->second.devices()) {
    ++out.devices;
    for (const auto& id : d.cdi_device_ids()) {
      if (std::find(out.cdi_ids.begin(), out.cdi_ids.end(), id) == out.cdi_ids.end()) {
        out.cdi_ids.push_back(id);
      }
    }
  }
  return out;
}

Result<KubeletDraStandIn::Health> KubeletDraStandIn::WatchHealth(
    const std::function<bool(const Health&)>& until, std::chrono::milliseconds timeout) const {
  auto stub = v1alpha1::DRAResourceHealth::NewStub(
      grpc::CreateChannel("unix:" + endpoint_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  auto stream = stub->NodeWatchResources(&ctx, {});
  v1alpha1::NodeWatchResourcesResponse m;
  Health last;
  while (stream->Read(&m)) {
    last.clear();
    for (const auto& d : m.devices()) {
      const char* h = d.health() == v1alpha1::HEALTHY     ? "Healthy"
                      : d.health() == v1alpha1::UNHEALTHY ? "Unhealthy"
                                                          : "Unknown";
      last[d.device().pool_name() + "/" + d.device().device_name()] = h;
    }
    if (until(last)) {
      ctx.TryCancel();
      return last;
    }
  }
  return Fail(ErrorCode::kTimeout, "NodeWatchResources: the health asked for did not come in " +
                                       std::to_string(timeout.count()) + " ms");
}

Result<void> KubeletDraStandIn::Unprepare(const std::vector<dra::ClaimRef>& claims) const {
  drapb::NodeUnprepareResourcesRequest req;
  for (const auto& c : claims) AddClaim(c, req.add_claims());
  drapb::NodeUnprepareResourcesResponse resp;
  grpc::ClientContext ctx;
  Deadline(ctx);
  if (auto st = Stub(endpoint_)->NodeUnprepareResources(&ctx, req, &resp); !st.ok()) {
    return Fail(ErrorCode::kIo, "NodeUnprepareResources: " + st.error_message());
  }
  for (const auto& c : claims) {
    auto it = resp.claims().find(c.uid);
    if (it == resp.claims().end()) {
      return Fail(ErrorCode::kInternal, "NodeUnprepareResources left " + c.Text() + " out");
    }
    if (!it->second.error().empty()) return Fail(ErrorCode::kIo, it->second.error());
  }
  return {};
}

namespace {

void Apply(const nlohmann::json& edits, ContainerEdits& out, std::set<std::string>& nodes) {
  for (const auto& kv : edits.value("env", nlohmann::json::array())) {
    std::string s = kv.is_string() ? kv.get<std::string>() : "";
    if (s.find('=') != std::string::npos)
      out.env[s.substr(0, s.find('='))] = s.substr(s.find('=') + 1);
  }
  for (const auto& n : edits.value("deviceNodes", nlohmann::json::array())) {
    if (n.is_object() && n.value("path", "") != "" && nodes.insert(n.value("path", "")).second)
      ++out.device_nodes;
  }
}

}  // namespace

Result<ContainerEdits> ApplyCdi(const std::string& cdi_dir, const std::vector<std::string>& ids) {
  ContainerEdits out;
  std::set<std::string> nodes;
  std::set<std::string> specs_applied;
  for (const auto& id : ids) {
    auto eq = id.find('=');
    std::string kind = id.substr(0, eq);
    std::string name = eq == std::string::npos ? "" : id.substr(eq + 1);
    bool found = false;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(cdi_dir, ec)) {
      if (found || e.path().extension() != ".json") continue;
      auto text = ReadFile(e.path().string());
      if (!text) continue;
      auto spec = ParseUntrustedJson(*text, e.path().string());
      if (!spec || !spec->is_object() || spec->value("kind", "") != kind) continue;
      for (const auto& d : spec->value("devices", nlohmann::json::array())) {
        if (d.value("name", "") != name) continue;
        found = true;
        if (specs_applied.insert(e.path().string()).second)
          Apply(spec->value("containerEdits", nlohmann::json::object()), out, nodes);
        Apply(d.value("containerEdits", nlohmann::json::object()), out, nodes);
      }
    }
    if (!found)
      return Fail(ErrorCode::kNotFound, "no CDI spec in " + cdi_dir + " has device " + id);
  }
  return out;
}

}  // namespace kuberdma::standins
