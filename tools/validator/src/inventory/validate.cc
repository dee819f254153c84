// SPDX-License-Identifier: Apache-2.0
// rdma-validate's inventory: the HCAs the pod was given and their ports, the counters read
// around a run, and the NCCL environment a run gets. Judging is judge_run.cc, the report
// reports/report.cc.
#include "kuberdma/validator/validate.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../format.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/host.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/netns/netns.h"

namespace kuberdma::validator {

using nlohmann::json;

Validator::Validator(Options opts, sysfs::SysfsRoot root, link::LinkOps& links,
                     std::function<const char*(const char*)> getenv)
    : opts_(std::move(opts)), root_(std::move(root)), links_(links), getenv_(std::move(getenv)) {}

namespace {

// Whether every port of `hca` the pod was given (all when the env names none) is ACTIVE.
bool PortsActive(const sysfs::Hca& hca, const Expected& e, DeviceResult& d, Report& r) {
  std::vector<uint32_t> ports =
      e.ports.contains(hca.name) ? e.ports.at(hca.name) : std::vector<uint32_t>{};
  if (ports.empty()) {
    for (const auto& p : hca.ports) ports.push_back(p.number);
  }
  bool up = true;
  for (uint32_t pn : ports) {
    const sysfs::Port* p = hca.port(pn);
    std::string st = p ? p->state_name : "absent";
    d.state += (d.state.empty() ? "" : ",") + std::to_string(pn) + ":" + st;
    if (p == nullptr || p->state != sysfs::kPortActive) {
      up = false;
      r.problems.push_back(hca.name + ": port " + std::to_string(pn) + " is " + st +
                           ", not ACTIVE");
    }
  }
  return up;
}

// Whether the HCA's uverbs device node is in the pod and opens.
bool UverbsOpens(const sysfs::SysfsRoot& root, const sysfs::Hca& hca, DeviceResult& d, Report& r) {
  d.uverbs = hca.uverbs.empty() ? "" : "/dev/infiniband/" + hca.uverbs;
  if (hca.uverbs.empty()) {
    r.problems.push_back(hca.name + ": no uverbs device in sysfs");
    return false;
  }
  UniqueFd fd(::open(root.Dev("infiniband/" + hca.uverbs).c_str(), O_RDWR | O_CLOEXEC));
  d.uverbs_openable = fd.valid();
  if (!fd.valid()) {
    r.problems.push_back(hca.name + ": " + d.uverbs + " is missing or cannot be opened (" +
                         std::strerror(errno) +
                         "): the device plugin did not inject it, or the container lacks access");
  }
  return d.uverbs_openable;
}

}  // namespace

void Validator::InventoryIb(Report& r, const Expected& e) {
  auto present = sysfs::DiscoverHcas(root_, sysfs::HcaDetail::kPorts);
  if (!present) {
    r.problems.push_back("cannot read RDMA devices: " + present.error().message());
    present = std::vector<sysfs::Hca>{};
  }
  for (const auto& name : e.names) {
    DeviceResult d;
    d.name = name;
    auto it = std::find_if(present->begin(), present->end(),
                           [&](const sysfs::Hca& h) { return h.name == name; });
    if (it == present->end()) {
      r.problems.push_back(name + ": expected (" + e.source + ") but missing from this pod");
      r.devices.push_back(d);
      continue;
    }
    d.link_layer = std::string(sysfs::LinkLayerName(it->link_layer()));
    d.present = true;
    bool up = PortsActive(*it, e, d, r);
    d.usable = UverbsOpens(root_, *it, d, r) && up;
    r.devices.push_back(d);
  }
  for (const auto& h : *present) {
    if (std::find(e.names.begin(), e.names.end(), h.name) == e.names.end()) {
      r.unexpected.push_back(h.name);
    }
  }
  JudgeClaim(r);
  if (!r.unexpected.empty()) {
    // Not a failure: in shared mode (the kernel default) every pod sees every HCA, and the exact
    // NCCL_IB_HCA list keeps NCCL to its own. Reported so that isolation can be checked.
    r.warnings.push_back(
        "visible but not ours: " + Join(r.unexpected) +
        " (the RDMA subsystem is in shared netns mode, so the host's HCAs leak into the pod)");
  }
}

void Validator::InventorySocket(Report& r, const Expected& e) {
  auto here = netns::NetNs::Current();
  auto links = here ? links_.List(*here) : Result<std::vector<link::LinkInfo>>(Fail(here.error()));
  if (!links) {
    r.problems.push_back("cannot list netdevs: " + links.error().message());
    links = std::vector<link::LinkInfo>{};
  }
  for (const auto& name : e.names) {
    DeviceResult d;
    d.name = name;
    auto it =
        std::find_if(links->begin(), links->end(), [&](const auto& l) { return l.name == name; });
    if (it == links->end()) {
      r.problems.push_back(name + ": expected (" + e.source + ") but missing from this pod");
    } else {
      d.present = true;
      d.state = it->oper_state;
      d.usable = it->admin_up && it->oper_up;
      if (!d.usable)
        r.problems.push_back(name + ": link is " +
                             (it->admin_up ? it->oper_state : "administratively down"));
    }
    r.devices.push_back(d);
  }
}

Report Validator::Inventory() {
  Report r;
  r.opts = opts_;
  auto e = !OverNetdevs(opts_.transport)
               ? ExpectedHcas(getenv_, opts_.expect)
               : ExpectedNetdevs(getenv_, opts_.expect, opts_.transport == Transport::kGloo);
  if (!e) {
    r.problems.push_back(e.error().message());
    r.verdict = "error";
    r.exit_code = 2;
    return r;
  }
  r.expected_source = e->source;
  if (!OverNetdevs(opts_.transport)) {
    InventoryIb(r, *e);
  } else {
    InventorySocket(r, *e);
  }
  r.verdict = r.problems.empty() ? "pass" : "fail";
  r.exit_code = r.problems.empty() ? 0 : 1;
  return r;
}

namespace {

// Soft-RoCE has no port data counters: its RoCE packets are its netdev's bytes.
bool VirtualHcaBytes(const sysfs::SysfsRoot& root, const sysfs::Hca& h,
                     std::pair<uint64_t, uint64_t>* bytes) {
  if (h.bus != sysfs::BusKind::kVirtual || h.netdevs.empty()) return false;
  std::string stats = "class/net/" + h.netdevs.front() + "/statistics/";
  *bytes = {std::strtoull(root.ReadAttrOr(stats + "tx_bytes", "0").c_str(), nullptr, 10),
            std::strtoull(root.ReadAttrOr(stats + "rx_bytes", "0").c_str(), nullptr, 10)};
  return true;
}

}  // namespace

Snapshot Validator::ReadCounters(const Report& inv) {
  Snapshot s;
  if (OverNetdevs(opts_.transport)) {
    auto here = netns::NetNs::Current();
    for (const auto& d : inv.devices) {
      if (!here) break;
      auto l = links_.GetByName(*here, d.name);
      if (!l) continue;
      s.bytes[d.name] = {l->tx_bytes, l->rx_bytes};
      s.errors[d.name] = {{"tx_errors", l->tx_errors},
                          {"rx_errors", l->rx_errors},
                          {"tx_dropped", l->tx_dropped},
                          {"rx_dropped", l->rx_dropped}};
    }
    return s;
  }
  for (const auto& d : inv.devices) {
    auto h = sysfs::ReadHca(root_, d.name, sysfs::HcaDetail::kPorts);
    if (!h) continue;
    uint64_t x = 0;
    uint64_t rc = 0;
    bool counted = false;
    for (const auto& p : h->ports) {
      auto c = ReadPortCounters(root_, d.name, p.number);
      if (!c) continue;
      counted = true;
      x += c->xmit_words;
      rc += c->rcv_words;
      for (const auto& [k, v] : c->errors) s.errors[d.name][k] += v;
    }
    if (!counted && VirtualHcaBytes(root_, *h, &s.bytes[d.name])) continue;
    s.bytes[d.name] = {x, rc};
    s.word_counters[d.name] = true;
  }
  return s;
}

uint64_t BytesMoved(const Snapshot& before, const Snapshot& after, const std::string& dev) {
  auto b = before.bytes.find(dev);
  auto a = after.bytes.find(dev);
  if (b == before.bytes.end() || a == after.bytes.end()) return 0;
  uint64_t mult = after.word_counters.contains(dev) ? kIbDataWordBytes : 1;
  return (Delta(b->second.first, a->second.first).value +
          Delta(b->second.second, a->second.second).value) *
         mult;
}

uint64_t BytesSent(const Snapshot& before, const Snapshot& after, const std::string& dev) {
  auto b = before.bytes.find(dev);
  auto a = after.bytes.find(dev);
  if (b == before.bytes.end() || a == after.bytes.end()) return 0;
  uint64_t mult = after.word_counters.contains(dev) ? kIbDataWordBytes : 1;
  return Delta(b->second.first, a->second.first).value * mult;
}

std::map<std::string, std::string> Validator::NcclEnv(const Report& inv,
                                                      const std::vector<std::string>* only) const {
  std::map<std::string, std::string> env = {
      {"NCCL_DEBUG", "INFO"},        {"NCCL_DEBUG_SUBSYS", "INIT,NET"}, {"NCCL_NVLS_ENABLE", "0"},
      {"NCCL_RUNTIME_CONNECT", "0"}, {"NCCL_P2P_DISABLE", "1"},         {"NCCL_SHM_DISABLE", "1"},
      {"NCCL_COLLNET_ENABLE", "0"}};
  std::vector<std::string> names;
  for (const auto& d : inv.devices) {
    if (only != nullptr && std::find(only->begin(), only->end(), d.name) == only->end()) continue;
    if (opts_.transport == Transport::kIb) {
      // The exact-match form, with the ports the inventory checked.
      std::string ports = d.state.empty() ? "1" : d.state.substr(0, d.state.find(':'));
      names.push_back(d.name + ":" + ports);
    } else {
      names.push_back(d.name);
    }
  }
  std::string list =
      only != nullptr || opts_.nccl_devices.empty() ? Join(names) : opts_.nccl_devices;
  if (opts_.transport == Transport::kIb) {
    env["NCCL_NET"] = "IB";
    env["NCCL_IB_DISABLE"] = "0";
    env[contract::kNcclIbHca] = "=" + list;
  } else {
    env["NCCL_NET"] = "Socket";
    env["NCCL_IB_DISABLE"] = "1";
    env["NCCL_SOCKET_IFNAME"] = "=" + list;
  }
  std::string host = HostName();
  env["NCCL_HOSTID"] = host.empty() ? "pod" : host;
  return env;
}

}  // namespace kuberdma::validator
