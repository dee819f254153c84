// SPDX-License-Identifier: Apache-2.0
// The DRA driver's kubelet side over real gRPC on unix sockets, as the kubelet calls it: the
// plugin watcher's GetInfo and NotifyRegistrationStatus, then NodePrepareResources and
// NodeUnprepareResources for claims read from a claim source (a map standing in for the API
// server), one good and one refused in the same request.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "drahealth.grpc.pb.h"
#include "draplugin.grpc.pb.h"
#include "draplugin_v1beta1.grpc.pb.h"
#include "kuberdma/dra/server.h"
#include "kuberdma/standins/kubelet.h"
#include "per_hca.h"
#include "pluginregistration.grpc.pb.h"
#include "podresources.grpc.pb.h"

namespace kuberdma::dra {
namespace {

namespace fs = std::filesystem;
namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
namespace drabeta = k8s::io::kubelet::pkg::apis::dra::v1beta1;
using nlohmann::json;

class MapClaims final : public ClaimSource {
 public:
  Result<json> Get(const ClaimRef& ref) override {
    auto it = claims.find(ref.ns + "/" + ref.name);
    if (it == claims.end()) return Fail(ErrorCode::kNotFound, "no such ResourceClaim");
    return it->second;
  }
  std::map<std::string, json> claims;
};

json Claim(const std::string& uid, const std::string& node) {
  return {{"metadata", {{"name", "c-" + uid}, {"namespace", "team-a"}, {"uid", uid}}},
          {"status",
           {{"allocation",
             {{"nodeSelector",
               {{"nodeSelectorTerms",
                 {{{"matchFields",
                    {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}}}}}}}},
              {"devices",
               {{"results",
                 {{{"request", "nic0"},
                   {"driver", kDriverName},
                   {"pool", node + "/hca"},
                   {"device", "mlx5-2"}}}}}}}}}}};
}

TEST_CASE("The kubelet registers the DRA driver and prepares and unprepares claims over gRPC") {
  char tmpl[] = "/tmp/kuberdma-dra-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  deviceplugin::ResourceConfig cfg = testing::PerHcaResource();
  auto shared = std::make_shared<deviceplugin::SharedResource>(deviceplugin::Resource(cfg, root));
  shared->resource.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  MapClaims claims;
  claims.claims["team-a/c-u1"] = Claim("u1", "gpu-node-7");
  claims.claims["team-a/c-u2"] = Claim("u2", "gpu-node-8");  // another node's
  DraServer::Options o{.dra_socket = dir + "/dra.sock", .registration_socket = dir + "/reg.sock"};
  {
    auto srv = DraServer::Start(shared, {.node = "gpu-node-7"}, dir + "/cdi", claims, o);
    REQUIRE(srv);
    CHECK((fs::status(o.dra_socket).permissions() & fs::perms::others_all) == fs::perms::none);

    auto reg = pluginregistration::Registration::NewStub(
        grpc::CreateChannel("unix:" + o.registration_socket, grpc::InsecureChannelCredentials()));
    pluginregistration::PluginInfo info;
    grpc::ClientContext c1;
    REQUIRE(reg->GetInfo(&c1, {}, &info).ok());
    CHECK(info.type() == "DRAPlugin");
    CHECK(info.name() == "rdma.kube-rdma.io");
    CHECK(info.endpoint() == o.dra_socket);
    CHECK(std::vector<std::string>(info.supported_versions().begin(),
                                   info.supported_versions().end()) ==
          (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin"}));
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse none;
    grpc::ClientContext c2;
    REQUIRE(reg->NotifyRegistrationStatus(&c2, status, &none).ok());
    CHECK((*srv)->registered());

    auto dra = drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + o.dra_socket, grpc::InsecureChannelCredentials()));
    drapb::NodePrepareResourcesRequest req;
    for (const char* uid : {"u1", "u2", "u3"}) {
      auto* c = req.add_claims();
      c->set_namespace_("team-a");
      c->set_uid(uid);
      c->set_name(std::string("c-") + uid);
    }
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext c3;
    REQUIRE(dra->NodePrepareResources(&c3, req, &resp).ok());
    REQUIRE(resp.claims().size() == 3);  // every claim has an entry
    const auto& good = resp.claims().at("u1");
    CHECK(good.error().empty());
    REQUIRE(good.devices_size() == 1);
    CHECK(good.devices(0).pool_name() == "gpu-node-7/hca");
    CHECK(good.devices(0).device_name() == "mlx5-2");
    CHECK(good.devices(0).request_names(0) == "nic0");
    CHECK_THAT(good.devices(0).cdi_device_ids(0), Catch::StartsWith("kube-rdma.io/hca=u1_0000:"));
    CHECK(fs::exists(dir + "/cdi/kube-rdma-claim-u1.json"));
    CHECK_THAT(resp.claims().at("u2").error(),
               Catch::Contains("is allocated to another node, not gpu-node-7"));
    CHECK_THAT(resp.claims().at("u3").error(), Catch::Contains("no such ResourceClaim"));
    CHECK_FALSE(fs::exists(dir + "/cdi/kube-rdma-claim-u2.json"));

    drapb::NodeUnprepareResourcesRequest ureq;
    *ureq.mutable_claims() = req.claims();
    drapb::NodeUnprepareResourcesResponse uresp;
    grpc::ClientContext c4;
    REQUIRE(dra->NodeUnprepareResources(&c4, ureq, &uresp).ok());
    CHECK(uresp.claims().size() == 3);
    for (const auto& [uid, r] : uresp.claims()) CHECK(r.error().empty());
    CHECK_FALSE(fs::exists(dir + "/cdi/kube-rdma-claim-u1.json"));
  }
  CHECK_FALSE(fs::exists(o.dra_socket));  // stopping removes both sockets
  CHECK_FALSE(fs::exists(o.registration_socket));
  fs::remove_all(dir);
}

TEST_CASE("A 1.32-1.33 kubelet prepares over v1beta1 and every kubelet watches device health") {
  char tmpl[] = "/tmp/kuberdma-drab-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  auto shared = std::make_shared<deviceplugin::SharedResource>(
      deviceplugin::Resource(testing::PerHcaResource(), root));
  shared->resource.Refresh(hcas);
  MapClaims claims;
  claims.claims["team-a/c-u1"] = Claim("u1", "gpu-node-7");
  int registered = 0;
  DraServer::Options o{.dra_socket = dir + "/dra.sock",
                       .registration_socket = dir + "/reg.sock",
                       .on_registered = [&] { ++registered; }};
  PublishOptions publish{.node = "gpu-node-7"};
  {
    auto srv = DraServer::Start(shared, publish, dir + "/cdi", claims, o);
    REQUIRE(srv);
    auto channel = grpc::CreateChannel("unix:" + o.dra_socket, grpc::InsecureChannelCredentials());

    // v1beta1: the same claim, the same answer as v1 gives (on v1's messages: the wire is one).
    drapb::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("team-a");
    c->set_uid("u1");
    c->set_name("c-u1");
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext c1;
    REQUIRE(drabeta::DRAPlugin::NewStub(channel)->NodePrepareResources(&c1, req, &resp).ok());
    const auto& got = resp.claims().at("u1");
    CHECK(got.error().empty());
    REQUIRE(got.devices_size() == 1);
    CHECK(got.devices(0).device_name() == "mlx5-2");
    CHECK_THAT(got.devices(0).cdi_device_ids(0), Catch::StartsWith("kube-rdma.io/hca=u1_"));
    drapb::NodeUnprepareResourcesRequest ureq;
    *ureq.mutable_claims() = req.claims();
    drapb::NodeUnprepareResourcesResponse uresp;
    grpc::ClientContext c2;
    REQUIRE(drabeta::DRAPlugin::NewStub(channel)->NodeUnprepareResources(&c2, ureq, &uresp).ok());
    CHECK(uresp.claims().at("u1").error().empty());
    CHECK_FALSE(fs::exists(dir + "/cdi/kube-rdma-claim-u1.json"));

    // Registration makes the driver publish again (the kubelet wiped the slices at its start).
    auto reg = pluginregistration::Registration::NewStub(
        grpc::CreateChannel("unix:" + o.registration_socket, grpc::InsecureChannelCredentials()));
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse none;
    grpc::ClientContext c3;
    REQUIRE(reg->NotifyRegistrationStatus(&c3, status, &none).ok());
    CHECK(registered == 1);

    // Health: the whole list at once, then again when a port goes down.
    (*srv)->SetHealth(DeviceStates(shared->resource, publish));
    grpc::ClientContext c4;
    c4.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = v1alpha1::DRAResourceHealth::NewStub(channel)->NodeWatchResources(&c4, {});
    v1alpha1::NodeWatchResourcesResponse m;
    REQUIRE(stream->Read(&m));
    REQUIRE(m.devices_size() == 8);
    for (const auto& d : m.devices()) {
      CHECK(d.device().pool_name() == "gpu-node-7/hca");
      CHECK(d.health() == v1alpha1::HEALTHY);
      CHECK(d.last_updated_time() > 0);
    }
    CHECK((*srv)->health_watchers() == 1);
    hcas[2].ports[0].state = 1;
    hcas[2].ports[0].state_name = "DOWN";
    shared->resource.Refresh(hcas);
    (*srv)->SetHealth(DeviceStates(shared->resource, publish));
    REQUIRE(stream->Read(&m));
    std::map<std::string, int> health;
    for (const auto& d : m.devices()) health[d.device().device_name()] = d.health();
    CHECK(health["mlx5-2"] == v1alpha1::UNHEALTHY);
    CHECK(health["mlx5-3"] == v1alpha1::HEALTHY);
    c4.TryCancel();
  }
  CHECK_FALSE(fs::exists(o.dra_socket));
  fs::remove_all(dir);
}

