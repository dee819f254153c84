// SPDX-License-Identifier: Apache-2.0
// What a cluster is given, read back: the objects of a `helm template` rendering or of
// deploy/manifests (deploy/render.sh writes both), for the demo and the namespace tests to run the
// shipped NADs, device plugin config and pod specs instead of copies written for them.
//
//   auto r = LoadRendered("build/ci/rendered/roce-values.yaml");
//   for (const Workload& w : r->Workloads()) ... w.networks, w.main.limits.at("rdma/hca") ...
//
// Only the fields those runs use are modelled; the objects themselves stay available as JSON.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::sim {

// A NetworkAttachmentDefinition as the cluster has it.
struct Nad {
  std::string name;
  std::string ns = "default";
  std::string resource;   // k8s.v1.cni.cncf.io/resourceName, "" when none
  nlohmann::json config;  // spec.config, parsed
};

struct Container {
  std::string name, image;
  std::vector<std::string> command, args;
  std::vector<std::pair<std::string, std::string>> env;  // literal values (valueFrom is skipped)
  std::map<std::string, int64_t> limits;                 // integer resource limits
};

// A pod template and what owns it: a StatefulSet, Deployment, Job or CronJob.
struct Workload {
  std::string kind, name, ns;
  int replicas = 1;      // StatefulSet/Deployment replicas, Job parallelism (a Pod: 1)
  std::string networks;  // the k8s.v1.cni.cncf.io/networks annotation, "" when none
  std::vector<Container> init_containers;
  Container main;     // the first container
  std::string claim;  // a ResourceClaim it names (resourceClaimName), "" when none
  std::string Describe() const { return kind + " " + ns + "/" + name; }
  // The init container that runs rdma-validate (the chart's "rdma-validate", after the step that
  // copies it from the node image), or nullptr.
  const Container* Validator() const {
    for (const auto& c : init_containers)
      if (c.name == "rdma-validate") return &c;
    return nullptr;
  }
};

struct Rendered {
  std::string source;                   // the file read
  std::vector<nlohmann::json> objects;  // every document that is an object with a kind

  std::vector<Nad> Nads() const;
  std::vector<Workload> Workloads() const;
  // data[key] of the first ConfigMap that has it; kNotFound when none does.
  Result<std::string> ConfigMapData(const std::string& key) const;
  // "ConfigMap kube-rdma/kube-rdma-config, NetworkAttachmentDefinition default/rdma-rail1, ...":
  // the objects of the kinds above, for a run to say what it ran.
  std::string Summary() const;
};

// Reads every YAML document of `path` (plain scalars typed as YAML 1.2's core schema: null, bool,
// integers and floats; quoted ones stay strings). kNotFound when the file is missing,
// kInvalidArgument with the line when it does not parse.
Result<Rendered> LoadRendered(const std::string& path);

}  // namespace kuberdma::sim
