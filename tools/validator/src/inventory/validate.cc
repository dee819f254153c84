// SPDX-License-Identifier: Apache-2.0
// Inventory, counters, verdict and report of rdma-validate.
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

namespace {

std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1ull << 30));
  } else if (b >= (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

}  // namespace

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
  auto e = opts_.transport != Transport::kSocket ? ExpectedHcas(getenv_, opts_.expect)
                                                 : ExpectedNetdevs(getenv_, opts_.expect);
  if (!e) {
    r.problems.push_back(e.error().message());
    r.verdict = "error";
    r.exit_code = 2;
    return r;
  }
  r.expected_source = e->source;
  if (opts_.transport != Transport::kSocket) {
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
  if (opts_.transport == Transport::kSocket) {
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

std::vector<std::string> Validator::JudgeCollective(Report& r, const CollectiveOutcome& run) {
  std::vector<std::string> missing_init;
  r.verified = !run.ranks.empty();
  for (const auto& rk : run.ranks) {
    if (!rk.init_ok) missing_init.push_back(std::to_string(rk.rank));
    if (!rk.ok) {
      r.verified = false;
      r.problems.push_back("rank " + std::to_string(rk.rank) + ": " +
                           (rk.error.empty() ? "failed" : rk.error));
    }
    r.seconds_per_iter = std::max(r.seconds_per_iter, rk.seconds_per_iter);
  }
  if (!missing_init.empty()) {
    std::string others = r.opts.mode == Mode::kMultiPod
                             ? "; the other " + std::to_string(r.world_size - 1) +
                                   " rank(s) of the world never all arrived at NCCL_COMM_ID (are "
                                   "their pods running, and is rank 0 reachable?)"
                             : "";
    r.problems.push_back("communicator init did not complete for local rank(s) " +
                         Join(missing_init) + others);
  }
  if (r.verified && !r.runs.empty() && !r.runs.front().sizes.empty()) {
    const CollectiveRun& first = r.runs.front();
    const SizeResult& last = first.sizes.back();
    r.seconds_per_iter = last.out_of_place.seconds;
    r.bandwidth =
        CollectiveBandwidth(first.spec.kind, last.bytes, last.out_of_place.seconds, first.nranks);
  } else if (r.verified && r.seconds_per_iter > 0) {
    r.bandwidth = AllReduceBandwidth(r.opts.bytes, r.seconds_per_iter, r.world_size);
  }
  return missing_init;
}

void Validator::JudgeChoice(Report& r, const CollectiveOutcome& run) {
  std::string want_net = r.opts.transport == Transport::kIb ? "IB" : "Socket";
  if (!r.nccl_network.empty() && r.nccl_network != want_net) {
    r.problems.push_back("NCCL used network " + r.nccl_network + ", not " + want_net);
  }
  if (!r.nccl_bypasses.empty()) {
    r.problems.push_back("channels went through " + Join(r.nccl_bypasses) + ", not only the NICs");
  }
  if (!run.ranks.empty() && r.nccl_devices.empty()) {
    r.problems.push_back("NCCL's INFO log (" +
                         (run.log_files.empty() ? std::string("none") : run.log_files.front()) +
                         ") names no NET devices: what NCCL chose cannot be shown");
  }
}

void Validator::JudgeTraffic(Report& r, const Snapshot& before, const Snapshot& after) {
  for (auto& d : r.devices) {
    auto b = before.bytes.find(d.name);
    auto a = after.bytes.find(d.name);
    if (b == before.bytes.end() || a == after.bytes.end()) continue;
    uint64_t mult = after.word_counters.contains(d.name) ? kIbDataWordBytes : 1;
    auto tx = Delta(b->second.first, a->second.first);
    auto rx = Delta(b->second.second, a->second.second);
    d.bytes_sent = tx.value * mult;
    d.bytes_received = rx.value * mult;
    if (tx.wrapped || rx.wrapped)
      d.notes.emplace_back("a 32-bit counter wrapped during the run (accounted for)");
    if (tx.saturated || rx.saturated) {
      r.problems.push_back(d.name +
                           ": its 32-bit data counters are saturated; traffic cannot be proven "
                           "(reset them with perfquery -R)");
    }
    const auto& errs =
        after.errors.contains(d.name) ? after.errors.at(d.name) : std::map<std::string, uint64_t>{};
    for (const auto& [k, v] : errs) {
      uint64_t was = before.errors.contains(d.name) && before.errors.at(d.name).contains(k)
                         ? before.errors.at(d.name).at(k)
                         : v;
      if (v > was) d.error_deltas[k] = v - was;
    }
  }
}

void Validator::JudgeShares(Report& r, const NcclLog& log) {
  uint64_t total = 0;
  for (const auto& d : r.devices) total += d.bytes_sent + d.bytes_received;
  auto chosen = log.devices();
  double fair = r.devices.empty() ? 0 : r.opts.min_share / static_cast<double>(r.devices.size());
  for (auto& d : r.devices) {
    d.chosen_by_nccl = chosen.contains(d.name);
    d.nccl_channels = log.channels().contains(d.name) ? log.channels().at(d.name) : 0;
    d.share = total > 0 ? static_cast<double>(d.bytes_sent + d.bytes_received) /
                              static_cast<double>(total)
                        : 0;
    d.carried_traffic = d.bytes_sent + d.bytes_received > 0 && d.share >= fair;
    if (!d.chosen_by_nccl) {
      r.problems.push_back(d.name +
                           ": NCCL did not use it (its device list: " + Join(r.nccl_devices) + ")");
    }
    if (!d.carried_traffic) {
      r.problems.push_back(d.name + ": carried " + Bytes(d.bytes_sent + d.bytes_received) + ", " +
                           Gb(100 * d.share) + "% of the run's bytes (needs at least " +
                           Gb(100 * fair) + "%)");
    }
    for (const auto& [k, v] : d.error_deltas) {
      d.notes.push_back(k + " +" + std::to_string(v) + " during the run");
      r.warnings.push_back(d.name + ": " + k + " +" + std::to_string(v) + " during the run");
    }
  }
}

// A GID that is another pod's: on a shared HCA every pod's entries are in one table (and `ndevs`
// names collide), so ownership is by address.
void Validator::JudgeGidOwner(Report& r, const DeviceResult& d, const GidUse& g,
                              const std::vector<sysfs::Gid>& gids) {
  if (g.Ipv4().empty()) return;
  if (!own_ipv4_) own_ipv4_ = netns::NamespaceIpv4();
  const auto& own = *own_ipv4_;
  if (std::find(own.begin(), own.end(), g.Ipv4()) != own.end()) return;
  std::string host = HostName();
  const sysfs::Gid* mine = sysfs::FirstV2ForAddresses(gids, own);
  r.problems.push_back(
      d.name + ": NCCL's queue pairs used GID " + std::to_string(g.index) + " (" + g.Ipv4() +
      "), which is no address of this pod (" + host + ": " + (own.empty() ? "none" : Join(own)) +
      "): another pod's entry on a shared HCA; " +
      (mine != nullptr
           ? "this pod's RoCE v2 GID is index " + std::to_string(mine->index) + " (" +
                 mine->Ipv4() + "): set NCCL_IB_GID_INDEX=" + std::to_string(mine->index) +
                 " or an NCCL_IB_ADDR_RANGE of its subnet"
           : "this pod has no RoCE v2 entry on " + d.name + " (give its interface an address)"));
}

void Validator::JudgeGids(Report& r, const NcclLog& log) {
  for (auto& d : r.devices) {
    auto used = log.gids().find(d.name);
    if (d.link_layer != "Ethernet" || used == log.gids().end()) continue;
    const GidUse& g = used->second;
    d.gid_index = g.index;
    d.gid_address = g.Ipv4().empty() ? g.Address() : g.Ipv4();
    auto table = sysfs::ReadGidTable(root_, d.name, 1);
    std::vector<sysfs::Gid> gids = table ? *table : std::vector<sysfs::Gid>{};
    for (const auto& e : gids) {
      if (static_cast<int>(e.index) == g.index) d.gid_type = e.type;
    }
    const sysfs::Gid* v2 = sysfs::FirstRoutableV2(gids);
    std::string at = v2 != nullptr ? " (its RoCE v2 GID for " + v2->Ipv4() + " is index " +
                                         std::to_string(v2->index) + ")"
                                   : "";
    if (g.IsLinkLocal()) {
      r.problems.push_back(d.name + ": NCCL used GID " + std::to_string(g.index) + " (" +
                           d.gid_address +
                           "), a link-local address that cannot cross routed "
                           "rails" +
                           at +
                           "; give the interface an address (ipam in the NAD) and "
                           "set NCCL_IB_ADDR_FAMILY=AF_INET, or unset NCCL_IB_GID_INDEX");
    } else if (d.gid_type != "RoCE v2" && !d.gid_type.empty() && v2 != nullptr) {
      r.problems.push_back(d.name + ": NCCL used GID " + std::to_string(g.index) +
                           ", RoCE v1, "
                           "while RoCE v2 exists" +
                           at + "; set NCCL_IB_ROCE_VERSION_NUM=2 (or unset NCCL_IB_GID_INDEX)");
    } else {
      JudgeGidOwner(r, d, g, gids);
    }
  }
}

void Validator::JudgeThreshold(Report& r) {
  if (r.opts.min_busbw_gbps > 0) r.threshold_gbps = r.opts.min_busbw_gbps;
  if (r.threshold_gbps > 0 && r.verified && r.bandwidth.busbw_gbps < r.threshold_gbps) {
    r.problems.push_back("busbw " + Gb(r.bandwidth.busbw_gbps) + " GB/s is below the threshold " +
                         Gb(r.threshold_gbps) + " GB/s");
  }
}

void Validator::Judge(Report& r, const Snapshot& before, const Snapshot& after,
                      const CollectiveOutcome& run, const NcclLog& log) {
  r.ran_collective = true;
  r.log_files = run.log_files;
  r.nccl_network = log.network();
  if (!log.version().empty()) r.nccl_version = log.version();
  r.nccl_devices.assign(log.device_list().begin(), log.device_list().end());
  for (const auto& b : log.bypasses()) r.nccl_bypasses.push_back(b);
  auto missing_init = JudgeCollective(r, run);
  JudgeChoice(r, run);
  JudgeTraffic(r, before, after);
  JudgeShares(r, log);
  JudgeGids(r, log);
  JudgeGdr(r, log);
  JudgeThreshold(r);
  JudgeLineRate(r);
  if (run.timed_out || !missing_init.empty()) {
    r.verdict = "timeout";
    r.exit_code = 3;
  } else {
    r.verdict = r.problems.empty() ? "pass" : "fail";
    r.exit_code = r.problems.empty() ? 0 : 1;
  }
}

namespace {

json RunsJson(const std::vector<CollectiveRun>& runs) {
  json out = json::array();
  for (const auto& r : runs) out.push_back(ResultJson(r.spec, r.nranks, r.sizes));
  return out;
}

json DeviceJson(const DeviceResult& d) {
  json j = {{"name", d.name},
            {"present", d.present},
            {"state", d.state},
            {"usable", d.usable},
            {"uverbs", d.uverbs},
            {"uverbsOpenable", d.uverbs_openable},
            {"bytesSent", d.bytes_sent},
            {"bytesReceived", d.bytes_received},
            {"share", d.share},
            {"chosenByNccl", d.chosen_by_nccl},
            {"ncclChannels", d.nccl_channels},
            {"carriedTraffic", d.carried_traffic},
            {"errorCounterDeltas", d.error_deltas},
            {"notes", d.notes}};
  if (!d.gpu_direct.empty()) {
    j["gpuDirect"] = {{"used", d.gpu_direct}, {"nearestGpu", d.nearest_gpu_distance}};
  }
  if (d.line_rate_fraction >= 0) {
    j["lineRate"] = {{"rateGbps", d.line_rate_gbps},
                     {"achievedGBps", d.achieved_gbps},
                     {"fraction", d.line_rate_fraction}};
  }
  if (d.gid_index >= 0) {
    j["gid"] = {{"index", d.gid_index}, {"address", d.gid_address}, {"type", d.gid_type}};
  }
  return j;
}

}  // namespace

json Report::ToJson() const {
  json devs = json::array();
  for (const auto& d : devices) devs.push_back(DeviceJson(d));
  return {{"version", 1},
          {"verdict", verdict},
          {"exitCode", exit_code},
          {"mode", opts.mode == Mode::kSingle ? "single" : "multi-pod"},
          {"transport", TransportName(opts.transport)},
          {"verbs", verbs},
          {"rank", rank},
          {"worldSize", world_size},
          {"expectedFrom", expected_source},
          {"devices", devs},
          {"unexpected", unexpected},
          {"nccl",
           {{"version", nccl_version},
            {"library", nccl_library},
            {"network", nccl_network},
            {"devices", nccl_devices},
            {"bypasses", nccl_bypasses},
            {"logFiles", log_files}}},
          {"collective",
           {{"ran", ran_collective},
            {"verified", verified},
            {"sizeBytes", opts.bytes},
            {"iterations", opts.iters},
            {"secondsPerIteration", seconds_per_iter},
            {"algbwGBps", bandwidth.algbw_gbps},
            {"busbwGBps", bandwidth.busbw_gbps},
            {"thresholdGBps", threshold_gbps},
            {"minLineRate", opts.min_line_rate},
            {"localRanks", local_ranks}}},
          {"collectives", RunsJson(runs)},
          {"problems", problems},
          {"warnings", warnings}};
}

std::string Report::Summary() const {
  std::string s = "rdma-validate: " + verdict;
  if (ran_collective && verified) s += ", busbw " + Gb(bandwidth.busbw_gbps) + " GB/s";
  s += ", " + std::to_string(devices.size()) + " device(s)";
  if (!problems.empty())
    s += ": " + problems.front() +
         (problems.size() > 1 ? " (+" + std::to_string(problems.size() - 1) + " more)" : "");
  return s;
}

std::string Report::CollectiveLines() const {
  std::ostringstream o;
  o << "  NCCL " << nccl_version << (nccl_library.empty() ? "" : " (" + nccl_library + ")")
    << ": network " << (nccl_network.empty() ? "?" : nccl_network) << ", devices ["
    << Join(nccl_devices, " ") << "]"
    << (nccl_bypasses.empty() ? "" : ", bypasses: " + Join(nccl_bypasses)) << "\n";
  std::string what = runs.empty() ? "AllReduce" : std::string(Name(runs.front().spec.kind));
  size_t bytes =
      runs.empty() || runs.front().sizes.empty() ? opts.bytes : runs.front().sizes.back().bytes;
  o << "  " << (what == "all_reduce" ? "AllReduce" : what) << " " << Bytes(bytes) << " x "
    << opts.iters << ": " << (verified ? "result verified" : "NOT verified") << ", algbw "
    << Gb(bandwidth.algbw_gbps) << " GB/s, busbw " << Gb(bandwidth.busbw_gbps) << " GB/s"
    << (threshold_gbps > 0 ? " (threshold " + Gb(threshold_gbps) + ")" : "") << "\n";
  // nccl-tests' table, per collective, when there is more than the one figure above.
  bool table = runs.size() > 1 || (!runs.empty() && runs.front().sizes.size() > 1) ||
               (!runs.empty() && runs.front().spec.kind != Collective::kAllReduce);
  for (const auto& run : table ? runs : std::vector<CollectiveRun>{}) {
    o << "  # " << Name(run.spec.kind) << ", " << run.nranks << " ranks\n"
      << ResultTable(run.spec, run.nranks, run.sizes);
  }
  return o.str();
}

namespace {

// Where the NCCL logs are (--log-dir, or the directory rdma-validate made), or "".
std::string LogsLine(const std::vector<std::string>& log_files) {
  if (log_files.empty()) return "";
  std::string dir = log_files.front().substr(0, log_files.front().find_last_of('/'));
  return "  NCCL logs: " + std::to_string(log_files.size()) + " file(s) in " + dir + "\n";
}

}  // namespace

namespace {

// The lines under a device's row: the GID NCCL used, GPUDirect, line rate, notes.
std::string DeviceDetails(const DeviceResult& d) {
  std::ostringstream o;
  if (d.gid_index >= 0) {
    o << "      gid: index " << d.gid_index << " " << d.gid_address
      << (d.gid_type.empty() ? "" : " (" + d.gid_type + ")") << "\n";
  }
  if (!d.gpu_direct.empty()) {
    o << "      GPUDirect RDMA: " << d.gpu_direct
      << (d.nearest_gpu_distance.empty() ? "" : " (nearest GPU: " + d.nearest_gpu_distance + ")")
      << "\n";
  }
  if (d.line_rate_fraction >= 0) {
    char line[128];
    std::snprintf(line, sizeof line, "      line rate: %.2f GB/s, %.2f of %.0f Gb/s\n",
                  d.achieved_gbps, d.line_rate_fraction, d.line_rate_gbps);
    o << line;
  }
  for (const auto& n : d.notes) o << "      note: " << n << "\n";
  return o.str();
}

}  // namespace

std::string Report::Table() const {
  std::ostringstream o;
  o << "rdma-validate (" << (opts.mode == Mode::kSingle ? "single" : "multi-pod") << ", "
    << (opts.transport == Transport::kIb       ? "IB"
        : opts.transport == Transport::kSocket ? "Socket"
                                               : "verbs")
    << ", rank " << rank << " of " << world_size << "; "
    << (expected_source.empty() ? "no expected devices" : "expected from " + expected_source)
    << ")\n";
  char line[256];
  if (!devices.empty()) {
    std::snprintf(line, sizeof line, "  %-12s %-8s %-14s %-6s %-7s %12s %12s %7s %s\n", "device",
                  "present", "state", "usable", "chosen", "sent", "received", "share", "traffic");
    o << line;
  }
  for (const auto& d : devices) {
    std::snprintf(line, sizeof line, "  %-12s %-8s %-14s %-6s %-7s %12s %12s %6.1f%% %s\n",
                  d.name.c_str(), d.present ? "yes" : "NO", d.state.c_str(),
                  d.usable ? "yes" : "NO", ran_collective ? (d.chosen_by_nccl ? "yes" : "NO") : "-",
                  Bytes(d.bytes_sent).c_str(), Bytes(d.bytes_received).c_str(), 100 * d.share,
                  ran_collective ? (d.carried_traffic ? "yes" : "NO") : "-");
    o << line << DeviceDetails(d);
  }
  if (ran_collective) {
    o << CollectiveLines();
  } else if (!nccl_version.empty()) {
    o << "  NCCL " << nccl_version << " (" << nccl_library << "): not run\n";
  }
  for (const auto& p : problems) o << "  problem: " << p << "\n";
  for (const auto& w : warnings) o << "  warning: " << w << "\n";
  o << LogsLine(log_files) << "  verdict: " << verdict << " (exit " << exit_code << ")\n";
  return o.str();
}

}  // namespace kuberdma::validator
