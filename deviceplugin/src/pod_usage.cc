// SPDX-License-Identifier: Apache-2.0
// kuberdma_pod_hca_info on scrape, from a cached answer of who holds what.
#include "kuberdma/deviceplugin/pod_usage.h"

#include <spdlog/spdlog.h>

#include "kuberdma/base/log_text.h"

namespace kuberdma::deviceplugin {

std::vector<prometheus::MetricFamily> PodHcaInfo::Collect() const {
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (!ever_ || now - at_ >= refresh_) {
    at_ = now;
    auto got = source_();
    if (got) {
      last_ = std::move(*got);
      ever_ = true;
      stale_ = false;
    } else if (!stale_) {  // said once until the kubelet answers again
      spdlog::warn("event=pod_hca_info_stale error={}", LogQuoted(got.error().message()));
      stale_ = true;
    }
  }
  prometheus::MetricFamily fam{kPodHcaInfo,
                               "1 for each HCA (or VF) a pod holds, by the kubelet's allocation or "
                               "a prepared DRA claim: join port counters on hca for per-pod usage.",
                               prometheus::MetricType::Gauge,
                               {}};
  for (const auto& [pod, hcas] : last_) {
    auto slash = pod.find('/');
    std::string ns = slash == std::string::npos ? "" : pod.substr(0, slash);
    std::string name = slash == std::string::npos ? pod : pod.substr(slash + 1);
    for (const auto& h : hcas) {
      prometheus::ClientMetric m;
      m.label = {{"hca", h}, {"namespace", ns}, {"pod", name}};
      m.gauge.value = 1;
      fam.metric.push_back(std::move(m));
    }
  }
  return {std::move(fam)};
}

}  // namespace kuberdma::deviceplugin
