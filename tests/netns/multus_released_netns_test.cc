// SPDX-License-Identifier: Apache-2.0
// A released Multus (v4.2.x-v4.3.0) attaching a pod's NICs that came from a DRA claim prepared by
// our own driver: the pod-resources path. Real peers where this machine has them: the Multus
// binary named by $KUBERDMA_MULTUS (built by hand from its release; nothing of it is in this
// repository), rdma-device-plugin answering the CNI's allocation check, Debian's loopback as the
// cluster network. Stand-ins: the kubelet's pod-resources API (the kubelet's v1 List with
// dynamic_resources, standins/kubelet.h) and the API server (the pod and the NADs,
// dra/api_standin.h). Without $KUBERDMA_MULTUS the test says so and is skipped.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/dra/prepare.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/api_server.h"
#include "kuberdma/standins/kubelet.h"
#include "node_device_plugin.h"
#include "per_hca.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;

// The claim the scheduler allocated: mlx5_0 and mlx5_1 of node n1, reserved for the pod.
json Claim(const std::string& uid) {
  auto result = [](const char* request, const char* device) {
    return json{
        {"request", request}, {"driver", dra::kDriverName}, {"pool", "n1/hca"}, {"device", device}};
  };
  return {{"metadata", {{"name", "trainer-0-nics-x7k2p"}, {"namespace", "team-a"}, {"uid", uid}}},
          {"status",
           {{"allocation",
             {{"devices", {{"results", {result("nic-0", "mlx5-0"), result("nic-1", "mlx5-1")}}}}}},
            {"reservedFor", {{{"resource", "pods"}, {"name", "trainer-0"}, {"uid", "p"}}}}}}};
}

