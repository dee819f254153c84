// SPDX-License-Identifier: Apache-2.0
// Every HCA port's traffic and error counters, read from sysfs when Prometheus scrapes (no
// background polling). The walk that finds the HCAs, their ports and which counter files each
// port has is kept between scrapes and made again when the set of HCAs changes or a kept file is
// gone: a scrape then costs a directory listing, each HCA's netdev and the counter reads. Counters
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

#include <mutex>
#include <optional>
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
  // Thread-safe (a scrape at a time walks or reads).
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct File {
    const PortCounterSpec* spec;
    std::string rel;  // below the sysfs root
  };
  struct Port {
    std::string number;
    std::vector<File> files;
  };
  struct Hca {
    std::string name;
    std::string rail;
    bool is_virtual = false;
    std::string netdev;  // a software device's parent: it never changes
    std::vector<Port> ports;
  };
  struct Layout {
    std::vector<std::string> names;  // class/infiniband, as listed
    std::vector<Hca> hcas;
  };
  static Layout Walk(const sysfs::SysfsRoot& root, std::vector<std::string> names);
  // The counters of `layout`; false when a kept file is gone (the layout is stale).
  bool Read(const Layout& layout, std::vector<prometheus::MetricFamily>* out) const;

  sysfs::SysfsRoot root_;
  mutable std::mutex mu_;
  mutable std::optional<Layout> layout_;
};

}  // namespace kuberdma::deviceplugin
