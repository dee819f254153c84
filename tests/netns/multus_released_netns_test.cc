// SPDX-License-Identifier: Apache-2.0
// A released Multus (v4.2.x-v4.3.0) attaching a pod's NICs that came from a DRA claim prepared by
// our own driver: the pod-resources path, for claims of 1, 2, 4 and 8 NICs attached through one
// NAD, under the kubelet's List as its code builds it (a claim's device k lists the CDI IDs of
// devices 1..k: standins/kubelet.h's CdiListing) and as a kubelet that fixes that loop would.
// Each NIC is attached once, the i-th attachment the claim's i-th device. Real peers where this
// machine has them: the Multus binary named by $KUBERDMA_MULTUS (built by hand from its release;
// nothing of it is in this repository), rdma-device-plugin answering the CNI's allocation check,
// Debian's loopback as the cluster network. Stand-ins: the kubelet's pod-resources API and the
// API server (the pod and the NADs); without $KUBERDMA_MULTUS, Multus' own stand-in
// (standins/multus.h) runs the same claims.
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
#include "kuberdma/cni/state.h"
#include "kuberdma/dra/prepare.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/api_server.h"
#include "kuberdma/standins/kubelet.h"
#include "kuberdma/standins/multus.h"
#include "node_device_plugin.h"
#include "per_hca.h"
#include "roce8_node.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;

// The claim the scheduler allocated: mlx5_0..mlx5_{n-1} of node n1, reserved for the pod.
json Claim(const std::string& uid, int n) {
  json results = json::array();
  for (int i = 0; i < n; ++i) {
    results.push_back({{"request", "nic-" + std::to_string(i)},
                       {"driver", dra::kDriverName},
                       {"pool", "n1/hca"},
                       {"device", "mlx5-" + std::to_string(i)}});
  }
  return {{"metadata", {{"name", "trainer-0-nics-x7k2p"}, {"namespace", "team-a"}, {"uid", uid}}},
          {"status",
           {{"allocation", {{"devices", {{"results", results}}}}},
            {"reservedFor", {{{"resource", "pods"}, {"name", "trainer-0"}, {"uid", "p"}}}}}}};
}

constexpr const char* kClaimName = "trainer-0-nics-x7k2p";