TEST_CASE(
    "The kubelet lists a pod's prepared claims with their CDI devices, as Multus reads them") {
  char tmpl[] = "/tmp/kuberdma-drapr-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  {
    standins::KubeletStandIn kubelet(dir);
    const std::string uid = "8c1f0000-0000-4000-8000-00000000000b";
    const std::string a = "kube-rdma.io/hca=" + uid + "_0000:1a:00.0";
    const std::string b = "kube-rdma.io/hca=" + uid + "_0000:1b:00.0";
    kubelet.AssignClaim(
        "team-a", "trainer-0", "trainer-0-nics-x7k2p",
        {{.driver = kDriverName, .pool = "n/hca", .device = "mlx5-0", .cdi_ids = {a}},
         {.driver = kDriverName, .pool = "n/hca", .device = "mlx5-1", .cdi_ids = {b}}});
    auto stub = ::v1::PodResourcesLister::NewStub(grpc::CreateChannel(
        "unix:" + kubelet.pod_resources_socket(), grpc::InsecureChannelCredentials()));
    ::v1::ListPodResourcesResponse resp;
    grpc::ClientContext ctx;
    REQUIRE(stub->List(&ctx, {}, &resp).ok());
    REQUIRE(resp.pod_resources_size() == 1);
    const auto& dr = resp.pod_resources(0).containers(0).dynamic_resources(0);
    CHECK(dr.claim_name() == "trainer-0-nics-x7k2p");
    CHECK(dr.claim_namespace() == "team-a");
    CHECK(dr.claim_resources(0).driver_name() == kDriverName);
    CHECK(dr.claim_resources(0).cdi_devices(0).name() == a);
    // As the kubelet's GetDynamicResources builds it: the second device lists the first's too.
    REQUIRE(dr.claim_resources(1).cdi_devices_size() == 2);
    CHECK(dr.claim_resources(1).device_name() == "mlx5-1");
    CHECK(dr.claim_resources(1).cdi_devices(0).name() == a);
    CHECK(dr.claim_resources(1).cdi_devices(1).name() == b);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kuberdma::dra
