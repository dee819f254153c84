// SPDX-License-Identifier: Apache-2.0
// The node's topology labels on its Node object, against the API server stand-in: set, changed,
// our stale ones removed, nobody else's touched, nothing sent when nothing changed.
#include "kuberdma/dra/node_labels.h"

#include <catch2/catch.hpp>

#include "kuberdma/standins/api_server.h"

namespace kuberdma::dra {
namespace {

using standins::ApiStandIn;

using nlohmann::json;

TEST_CASE("Topology labels land on the node's own Node and others' labels and nodes are kept") {
  ApiStandIn api;
  ApiServer conn{.base = api.base(), .attempts = 2};
  const std::string node = "/api/v1/nodes/gpu-node-7";
  api.Put(node, {{"metadata",
                  {{"name", "gpu-node-7"},
                   {"labels",
                    {{"kubernetes.io/hostname", "gpu-node-7"},
                     {"topology.kube-rdma.io/rail-9-leaf", "gone"},
                     {"topology.kube-rdma.io/rail-1-leaf", "leaf-0"}}}}}});
  api.Put("/api/v1/nodes/gpu-node-8", {{"metadata", {{"name", "gpu-node-8"}}}});
  std::map<std::string, std::string> labels = {{"topology.kube-rdma.io/rail-1-leaf", "leaf-1"},
                                               {"topology.kube-rdma.io/block", "b-1234abcd"}};
  REQUIRE(ApplyTopologyLabels(conn, "gpu-node-7", labels));
  json have = api.Object(node)->at("metadata").at("labels");
  CHECK(have == json{{"kubernetes.io/hostname", "gpu-node-7"},
                     {"topology.kube-rdma.io/rail-1-leaf", "leaf-1"},
                     {"topology.kube-rdma.io/block", "b-1234abcd"}});
  CHECK_FALSE(api.Object("/api/v1/nodes/gpu-node-8")->at("metadata").contains("labels"));
  size_t requests = api.requests().size();
  REQUIRE(ApplyTopologyLabels(conn, "gpu-node-7", labels));  // unchanged: a GET, no PATCH
  REQUIRE(api.requests().size() == requests + 1);
  CHECK(api.requests().back().rfind("GET ", 0) == 0);
}

TEST_CASE("Topology labels outside our prefix, or not labels, are refused before any request") {
  ApiStandIn api;
  ApiServer conn{.base = api.base(), .attempts = 1};
  for (const auto& bad : std::vector<std::map<std::string, std::string>>{
           {{"kubernetes.io/hostname", "x"}},
           {{"topology.kube-rdma.io/rail-1-leaf", "leaf 1"}},
           {{"topology.kube-rdma.io/", "x"}}}) {
    auto r = ApplyTopologyLabels(conn, "gpu-node-7", bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kInvalidArgument);
  }
  CHECK_FALSE(ApplyTopologyLabels(conn, "../nodes/x", {}));
  CHECK(api.requests().empty());
  auto missing = ApplyTopologyLabels(conn, "gpu-node-9", {});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kuberdma::dra
