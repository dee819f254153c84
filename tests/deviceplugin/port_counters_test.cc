// SPDX-License-Identifier: Apache-2.0
// The port counters' kept walk (port_counters.cc): values and netdevs are read at every scrape,
// the walk made again when an HCA comes or goes or a kept counter file is gone.
#include "kuberdma/deviceplugin/port_counters.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/base/files.h"
#include "temp_dir.h"

namespace kuberdma::deviceplugin {
namespace {

namespace fs = std::filesystem;

// The value of `family` for `hca`, with its netdev label; nullopt when there is none.
std::optional<std::pair<double, std::string>> Value(
    const std::vector<prometheus::MetricFamily>& fams, const std::string& family,
    const std::string& hca) {
  for (const auto& f : fams) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      if (m.label[0].value == hca) return std::pair{m.counter.value, m.label[1].value};
    }
  }
  return std::nullopt;
}

TEST_CASE("Kept between scrapes: new values, a netdev gone to a pod, an HCA and a file removed") {
  testing::TempDir dir;
  fs::copy(KUBERDMA_FIXTURES "/sysfs/roce8", dir.path,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  sysfs::SysfsRoot root(dir.path);
  PortCounters counters{root};
  const std::string xmit = "kuberdma_infiniband_port_data_transmitted_bytes_total";
  const std::string ib = root.Sys("class/infiniband/");
  REQUIRE(WriteFileAtomic(ib + "mlx5_0/ports/1/counters/port_xmit_data", "10\n"));
  auto first = counters.Collect();
  CHECK(Value(first, xmit, "mlx5_0") == std::pair{40.0, std::string("ens1f0np0")});
  REQUIRE(Value(first, "kuberdma_infiniband_np_cnp_sent_total", "mlx5_7"));

  REQUIRE(WriteFileAtomic(ib + "mlx5_0/ports/1/counters/port_xmit_data", "11\n"));
  fs::path net = fs::canonical(ib + "mlx5_0/device/net");
  fs::rename(net / "ens1f0np0", dir.path + "/moved-away");  // the netdev went into a pod
  auto second = counters.Collect();
  CHECK(Value(second, xmit, "mlx5_0") == std::pair{44.0, std::string()});

  fs::remove(fs::canonical(ib + "mlx5_7/ports/1/hw_counters/np_cnp_sent"));
  fs::remove(ib + "mlx5_3");  // an HCA gone
  auto third = counters.Collect();
  CHECK_FALSE(Value(third, "kuberdma_infiniband_np_cnp_sent_total", "mlx5_7"));
  CHECK(Value(third, xmit, "mlx5_7"));
  CHECK_FALSE(Value(third, xmit, "mlx5_3"));
  CHECK(Value(third, xmit, "mlx5_0"));
}

}  // namespace
}  // namespace kuberdma::deviceplugin