TEST_CASE("Released Multus attaches a DRA claim's NICs through the kubelet's pod-resources") {
  const char* multus = std::getenv("KUBERDMA_MULTUS");
  if (multus == nullptr || ::access(multus, X_OK) != 0) {
    WARN("skipped: set KUBERDMA_MULTUS to a Multus v4.2.x-v4.3.0 binary (docs/dra.md)");
    return;
  }
  SimNode node(kRoce8, Roce8Netdevs());
  const std::string dir = node.state_dir() + "/mh";
  REQUIRE(MakeDirs(dir + "/bin"));
  REQUIRE(WriteFileAtomic(node.node_config_path(), "{}"));  // the allocation check on
  // Our driver prepares the claim: per-device CDI names and the record the CNI's check reads.
  sysfs::SysfsRoot root(kRoce8);
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  const std::string uid = "8c1f0000-0000-4000-8000-00000000000b";
  dra::Preparer p(r, {.node = "n1"}, dir + "/cdi", node.allocations_dir());
  auto prepared =
      p.Prepare({.ns = "team-a", .uid = uid, .name = "trainer-0-nics-x7k2p"}, Claim(uid));
  REQUIRE(prepared);
  REQUIRE(prepared->devices.size() == 2);
  // The kubelet lists it under the pod's container, as pod-resources v1 does.
  standins::KubeletStandIn kubelet(dir);
  std::vector<standins::KubeletStandIn::ClaimDevice> devices;
  for (const auto& d : prepared->devices) {
    devices.push_back(
        {.driver = dra::kDriverName, .pool = d.pool, .device = d.device, .cdi_ids = {d.cdi_id}});
  }
  kubelet.AssignClaim("team-a", "trainer-0", "trainer-0-nics-x7k2p", devices);
  NodeDevicePlugin dp(node, dir, kubelet);
  REQUIRE(dp.started());
  REQUIRE(kubelet.WaitFor([&] { return !kubelet.Lists("rdma/hca").empty(); },
                          std::chrono::seconds(10)));
  // The API server: the pod asks for two attachments of a NAD whose resourceName is the claim's
  // name (the only key released Multus files DRA devices under).
  // Listening in the node's namespace (its loopback up), where Multus runs.
  auto lo = node.links().GetByName(node.node(), "lo");
  REQUIRE(lo);
  REQUIRE(node.links().Change(node.node(), lo->ifindex, {.up = true}));
  std::unique_ptr<standins::ApiStandIn> standin;
  REQUIRE(node.node().RunIn([&] { standin = std::make_unique<standins::ApiStandIn>(); }));
  standins::ApiStandIn& api = *standin;
  const std::string pods = "/api/v1/namespaces/team-a/pods/";
  api.Put(pods + "trainer-0",
          {{"apiVersion", "v1"},
           {"kind", "Pod"},
           {"metadata",
            {{"name", "trainer-0"},
             {"namespace", "team-a"},
             {"annotations", {{"k8s.v1.cni.cncf.io/networks", "rdma-claim,rdma-claim"}}}}},
           {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}});
  const std::string pod_uid = (*api.Object(pods + "trainer-0"))["metadata"]["uid"];
  json conf = {{"cniVersion", "0.3.1"},
               {"name", "rdma-claim"},
               {"type", "rdma"},
               {"stateDir", node.state_dir()}};
  api.Put("/apis/k8s.cni.cncf.io/v1/namespaces/team-a/network-attachment-definitions/rdma-claim",
          {{"apiVersion", "k8s.cni.cncf.io/v1"},
           {"kind", "NetworkAttachmentDefinition"},
           {"metadata",
            {{"name", "rdma-claim"},
             {"namespace", "team-a"},
             {"annotations", {{"k8s.v1.cni.cncf.io/resourceName", "trainer-0-nics-x7k2p"}}}}},
           {"spec", {{"config", conf.dump()}}}});
  REQUIRE(WriteFileAtomic(
      dir + "/kubeconfig",
      "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + api.base() +
          "\"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, "
          "context: {cluster: c, user: u}}]\ncurrent-context: x\n"));
  std::filesystem::create_symlink(kBin, dir + "/bin/rdma");
  std::filesystem::create_symlink("/usr/lib/cni/loopback", dir + "/bin/loopback");
  // Multus reads /var/lib/kubelet/pod-resources/kubelet.sock: the stand-in's, in a private mount
  // namespace of Multus alone.
  REQUIRE(WriteFileAtomic(dir + "/multus.sh",
                          "#!/bin/sh\nexec unshare -m --propagation private sh -c 'mount -t tmpfs "
                          "tmpfs /var/lib && mkdir -p /var/lib/kubelet/pod-resources && ln -s " +
                              kubelet.pod_resources_socket() +
                              " /var/lib/kubelet/pod-resources/kubelet.sock && exec " + multus +
                              "'\n"));
  REQUIRE(::chmod((dir + "/multus.sh").c_str(), 0755) == 0);
  json mconf = {
      {"cniVersion", "0.3.1"},
      {"name", "multus-cni-network"},
      {"type", "multus"},
      {"kubeconfig", dir + "/kubeconfig"},
      {"cniDir", dir + "/cache"},
      {"binDir", dir + "/bin"},
      {"confDir", dir + "/net.d"},
      {"logFile", dir + "/multus.log"},
      {"logLevel", "debug"},
      {"delegates", {{{"cniVersion", "0.3.1"}, {"name", "cluster"}, {"type", "loopback"}}}}};
  std::string pod = node.AddPod("trainer-0");
  CniCall add{"ADD",
              "sandbox-0",
              pod,
              "eth0",
              mconf.dump(),
              dir + "/bin",
              "IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=trainer-0;"
              "K8S_POD_INFRA_CONTAINER_ID=sandbox-0;K8S_POD_UID=" +
                  pod_uid};
  auto added = node.Run(dir + "/multus.sh", add);
  std::string multus_log = ReadFile(dir + "/multus.log").value_or("");
  INFO(added.out << added.err << "\n--- multus.log\n" << multus_log);
  REQUIRE(added.exit_code == 0);
  // Multus passed each CDI name's suffix as deviceID; the CNI found those HCAs of that claim.
  CHECK_THAT(multus_log, Catch::Contains(uid + "_0000:1a:00.0"));
  auto in_pod = [&](const std::string& name) {
    return node.links().GetByName(node.Pod(pod), name).has_value();
  };
  CHECK(in_pod("net1"));
  CHECK(in_pod("net2"));
  CHECK_FALSE(node.links().GetByName(node.node(), "ens1f0np0"));
  CHECK_FALSE(node.links().GetByName(node.node(), "ens2f0np0"));
  CHECK(node.links().GetByName(node.node(), "ens3f0np0"));  // not the claim's: untouched

  CniCall del = add;
  del.command = "DEL";
  auto deleted = node.Run(dir + "/multus.sh", del);
  INFO(deleted.out << deleted.err);
  CHECK(deleted.exit_code == 0);
  for (const auto& n : Roce8Netdevs()) CHECK(node.links().GetByName(node.node(), n));
}

}  // namespace
}  // namespace kuberdma::sim
