// SPDX-License-Identifier: Apache-2.0
// Rendered objects read back: YAML typing, NADs, pod templates, and what is refused.
#include "kuberdma/sim/manifests.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/base/files.h"
#include "kuberdma/standins/multus.h"

namespace kuberdma::sim {
namespace {

using nlohmann::json;

struct TempYaml {
  explicit TempYaml(const std::string& text)
      : path(std::filesystem::temp_directory_path() /
             ("kuberdma-manifests-" + std::to_string(::getpid()) + ".yaml")) {
    REQUIRE(WriteFileAtomic(path, text));
  }
  ~TempYaml() { std::filesystem::remove(path); }
  std::string path;
};

TEST_CASE("Rendered YAML keeps quoted scalars strings and types plain ones") {
  TempYaml f(R"(---
# Source: a comment-only document is skipped
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: kube-rdma}
data:
  quoted: "0"
  plain.json: |
    {"a": 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: main
          env:
            - {name: A, value: "1"}
            - {name: B, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
          resources: {limits: {rdma/hca: 2, memory: 128Mi, on: yes}}
)");
  auto r = LoadRendered(f.path);
  REQUIRE(r);
  REQUIRE(r->objects.size() == 2);
  CHECK(r->objects[0]["data"]["quoted"] == "0");
  CHECK(*r->ConfigMapData("plain.json") == "{\"a\": 1}\n");
  CHECK(r->ConfigMapData("missing").error().code() == ErrorCode::kNotFound);
  auto w = r->Workloads();
  REQUIRE(w.size() == 1);
  CHECK(w[0].Describe() == "Deployment /d");
  CHECK(w[0].replicas == 3);
  // valueFrom is not a literal: only A.
  CHECK(w[0].main.env == std::vector<std::pair<std::string, std::string>>{{"A", "1"}});
  // Only integer limits: "128Mi" and YAML 1.1's `yes` (a string in 1.2) are not counts.
  CHECK(w[0].main.limits == std::map<std::string, int64_t>{{"rdma/hca", 2}});
  CHECK(r->Summary() == "ConfigMap kube-rdma/c, Deployment d");
}

TEST_CASE("Broken YAML is refused with where it broke, a missing file is kNotFound") {
  TempYaml f("kind: ConfigMap\ndata: {a: [1, 2\n");
  auto r = LoadRendered(f.path);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(r.error().message(), Catch::Contains("line"));
  CHECK(LoadRendered("/nonexistent/x.yaml").error().code() == ErrorCode::kNotFound);
}

TEST_CASE("deploy/manifests' StatefulSet and NAD read as Multus and the kubelet see them") {
  auto nad =
      LoadRendered(std::string(KUBERDMA_DEPLOY) + "/manifests/30-networkattachmentdefinition.yaml");
  REQUIRE(nad);
  auto nads = nad->Nads();
  REQUIRE(nads.size() == 1);
  CHECK(nads[0].resource == "rdma/hca");
  CHECK(nads[0].config["type"] == "kube-rdma");
  CHECK(nads[0].config["name"] == nads[0].name);
  auto sts =
      LoadRendered(std::string(KUBERDMA_DEPLOY) + "/kustomize/example-trainer/statefulset.yaml");
  REQUIRE(sts);
  auto w = sts->Workloads();
  REQUIRE(w.size() == 1);
  CHECK(w[0].kind == "StatefulSet");
  auto networks = standins::ParseNetworksAnnotation(w[0].networks);
  REQUIRE(networks);
  CHECK(static_cast<int64_t>(networks->size()) == w[0].main.limits.at("rdma/hca"));
  // The copy from the node image, then rdma-validate in the trainer's own image.
  REQUIRE(w[0].init_containers.size() == 2);
  CHECK(w[0].init_containers[0].name == "rdma-validate-copy");
  const Container* v = w[0].Validator();
  REQUIRE(v != nullptr);
  CHECK(v->image == w[0].main.image);
  CHECK(v->command == std::vector<std::string>{"/kube-rdma/bin/rdma-validate"});
  CHECK_THAT(v->args, Catch::VectorContains(std::string("--require-nccl")));
}

}  // namespace
}  // namespace kuberdma::sim
