// SPDX-License-Identifier: Apache-2.0
// A fleet report's gauges, and loading the push module (push_module.cc) when a push is asked for.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <map>
#include <utility>

#include "kuberdma/validator/module.h"
#include "kuberdma/validator/push.h"

namespace kuberdma::validator {

using nlohmann::json;

namespace {

double Number(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : -1;
}

// Every gauge a push carries, with its help text: the one table (AcceptanceMetricNames).
const std::map<std::string, std::string>& Families() {
  static const std::map<std::string, std::string> kFamilies = {
      {"kuberdma_acceptance_pass", "1 if the whole fleet passed acceptance."},
      {"kuberdma_acceptance_ring_busbw_gbps", "The fleet ring AllReduce's busbw (GB/s)."},
      {"kuberdma_acceptance_timestamp_seconds", "When the acceptance ran (Unix time)."},
      {"kuberdma_acceptance_node_pass", "1 if the node passed acceptance."},
      {"kuberdma_acceptance_node_busbw_gbps", "The node's pair busbw (GB/s)."},
      {"kuberdma_acceptance_hca_busbw_gbps", "An HCA's pair busbw (GB/s)."},
      {"kuberdma_acceptance_hca_share", "An HCA's share of its node's ring bytes."},
      {"kuberdma_acceptance_regressions", "Regressions against the baseline."}};
  return kFamilies;
}

Sample Gauge(const std::string& name, std::map<std::string, std::string> labels, double value) {
  return {name, std::move(labels), value, Families().at(name)};
}

void NodeSamples(const json& n, std::vector<Sample>& out) {
  std::string node = n.value("name", "");
  out.push_back(Gauge("kuberdma_acceptance_node_pass", {{"node", node}},
                      n.value("verdict", "") == "pass" ? 1.0 : 0.0));
  if (double bw = Number(n, "busbwGBps"); bw >= 0) {
    out.push_back(Gauge("kuberdma_acceptance_node_busbw_gbps", {{"node", node}}, bw));
  }
  double regressions = 0;
  for (const auto& p : n.value("problems", json::array())) {
    regressions += p.is_string() && p.get<std::string>().rfind("regression", 0) == 0 ? 1 : 0;
  }
  out.push_back(Gauge("kuberdma_acceptance_regressions", {{"node", node}}, regressions));
  for (const auto& h : n.value("hcas", json::array())) {
    std::map<std::string, std::string> labels = {{"node", node}, {"hca", h.value("name", "")}};
    if (double bw = Number(h, "busbwGBps"); bw >= 0) {
      out.push_back(Gauge("kuberdma_acceptance_hca_busbw_gbps", labels, bw));
    }
    if (double share = Number(h, "share"); share >= 0) {
      out.push_back(Gauge("kuberdma_acceptance_hca_share", labels, share));
    }
  }
}

using PushFn = int (*)(const char* samples_json, const char* url, char* err, size_t err_len);

}  // namespace

const std::vector<std::string>& AcceptanceMetricNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& [name, help] : Families()) names.push_back(name);
    return names;
  }();
  return kNames;
}

std::vector<Sample> AcceptanceSamples(const json& report, double now) {
  double ring = report.contains("ring") ? std::max(0.0, Number(report["ring"], "busbwGBps")) : 0.0;
  std::vector<Sample> out = {
      Gauge("kuberdma_acceptance_pass", {}, report.value("verdict", "") == "pass" ? 1.0 : 0.0),
      Gauge("kuberdma_acceptance_ring_busbw_gbps", {}, ring),
      Gauge("kuberdma_acceptance_timestamp_seconds", {}, now)};
  for (const auto& n : report.value("nodes", json::array())) NodeSamples(n, out);
  return out;
}

Result<void> Push(const std::vector<Sample>& samples, const std::string& url) {
  auto sym = ModuleSymbol(kPushModule, "kuberdma_push_samples",
                          "prometheus-cpp's push library and libcurl");
  if (!sym)
    return Fail(ErrorCode::kUnsupported, "push to " + url + " skipped: " + sym.error().message());
  auto fn = reinterpret_cast<PushFn>(*sym);
  json doc = json::array();
  for (const auto& s : samples)
    doc.push_back({{"name", s.name}, {"labels", s.labels}, {"value", s.value}, {"help", s.help}});
  char err[512] = "";
  if (fn(doc.dump().c_str(), url.c_str(), err, sizeof err) != 0) return Fail(ErrorCode::kIo, err);
  return {};
}

}  // namespace kuberdma::validator
