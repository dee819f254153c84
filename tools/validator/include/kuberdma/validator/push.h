// SPDX-License-Identifier: Apache-2.0
// A fleet report's gauges for Prometheus, pushed to a Pushgateway so that alerts (deploy/'s
// PrometheusRule) see every acceptance run.
//
// The push client (prometheus-cpp's, over libcurl) lives in a module, rdma-validate-push.so,
// that rdma-validate loads only when --push-gateway is given: the validator itself keeps needing
// nothing but glibc (NCCL is opened at run time), so it runs in any job image.
//
//   auto samples = AcceptanceSamples(report.ToJson());
//   KUBERDMA_TRY(Push(samples, "http://pushgateway.monitoring:9091"));   // loads the module
//
// Gauges (job="kuberdma-acceptance"): kuberdma_acceptance_pass, _ring_busbw_gbps,
// _timestamp_seconds, _node_pass{node}, _node_busbw_gbps{node}, _hca_busbw_gbps{node,hca},
// _hca_share{node,hca}, _regressions{node}.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::validator {

inline constexpr const char* kPushJob = "kuberdma-acceptance";
inline constexpr const char* kPushModule = "rdma-validate-push.so";

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
  std::string help;
};

// The names of the gauges a push carries (deploy/'s alert rules are checked against them).
const std::vector<std::string>& AcceptanceMetricNames();

// The gauges of a fleet report (FleetReport::ToJson's document), at Unix time `now`.
std::vector<Sample> AcceptanceSamples(const nlohmann::json& report, double now);

// The push itself, as the module does it (prometheus-cpp): the samples to the Pushgateway at `url`
// ("http://host:port"), replacing the job's group. kIo naming the URL and HTTP status on failure.
Result<void> PushSamples(const std::vector<Sample>& samples, const std::string& url);
// The samples in the text exposition format, as the push sends them.
std::string RenderSamples(const std::vector<Sample>& samples);

// Loads the module (beside the binary, in ../lib/kube-rdma, or on the library path) and pushes.
// kUnsupported naming where it looked when the module or its libraries are missing.
Result<void> Push(const std::vector<Sample>& samples, const std::string& url);

}  // namespace kuberdma::validator
