// SPDX-License-Identifier: Apache-2.0
// The Multus stand-in's DRA path: a claim's devices become a resource's device IDs through their
// k8s.cni.cncf.io attributes, in result order; other drivers' devices (GPUs) are not networks.
#include "kuberdma/standins/multus.h"

#include <catch2/catch.hpp>

#include "kuberdma/standins/kubelet.h"

namespace kuberdma::standins {
namespace {

using nlohmann::json;

json Device(const std::string& name, const std::string& resource, const std::string& id) {
  json a = json::object();
  if (!resource.empty()) a["k8s.cni.cncf.io/resourceName"] = {{"string", resource}};
  if (!id.empty()) a["k8s.cni.cncf.io/deviceID"] = {{"string", id}};
  return {{"name", name}, {"attributes", a}};
}

TEST_CASE("Multus' DRA path: deviceIDs of the claim's devices whose resourceName is the NAD's") {
  std::vector<json> slices = {
      {{"spec",
        {{"driver", "rdma.kube-rdma.io"},
         {"pool", {{"name", "n/hca"}}},
         {"devices",
          {Device("mlx5-0", "rdma/hca", "0000:1a:00.0"),
           Device("mlx5-1", "rdma/hca", "0000:1b:00.0"), Device("mlx5-2", "", "0000:3c:00.0")}}}}},
      {{"spec",
        {{"driver", "gpu.nvidia.com"},
         {"pool", {{"name", "n"}}},
         {"devices", {Device("gpu-0", "", "")}}}}}};
  auto result = [](const std::string& driver, const std::string& pool, const std::string& dev) {
    return json{{"request", "r"}, {"driver", driver}, {"pool", pool}, {"device", dev}};
  };
  json alloc = {
      {"devices",
       {{"results",
         {result("gpu.nvidia.com", "n", "gpu-0"), result("rdma.kube-rdma.io", "n/hca", "mlx5-1"),
          result("rdma.kube-rdma.io", "n/hca", "mlx5-0"),
          result("rdma.kube-rdma.io", "n/hca", "mlx5-2"),
          result("rdma.kube-rdma.io", "other/hca", "mlx5-0")}}}}};
  auto got = DraAllocated({alloc}, slices);
  REQUIRE(got.size() == 1);
  // In the allocation's order; a device without a resourceName, or of a pool no slice has, is
  // not a network.
  CHECK(got["rdma/hca"] == std::vector<std::string>{"0000:1b:00.0", "0000:1a:00.0"});
  CHECK(DraAllocated({}, slices).empty());
}

TEST_CASE("Released Multus' DRA path: a claim's CDI names after '=' under the claim's name") {
  // What the kubelet's pod-resources List says of a pod with two claims (dynamic_resources).
  const std::string uid = "8c1f0000-0000-4000-8000-00000000000b";
  const std::string a = "kube-rdma.io/hca=" + uid + "_0000:1a:00.0";
  const std::string b = "kube-rdma.io/hca=" + uid + "_0000:1b:00.0";
  std::map<std::string, std::vector<std::vector<std::string>>> claims = {
      {"trainer-0-nics", {{a}, {b, "broken-no-equals", "a=b=c"}}},
      {"trainer-0-gpus", {{"k8s.gpu.nvidia.com/gpu=gpu-0"}}}};
  auto got = PodResourcesDraAllocated(claims);
  // A NAD whose resourceName is "trainer-0-nics" gets these as deviceID in turn; a malformed CDI
  // name is skipped, as Multus skips it.
  CHECK(got["trainer-0-nics"] ==
        std::vector<std::string>{uid + "_0000:1a:00.0", uid + "_0000:1b:00.0"});
  CHECK(got["trainer-0-gpus"] == std::vector<std::string>{"gpu-0"});
  CHECK(PodResourcesDraAllocated({}).empty());
  // Under the kubelet's own List, device 2 lists device 1's CDI ID too: attachment 2 is given
  // device 1 again (the CNI then takes the claim's next device: docs/dra.md).
  auto listed = ListedCdi({{a}, {b}}, CdiListing::kAccumulated);
  CHECK(listed == std::vector<std::vector<std::string>>{{a}, {a, b}});
  CHECK(PodResourcesDraAllocated({{"nics", listed}})["nics"] ==
        std::vector<std::string>{uid + "_0000:1a:00.0", uid + "_0000:1a:00.0",
                                 uid + "_0000:1b:00.0"});
  CHECK(ListedCdi({{a}, {b}}, CdiListing::kPerDevice) ==
        std::vector<std::vector<std::string>>{{a}, {b}});
}

}  // namespace
}  // namespace kuberdma::standins
