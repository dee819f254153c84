// SPDX-License-Identifier: Apache-2.0
// rdma-doctor cabling: the fleet's view from each node's document, and documents that are not
// ours (not JSON, the wrong shape, hostile names) named, never fatal.
#include <catch2/catch.hpp>

#include "kuberdma/doctor/doctor.h"

namespace kuberdma::doctor {
namespace {

using nlohmann::json;

std::string NodeDoc(const std::string& node, const std::vector<std::string>& switches) {
  json cabling = json::array();
  for (size_t i = 0; i < switches.size(); ++i) {
    cabling.push_back(
        {{"rail", i + 1},
         {"hca", "mlx5_" + std::to_string(i)},
         {"netdev", "ens" + std::to_string(i + 1) + "f0np0"},
         {"neighbor", {{"chassisId", "c"}, {"portId", "swp1"}, {"systemName", switches[i]}}}});
  }
  return json{{"view", "node"}, {"result", {{"node", node}, {"cabling", cabling}}}}.dump();
}

const Finding* Find(const View& v, const std::string& check, Status s) {
  for (const auto& f : v.findings) {
    if (f.check == check && f.status == s) return &f;
  }
  return nullptr;
}

TEST_CASE("The fleet's cabling names the node whose rail is on another rail's leaf") {
  View v = FleetCablingView({{"a.json", NodeDoc("gpu-1", {"leaf-1", "leaf-2"})},
                             {"b.json", NodeDoc("gpu-2", {"leaf-1", "leaf-2"})},
                             {"c.json", NodeDoc("gpu-3", {"leaf-2", "leaf-2"})}});
  const Finding* f = Find(v, "fleet-cabling", Status::kFail);
  REQUIRE(f != nullptr);
  CHECK(f->message ==
        "gpu-3 rail 1 (mlx5_0, ens1f0np0) is cabled to leaf-2 (rail 2's switch), not leaf-1");
  CHECK(v.ExitCode() == 1);
  CHECK(v.doc["nodes"]["gpu-3"]["1"] == "leaf-2");
  CHECK(v.doc["labels"]["gpu-1"]["topology.kube-rdma.io/rail-1-leaf"] == "leaf-1");
  CHECK(v.doc["labels"]["gpu-1"]["topology.kube-rdma.io/block"] ==
        v.doc["labels"]["gpu-2"]["topology.kube-rdma.io/block"]);
  CHECK_THAT(LabelCommands(v), Catch::Contains("kubectl label node gpu-3 --overwrite "
                                               "topology.kube-rdma.io/block=leaf-2 "
                                               "topology.kube-rdma.io/rail-1-leaf=leaf-2"));
}

TEST_CASE("Documents that are not a node's cabling are named and hostile names escaped") {
  std::string hostile = NodeDoc("gpu-\x1b[31m", {"leaf-1\n"});
  View v = FleetCablingView(
      {{"junk.json", "not json"},
       {"pod.json", R"({"view": "pod", "result": {}})"},
       {"shape.json", R"({"result": {"cabling": [1, {"rail": "x"}, {"rail": 1, "neighbor": 7}]}})"},
       {"hostile.json", hostile}});
  int named = 0;
  for (const auto& f : v.findings) {
    if (f.check == "fleet-cabling-input") ++named;
  }
  CHECK(named == 2);  // junk.json and pod.json; the other two parse, their bad entries skipped
  CHECK(v.doc["nodes"].contains("gpu-\\x1b[31m"));
  CHECK(v.doc["nodes"]["gpu-\\x1b[31m"]["1"] == "leaf-1\\x0a");
  CHECK(v.doc["nodes"]["shape.json"]["1"] == "");
  CHECK(Render(v).find('\x1b') == std::string::npos);
  // A node name that is not one gets no labels, so no command with its text.
  CHECK_FALSE(v.doc["labels"].contains("gpu-\\x1b[31m"));
  CHECK(LabelCommands(v).find("x1b") == std::string::npos);
}

}  // namespace
}  // namespace kuberdma::doctor