// A node whose claim of `n` NICs our driver prepared, listed by the kubelet stand-in as `listing`
// says, with rdma-device-plugin answering the CNI's allocation check.
struct ClaimNode {
  ClaimNode(int n, standins::CdiListing listing) : node(kRoce8, Roce8Netdevs()), kubelet(Dir()) {
    REQUIRE(WriteFileAtomic(node.node_config_path(), "{}"));  // the allocation check on
    sysfs::SysfsRoot root(kRoce8);
    deviceplugin::Resource r(testing::PerHcaResource(), root);
    r.Refresh(*sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
    dra::Preparer p(r, {.node = "n1"}, Dir() + "/cdi", node.allocations_dir());
    auto prepared = p.Prepare({.ns = "team-a", .uid = uid, .name = kClaimName}, Claim(uid, n));
    REQUIRE(prepared);
    REQUIRE(prepared->devices.size() == static_cast<size_t>(n));
    std::vector<standins::KubeletStandIn::ClaimDevice> devices;
    for (const auto& d : prepared->devices) {
      devices.push_back(
          {.driver = dra::kDriverName, .pool = d.pool, .device = d.device, .cdi_ids = {d.cdi_id}});
      own_cdi.push_back({d.cdi_id});
    }
    kubelet.set_cdi_listing(listing);
    kubelet_listing = listing;
    kubelet.AssignClaim("team-a", "trainer-0", kClaimName, devices);
    dp = std::make_unique<NodeDevicePlugin>(node, Dir(), kubelet);
    REQUIRE(dp->started());
    REQUIRE(kubelet.WaitFor([&] { return !kubelet.Lists("rdma/hca").empty(); },
                            std::chrono::seconds(10)));
  }
  std::string Dir() {
    const std::string d = node.state_dir() + "/mh";
    REQUIRE(MakeDirs(d + "/bin"));
    return d;
  }
  // Each attachment's HCA, in attachment order, from the plugin's records.
  std::vector<std::string> Attached(int n) {
    std::vector<std::string> out;
    for (int i = 1; i <= n; ++i) {
      auto rec = cni::StateStore(node.state_dir())
                     .Load("rdma-claim", "sandbox-0", "net" + std::to_string(i));
      out.push_back(rec && *rec ? (*rec)->hca : "none");
    }
    return out;
  }

  const std::string uid = "8c1f0000-0000-4000-8000-00000000000b";
  SimNode node;
  standins::KubeletStandIn kubelet;
  std::vector<std::vector<std::string>> own_cdi;
  standins::CdiListing kubelet_listing;
  std::unique_ptr<NodeDevicePlugin> dp;
};

std::vector<std::string> FirstHcas(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("mlx5_" + std::to_string(i));
  return out;
}

json RdmaConf(const SimNode& node) {
  return {{"cniVersion", "0.3.1"},
          {"name", "rdma-claim"},
          {"type", "kube-rdma"},
          {"stateDir", node.state_dir()}};
}

// Multus' stand-in over the same List: its i-th attachment of the claim's NAD gets the i-th
// device ID the List gives.
void StandInMultus(ClaimNode& c, int n) {
  auto ids = standins::PodResourcesDraAllocated(
      {{kClaimName, standins::ListedCdi(c.own_cdi, c.kubelet_listing)}});
  standins::MultusPod pod{
      .ns = "team-a", .name = "trainer-0", .uid = "p", .sandbox = "sandbox-0", .allocated = ids};
  for (int i = 0; i < n; ++i) pod.networks.emplace_back("rdma-claim", "");
  std::vector<Nad> nads = {
      {.name = "rdma-claim", .ns = "team-a", .resource = kClaimName, .config = RdmaConf(c.node)}};
  std::string netns = c.node.AddPod("trainer-0");
  auto adds = standins::MultusAdds(pod, nads, netns);
  REQUIRE(adds);
  for (const auto& call : *adds) {
    auto r = c.node.Run(kBin, call);
    INFO(call.ifname << ": " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  CHECK(c.Attached(n) == FirstHcas(n));
  for (const auto& call : standins::MultusDels(*adds)) CHECK(c.node.Run(kBin, call).exit_code == 0);
}

TEST_CASE("A claim of 1, 2, 4 or 8 NICs through one NAD attaches each NIC once, in claim order") {
  for (auto listing : {standins::CdiListing::kAccumulated, standins::CdiListing::kPerDevice}) {
    for (int n : {1, 2, 4, 8}) {
      INFO((listing == standins::CdiListing::kAccumulated ? "the kubelet's List"
                                                          : "a kubelet that fixes the loop")
           << ", " << n << " NICs");
      ClaimNode c(n, listing);
      StandInMultus(c, n);
      for (const auto& net : Roce8Netdevs()) CHECK(c.node.links().GetByName(c.node.node(), net));
    }
  }
}

// The real Multus binary over the stand-in kubelet's List and API server: a pod attaching the
// claim's NAD `n` times.
void RealMultus(ClaimNode& c, int n, const std::string& multus) {
  SimNode& node = c.node;
  const std::string dir = c.Dir();
  // Listening in the node's namespace (its loopback up), where Multus runs.
  auto lo = node.links().GetByName(node.node(), "lo");
  REQUIRE(lo);
  REQUIRE(node.links().Change(node.node(), lo->ifindex, {.up = true}));
  std::unique_ptr<standins::ApiStandIn> standin;
  REQUIRE(node.node().RunIn([&] { standin = std::make_unique<standins::ApiStandIn>(); }));
  standins::ApiStandIn& api = *standin;
  const std::string pods = "/api/v1/namespaces/team-a/pods/";
  std::string networks;
  for (int i = 0; i < n; ++i) networks += std::string(i ? "," : "") + "rdma-claim";
  api.Put(pods + "trainer-0", {{"apiVersion", "v1"},
                               {"kind", "Pod"},
                               {"metadata",
                                {{"name", "trainer-0"},
                                 {"namespace", "team-a"},
                                 {"annotations", {{"k8s.v1.cni.cncf.io/networks", networks}}}}},
                               {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}});
  const std::string pod_uid = (*api.Object(pods + "trainer-0"))["metadata"]["uid"];
  // The NAD's resourceName is the claim's name: the only key released Multus files DRA devices
  // under.
  api.Put("/apis/k8s.cni.cncf.io/v1/namespaces/team-a/network-attachment-definitions/rdma-claim",
          {{"apiVersion", "k8s.cni.cncf.io/v1"},
           {"kind", "NetworkAttachmentDefinition"},
           {"metadata",
            {{"name", "rdma-claim"},
             {"namespace", "team-a"},
             {"annotations", {{"k8s.v1.cni.cncf.io/resourceName", kClaimName}}}}},
           {"spec", {{"config", RdmaConf(node).dump()}}}});
  REQUIRE(WriteFileAtomic(
      dir + "/kubeconfig",
      "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + api.base() +
          "\"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, "
          "context: {cluster: c, user: u}}]\ncurrent-context: x\n"));
  std::filesystem::create_symlink(kBin, dir + "/bin/kube-rdma");
  std::filesystem::create_symlink("/usr/lib/cni/loopback", dir + "/bin/loopback");
  // Multus reads /var/lib/kubelet/pod-resources/kubelet.sock: the stand-in's, in a private mount
  // namespace of Multus alone.
  REQUIRE(WriteFileAtomic(dir + "/multus.sh",
                          "#!/bin/sh\nexec unshare -m --propagation private sh -c 'mount -t tmpfs "
                          "tmpfs /var/lib && mkdir -p /var/lib/kubelet/pod-resources && ln -s " +
                              c.kubelet.pod_resources_socket() +
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
      // Its log to the file only: stderr is a pipe read once it exits, and 8 attachments' debug
      // lines fill the pipe (Multus then blocks in write(2) for good).
      {"logToStderr", false},
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
  CHECK_THAT(multus_log, Catch::Contains(c.uid + "_0000:1a:00.0"));
  CHECK(c.Attached(n) == FirstHcas(n));
  for (int i = n; i < 8; ++i) {  // not the claim's: untouched
    CHECK(node.links().GetByName(node.node(), Roce8Netdevs()[static_cast<size_t>(i)]));
  }
  CniCall del = add;
  del.command = "DEL";
  auto deleted = node.Run(dir + "/multus.sh", del);
  INFO(deleted.out << deleted.err);
  CHECK(deleted.exit_code == 0);
  for (const auto& net : Roce8Netdevs()) CHECK(node.links().GetByName(node.node(), net));
}

TEST_CASE("Released Multus attaches a claim of 1, 2, 4 or 8 NICs through the kubelet's List") {
  const char* multus = std::getenv("KUBERDMA_MULTUS");
  if (multus == nullptr || ::access(multus, X_OK) != 0) {
    WARN("skipped: set KUBERDMA_MULTUS to a Multus v4.2.x-v4.3.0 binary (docs/dra.md)");
    return;
  }
  for (auto listing : {standins::CdiListing::kAccumulated, standins::CdiListing::kPerDevice}) {
    for (int n : {1, 2, 4, 8}) {
      INFO((listing == standins::CdiListing::kAccumulated ? "the kubelet's List"
                                                          : "a kubelet that fixes the loop")
           << ", " << n << " NICs");
      ClaimNode c(n, listing);
      RealMultus(c, n, multus);
    }
  }
}

}  // namespace
}  // namespace kuberdma::sim
