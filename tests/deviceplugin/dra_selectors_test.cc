// SPDX-License-Identifier: Apache-2.0
// Every CEL selector we ship (docs/dra.md's cookbook, the chart's DeviceClass; the demo's use the
// cookbook's forms) evaluated against every device of our fixtures with CEL's semantics, as
// kube-scheduler evaluates it: a selector that names an attribute some device lacks, unguarded
// by has(), is an error there that fails the whole allocation, so it fails here.
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <sstream>

#include "kuberdma/dra/slices.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/standins/allocator.h"
#include "kuberdma/sysfs/topology.h"
#include "per_hca.h"

namespace kuberdma::dra {
namespace {

using standins::EvaluateSelector;
using standins::StandInGpuSlice;

using nlohmann::json;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The selectors in `text`: `expression: '...'` (the cookbook) or `expression: device...` (the
// chart's template), those that select on a device.
std::vector<std::string> Shipped(const std::string& text) {
  std::vector<std::string> out;
  std::regex quoted(R"(expression: '([^']*)')");
  std::regex bare(R"(expression: (device\.[^\n]*))");
  for (const auto& re : {quoted, bare}) {
    for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
      std::string e = (*it)[1];
      if (e.find("device.") != std::string::npos) out.push_back(e);
    }
  }
  return out;
}

// Our devices on `fixture` (every port, a port down too: its attributes are the same) and
// NVIDIA's stand-in GPUs.
std::vector<std::pair<std::string, json>> Devices(const std::string& fixture) {
  sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + fixture);
  auto hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  // Rails in PCI order, as a node config declaring them would give.
  rails::NodeRoles roles;
  for (size_t i = 0; i < hcas.size(); ++i)
    roles.by_hca[hcas[i].name].rail = static_cast<int>(i) + 1;
  deviceplugin::Resource r(testing::PerHcaResource(), root);
  r.Refresh(hcas, &roles);
  std::vector<std::pair<std::string, json>> out;
  auto published = ResourceSlices(r, {.node = "n1"}, &roles);
  REQUIRE(published);
  for (const auto& s : published->objects) {
    for (const auto& d : s["spec"]["devices"]) out.emplace_back(kDriverName, d);
  }
  auto gpus = sysfs::DiscoverGpus(root);
  if (gpus && !gpus->empty()) {
    json slice = StandInGpuSlice("n1", *gpus);
    for (const auto& d : slice["spec"]["devices"]) out.emplace_back("gpu.nvidia.com", d);
  }
  return out;
}

TEST_CASE("Every shipped selector evaluates without error on every device of every fixture") {
  std::vector<std::string> selectors = Shipped(Read(std::string(KUBERDMA_DOCS) + "/dra.md"));
  size_t from_docs = selectors.size();
  for (const auto& e :
       Shipped(Read(std::string(KUBERDMA_DEPLOY) + "/helm/kube-rdma/templates/dra.yaml"))) {
    selectors.push_back(e);
  }
  REQUIRE(from_docs >= 8);  // the cookbook is read, not skipped
  REQUIRE(selectors.size() > from_docs);
  size_t evaluated = 0;
  std::map<std::string, int> matched;
  for (const char* fixture : {"roce8", "ib8", "sriov", "sriov-ib"}) {
    auto devices = Devices(fixture);
    REQUIRE_FALSE(devices.empty());
    for (const auto& e : selectors) {
      // Template text ({{ ... }}) stands for the DeviceClass's driver.
      std::string expr = std::regex_replace(e, std::regex(R"(\{\{[^}]*\}\})"), kDriverName);
      for (const auto& [driver, device] : devices) {
        // A request's selectors meet only devices of its class: a GPU selector, GPUs.
        bool gpu_selector = expr.find("gpu.nvidia.com") != std::string::npos;
        if (gpu_selector != (driver == "gpu.nvidia.com") &&
            expr.find("device.driver") == std::string::npos)
          continue;
        auto ok = EvaluateSelector(expr, driver, device);
        INFO(fixture << ": `" << expr << "` on " << device["name"]);
        REQUIRE(ok);
        ++evaluated;
        if (*ok) ++matched[expr];
      }
    }
  }
  CHECK(evaluated > 100);
  // Each selects something somewhere: none is a typo that matches nothing.
  for (const auto& e : selectors) {
    std::string expr = std::regex_replace(e, std::regex(R"(\{\{[^}]*\}\})"), kDriverName);
    INFO(expr);
    CHECK(matched[expr] > 0);
  }
}

TEST_CASE(
    "An unguarded selector on an attribute some devices lack is the error a scheduler gives") {
  auto devices = Devices("sriov");
  bool errored = false;
  for (const auto& [driver, device] : devices) {
    if (driver != kDriverName) continue;
    auto r = EvaluateSelector(
        R"(device.attributes["rdma.kube-rdma.io"].pfPciAddress == "0000:1b:00.0")", driver, device);
    if (!r) {
      errored = true;
      CHECK_THAT(r.error().message(), Catch::Contains("no such key: pfPciAddress"));
    }
    // Guarded, or decided false by another term first: no error.
    CHECK(EvaluateSelector(
        R"(has(device.attributes["rdma.kube-rdma.io"].pfPciAddress) && device.attributes["rdma.kube-rdma.io"].pfPciAddress == "x")",
        driver, device));
  }
  CHECK(errored);  // a PF of the fixture lacks it
}

}  // namespace
}  // namespace kuberdma::dra
