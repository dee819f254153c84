// SPDX-License-Identifier: Apache-2.0
// Every HCA port's traffic and error counters, read from sysfs when Prometheus scrapes (no
// background polling: a scrape costs one directory walk and a few small reads per port) and
// exported as counters labelled hca, port, netdev (its host name, "" while a pod holds it) and
// rail (the HCA's 1-based place in name order, as rails are numbered on a GPU node).
//
//   auto counters = std::make_shared<PortCounters>(sysfs::SysfsRoot::FromEnv());
//   exposer.RegisterCollectable(counters);
//
// Names follow node_exporter's infiniband collector with kuberdma_ for node_: its
// node_infiniband_port_data_transmitted_bytes_total is our
// kuberdma_infiniband_port_data_transmitted_bytes_total. sysfs counts port_xmit_data and
// port_rcv_data in 4-byte words; the _bytes families are bytes.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/sysfs/sysfs.h"

namespace kuberdma::deviceplugin {

struct PortCounterSpec {
  std::string_view dir;     // below ports/<n>/: "counters" or "hw_counters"
  std::string_view file;    // "port_xmit_data"
  std::string_view family;  // "kuberdma_infiniband_port_data_transmitted_bytes_total"
  std::string_view help;
  double scale = 1;  // 4 for the data counters (4-byte words)
};

// Every counter exported, where it exists on a port (hw_counters differ by driver and firmware).
const std::vector<PortCounterSpec>& PortCounterSpecs();

class PortCounters final : public prometheus::Collectable {
 public:
  explicit PortCounters(sysfs::SysfsRoot root) : root_(std::move(root)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  sysfs::SysfsRoot root_;
};

}  // namespace kuberdma::deviceplugin
