// SPDX-License-Identifier: Apache-2.0
// Which pod holds which HCA, as a Prometheus info series, so that every port counter can be read
// per pod and rail for as long as a job runs (deploy/monitoring's recording rules join the two):
//
//   kuberdma_pod_hca_info{hca="mlx5_3", namespace="team-a", pod="trainer-0"} 1
//
// Built on scrape from the kubelet's pod-resources answer (our resources' HCAs) and the DRA
// driver's claim records, at most once per `refresh` however often /metrics is asked (the port
// is on the node network: a client that scrapes in a loop must not load the kubelet).
//
//   auto info = std::make_shared<PodHcaInfo>([&] { return manager.PodsHoldingHcas(); });
//   http->Serve(info);
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::deviceplugin {

inline constexpr char kPodHcaInfo[] = "kuberdma_pod_hca_info";

// "<namespace>/<name>" -> the HCAs (VFs included: each is an HCA) it holds.
using PodHcaMap = std::map<std::string, std::set<std::string>>;

class PodHcaInfo final : public prometheus::Collectable {
 public:
  using Source = std::function<Result<PodHcaMap>()>;
  explicit PodHcaInfo(Source source,
                      std::chrono::milliseconds refresh = std::chrono::milliseconds(5000))
      : source_(std::move(source)), refresh_(refresh) {}
  // One gauge per (pod, HCA). When the source fails, the last answer is served (a kubelet
  // restart must not make every pod look idle) until it answers again.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  Source source_;
  std::chrono::milliseconds refresh_;
  mutable std::mutex mu_;
  mutable PodHcaMap last_;
  mutable std::chrono::steady_clock::time_point at_{};
  mutable bool ever_ = false;
  mutable bool stale_ = false;
};

}  // namespace kuberdma::deviceplugin
