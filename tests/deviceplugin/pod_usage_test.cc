// SPDX-License-Identifier: Apache-2.0
// kuberdma_pod_hca_info: one series per pod and HCA, asked at most once per refresh however often
// /metrics is scraped, and the last answer kept while the kubelet does not answer.
#include "kuberdma/deviceplugin/pod_usage.h"

#include <catch2/catch.hpp>
#include <thread>

namespace kuberdma::deviceplugin {
namespace {

std::vector<std::string> Series(const std::vector<prometheus::MetricFamily>& fams) {
  std::vector<std::string> out;
  REQUIRE(fams.size() == 1);
  CHECK(fams[0].name == "kuberdma_pod_hca_info");
  for (const auto& m : fams[0].metric) {
    std::string s;
    for (const auto& l : m.label) s += l.name + "=" + l.value + " ";
    out.push_back(s + std::to_string(static_cast<int>(m.gauge.value)));
  }
  return out;
}

TEST_CASE("Pod HCA info: a series per pod and HCA, cached, and kept while the kubelet is away") {
  int asked = 0;
  bool fail = false;
  PodHcaInfo info(
      [&]() -> Result<PodHcaMap> {
        ++asked;
        if (fail) return Fail(ErrorCode::kIo, "kubelet away");
        return PodHcaMap{{"team-a/trainer-0", {"mlx5_0", "mlx5_1"}},
                         {"team-b/infer-0", {"mlx5_8"}}};
      },
      std::chrono::milliseconds(200));
  auto first = Series(info.Collect());
  CHECK(first == std::vector<std::string>{"hca=mlx5_0 namespace=team-a pod=trainer-0 1",
                                          "hca=mlx5_1 namespace=team-a pod=trainer-0 1",
                                          "hca=mlx5_8 namespace=team-b pod=infer-0 1"});
  for (int i = 0; i < 100; ++i) (void)info.Collect();
  CHECK(asked == 1);  // a scrape loop does not reach the kubelet
  fail = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  CHECK(Series(info.Collect()) == first);
  CHECK(asked == 2);
}

TEST_CASE("Pod HCA info before the kubelet ever answered is an empty family") {
  PodHcaInfo info([]() -> Result<PodHcaMap> { return Fail(ErrorCode::kIo, "no kubelet"); });
  CHECK(Series(info.Collect()).empty());
}

}  // namespace
}  // namespace kuberdma::deviceplugin
