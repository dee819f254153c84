// SPDX-License-Identifier: Apache-2.0
// The kubelet's pod-resources client (podresources.cc) as rdma-doctor uses it, and the
// checkpoint it falls back to.
#include "kuberdma/deviceplugin/podresources.h"

#include <catch2/catch.hpp>

#include "kuberdma/doctor/doctor.h"
#include "plugin_node.h"

namespace kuberdma::deviceplugin::testing {
namespace {

TEST_CASE(
    "rdma-doctor reads allocations from the pod-resources API, and the checkpoint when it is "
    "absent") {
  Node n;
  std::string sock = n.dir + "/pod-resources.sock";
  FakePodResources svc;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + sock, grpc::InsecureServerCredentials());
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  REQUIRE(server);
  auto listed = ListPodResources(sock, 2000ms);
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK(listed->at(0).pod == "default/llm-trainer-0");
  CHECK(listed->at(0).device_ids == std::vector<std::string>{"pool-shared-007"});

  doctor::Inputs in{.root = sysfs::SysfsRoot(n.dir + "/root")};
  in.state_dir = n.dir + "/state";
  in.plugin_dir = n.dir + "/plugins";
  in.pod_resources = sock;
  auto v = doctor::NodeView(in);
  CHECK(v.doc["allocationsSource"] == "pod-resources API");
  REQUIRE(v.doc["allocations"].size() == 1);  // rdma/* only
  CHECK(v.doc["allocations"][0]["pod"] == "default/llm-trainer-0");
  server->Shutdown();
  server.reset();
  in.pod_resources = n.dir + "/absent.sock";
  REQUIRE(WriteFileAtomic(
      n.dir + "/plugins/kubelet_internal_checkpoint",
      R"({"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"rdma/shared","DeviceIDs":["shared-001"]}]}})"));
  auto fallback = doctor::NodeView(in);
  CHECK(fallback.doc["allocationsSource"].get<std::string>().rfind("checkpoint", 0) == 0);
  CHECK(fallback.doc["allocations"].size() == 1);
  CHECK_FALSE(ListPodResources(n.dir + "/absent.sock", 300ms));
}

}  // namespace
}  // namespace kuberdma::deviceplugin::testing
