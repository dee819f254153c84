// SPDX-License-Identifier: Apache-2.0
// HCA port counters on scrape.
#include "kuberdma/deviceplugin/port_counters.h"

#include <charconv>
#include <map>
#include <optional>

#include "kuberdma/sysfs/hca.h"

namespace kuberdma::deviceplugin {

const std::vector<PortCounterSpec>& PortCounterSpecs() {
  static const std::vector<PortCounterSpec> kSpecs = {
      {"counters", "port_xmit_data", "kuberdma_infiniband_port_data_transmitted_bytes_total",
       "Bytes the port sent (sysfs port_xmit_data x 4).", 4},
      {"counters", "port_rcv_data", "kuberdma_infiniband_port_data_received_bytes_total",
       "Bytes the port received (sysfs port_rcv_data x 4).", 4},
      {"counters", "port_xmit_packets", "kuberdma_infiniband_port_packets_transmitted_total",
       "Packets the port sent."},
      {"counters", "port_rcv_packets", "kuberdma_infiniband_port_packets_received_total",
       "Packets the port received."},
      {"counters", "symbol_error", "kuberdma_infiniband_symbol_error_total",
       "Minor link errors detected on one or more physical lanes."},
      {"counters", "link_error_recovery", "kuberdma_infiniband_link_error_recovery_total",
       "Times the link error recovery process completed."},
      {"counters", "link_downed", "kuberdma_infiniband_link_downed_total",
       "Times the link went down (a flap)."},
      {"counters", "port_rcv_errors", "kuberdma_infiniband_port_errors_received_total",
       "Received packets with errors."},
      {"counters", "port_xmit_discards", "kuberdma_infiniband_port_transmit_discards_total",
       "Outbound packets discarded because the port was down or congested."},
      {"counters", "local_link_integrity_errors",
       "kuberdma_infiniband_local_link_integrity_errors_total",
       "Times the local physical errors exceeded the threshold."},
      {"hw_counters", "out_of_sequence", "kuberdma_infiniband_out_of_sequence_total",
       "Out-of-sequence packets received (RoCE: a lossy fabric)."},
      {"hw_counters", "packet_seq_err", "kuberdma_infiniband_packet_seq_err_total",
       "NAKs for packet sequence errors received."},
      {"hw_counters", "rnr_nak_retry_err", "kuberdma_infiniband_rnr_nak_retry_err_total",
       "Receiver-not-ready NAK retries exceeded."},
      {"hw_counters", "local_ack_timeout_err", "kuberdma_infiniband_local_ack_timeout_err_total",
       "Times the QP ack timer expired (retransmissions)."},
      {"hw_counters", "np_cnp_sent", "kuberdma_infiniband_np_cnp_sent_total",
       "Congestion notification packets sent (as notification point)."},
      {"hw_counters", "rp_cnp_handled", "kuberdma_infiniband_rp_cnp_handled_total",
       "Congestion notification packets handled (as reaction point)."},
      {"hw_counters", "np_ecn_marked_roce_packets",
       "kuberdma_infiniband_np_ecn_marked_roce_packets_total", "ECN-marked RoCE packets received."},
  };
  return kSpecs;
}

namespace {

// A counter file's value; nullopt when absent or not a number (a truncated read).
std::optional<double> ReadCounter(const sysfs::SysfsRoot& root, const std::string& rel) {
  auto read = root.ReadAttr(rel);
  if (!read) return std::nullopt;
  const std::string text = std::move(*read);
  const char* last = text.data() + text.size();
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), last, v);
  if (text.empty() || ec != std::errc() || end != last) return std::nullopt;
  return static_cast<double>(v);
}

prometheus::ClientMetric::Label Label(std::string name, std::string value) {
  return {std::move(name), std::move(value)};
}

}  // namespace

PortCounters::Layout PortCounters::Walk(const sysfs::SysfsRoot& root,
                                        std::vector<std::string> names) {
  Layout layout{.names = std::move(names)};
  auto hcas = sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
  if (!hcas) return layout;
  int rail = 0;
  for (const auto& h : *hcas) {
    Hca hca{.name = h.name,
            .rail = std::to_string(++rail),
            .is_virtual = h.bus == sysfs::BusKind::kVirtual,
            .netdev = h.netdevs.empty() ? "" : h.netdevs.front()};
    for (const auto& port : h.ports) {
      Port p{.number = std::to_string(port.number)};
      std::string base = "class/infiniband/" + h.name + "/ports/" + p.number + "/";
      for (const auto& spec : PortCounterSpecs()) {
        std::string rel = base + std::string(spec.dir) + "/" + std::string(spec.file);
        if (root.Exists(rel)) p.files.push_back({&spec, std::move(rel)});
      }
      hca.ports.push_back(std::move(p));
    }
    layout.hcas.push_back(std::move(hca));
  }
  return layout;
}

bool PortCounters::Read(const Layout& layout, std::vector<prometheus::MetricFamily>* out) const {
  std::map<std::string_view, prometheus::MetricFamily> families;
  for (const auto& h : layout.hcas) {
    // The netdev is read at every scrape: it leaves the host ("") while a pod holds the HCA.
    std::string netdev = h.netdev;
    if (!h.is_virtual) {
      auto nets = root_.ListDir("class/infiniband/" + h.name + "/device/net");
      netdev = nets && !nets->empty() ? nets->front() : "";
    }
    for (const auto& port : h.ports) {
      for (const auto& f : port.files) {
        auto v = ReadCounter(root_, f.rel);
        if (!v) {
          if (!root_.Exists(f.rel)) return false;  // gone: walk again
          continue;                                // a truncated read: this scrape skips it
        }
        auto& fam = families[f.spec->family];
        if (fam.name.empty()) {
          fam.name = f.spec->family;
          fam.help = f.spec->help;
          fam.type = prometheus::MetricType::Counter;
        }
        prometheus::ClientMetric m;
        // In name order, as prometheus-cpp's own families print theirs.
        m.label = {Label("hca", h.name), Label("netdev", netdev), Label("port", port.number),
                   Label("rail", h.rail)};
        m.counter.value = *v * f.spec->scale;
        fam.metric.push_back(std::move(m));
      }
    }
  }
  for (auto& [name, fam] : families) out->push_back(std::move(fam));
  return true;
}

std::vector<prometheus::MetricFamily> PortCounters::Collect() const {
  auto names = root_.Exists("class/infiniband") ? root_.ListDir("class/infiniband")
                                                : Result<std::vector<std::string>>{};
  if (!names) return {};
  std::lock_guard lock(mu_);
  // A walk that failed part-way (an HCA vanished under it) holds fewer HCAs than names: again.
  if (!layout_ || layout_->names != *names || layout_->hcas.size() != names->size()) {
    layout_ = Walk(root_, std::move(*names));
  }
  std::vector<prometheus::MetricFamily> out;
  if (!Read(*layout_, &out)) {
    out.clear();
    layout_ = Walk(root_, layout_->names);
    (void)Read(*layout_, &out);
  }
  return out;
}

}  // namespace kuberdma::deviceplugin
