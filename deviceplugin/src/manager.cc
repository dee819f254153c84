// SPDX-License-Identifier: Apache-2.0
// The device plugin's event loop: poll over signals, inotify, kernel events and timers.
#include "kuberdma/deviceplugin/manager.h"

#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "api.grpc.pb.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/log_text.h"
#include "kuberdma/contract/cdi.h"
#include "kuberdma/contract/slot_id.h"
#include "kuberdma/events/kernel_events.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::deviceplugin {

namespace {

constexpr uint64_t kStop = 1;
constexpr uint64_t kRescan = 2;
constexpr uint64_t kReload = 4;
constexpr uint64_t kStreamClosed = 8;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string SocketName(const std::string& full_name) {
  std::string n = "kuberdma-" + full_name + ".sock";
  for (auto& c : n) {
    if (c == '/') c = '-';
  }
  return n;
}

std::string Fingerprint(const ResourceConfig& r) {
  const Selectors& s = r.selectors;
  nlohmann::json j = {r.resource_name,
                      r.resource_prefix,
                      r.rdma_hca_max,
                      s.vendors,
                      s.device_ids,
                      s.drivers,
                      s.if_names,
                      s.link_types,
                      s.pci_addresses,
                      s.hca_names,
                      r.policy == Policy::kPerHca,
                      r.inject_mad,
                      r.nccl_env,
                      r.extra_env,
                      r.cdi};
  return j.dump();
}

std::string Basename(const std::string& p) { return p.substr(p.find_last_of('/') + 1); }
std::string Dirname(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? "." : (s == 0 ? "/" : p.substr(0, s));
}

}  // namespace

Manager::Manager(Options opts, Config cfg) : opts_(std::move(opts)), cfg_(std::move(cfg)) {}

Manager::~Manager() { StopResources(); }

Result<std::unique_ptr<Manager>> Manager::Create(Options opts, Config cfg) {
  std::unique_ptr<Manager> m(new Manager(std::move(opts), std::move(cfg)));
  m->wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!m->wake_.valid()) return FailErrno(errno, "eventfd");
  m->inotify_ = UniqueFd(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!m->inotify_.valid()) return FailErrno(errno, "inotify_init1");
  KUBERDMA_TRY(MakeDirs(m->opts_.plugin_dir));
  if (::inotify_add_watch(m->inotify_.get(), m->opts_.plugin_dir.c_str(),
                          IN_CREATE | IN_DELETE | IN_MOVED_TO) < 0) {
    return FailErrno(errno, "watch " + m->opts_.plugin_dir);
  }
  if (!m->opts_.config_path.empty()) {
    std::string dir = Dirname(m->opts_.config_path);
    // ConfigMap volumes swap a "..data" symlink: watch the directory, not the file.
    if (::inotify_add_watch(m->inotify_.get(), dir.c_str(),
                            IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0) {
      return FailErrno(errno, "watch config directory " + dir);
    }
  }
  if (m->opts_.metrics_port >= 0) {
    Manager* raw = m.get();
    KUBERDMA_ASSIGN_OR_RETURN(
        m->http_, HttpEndpoint::Start(
                      static_cast<uint16_t>(m->opts_.metrics_port), m->metrics_,
                      [raw] { return raw->running_.load(); }, m->opts_.metrics_address));
    m->port_counters_ = std::make_shared<PortCounters>(m->opts_.sysfs);
    m->http_->Serve(m->port_counters_);
    m->usage_kubelet_ = std::make_unique<PodResourcesClient>(m->opts_.pod_resources);
    m->pod_hca_info_ = std::make_shared<PodHcaInfo>([raw] { return raw->PodsHoldingHcas(); });
    m->http_->Serve(m->pod_hca_info_);
  }
  if (m->opts_.lldp && !m->opts_.allocations_dir.empty()) {
    Manager* raw = m.get();
    KUBERDMA_ASSIGN_OR_RETURN(m->cabling_,
                              CablingWatch::Start(
                                  m->opts_.allocations_dir, m->lldp_listener_,
                                  [raw] {
                                    // Asked at each round's start and end: a VF that left for a pod
                                    // meanwhile voids it.
                                    auto rails = raw->RailNetdevs();
                                    rails::NoteVfTenants(raw->opts_.sysfs, rails);
                                    return rails;
                                  },
                                  m->opts_.lldp_round, m->opts_.on_cabling, &m->hop_probe_));
  }
  if (!m->opts_.allocations_dir.empty()) {
    Manager* raw = m.get();
    KUBERDMA_ASSIGN_OR_RETURN(
        m->pods_,
        PodsEndpoint::Start(m->opts_.allocations_dir + "/" + contract::kPodsSocket,
                            m->opts_.pod_resources,
                            [raw](const contract::PodQuery& q, const std::vector<PodDevices>& d) {
                              return raw->PodHcas(q, d);
                            }));
  }
  return m;
}

namespace {

void AddHca(contract::PodAnswer& answer, const std::string& hca) {
  if (std::find(answer.hcas.begin(), answer.hcas.end(), hca) == answer.hcas.end()) {
    answer.hcas.push_back(hca);
  }
}

}  // namespace

void Manager::AddResourceHcas(const std::vector<PodDevices>& devices,
                              contract::PodAnswer& answer) const {
  std::lock_guard lock(snapshot_mu_);
  for (const auto& d : devices) {
    auto pool = resource_hcas_.find(d.resource);
    if (pool == resource_hcas_.end()) continue;  // not one of ours
    for (const auto& id : d.device_ids) {
      answer.slots.push_back(id);
      auto slot = contract::ParseSlot(id);
      if (slot && slot->kind == contract::SlotKind::kPerHca) {
        AddHca(answer, slot->base);
      } else {
        for (const auto& h : pool->second) AddHca(answer, h);  // a pool's share: all its HCAs
      }
    }
  }
}

contract::PodAnswer Manager::PodHcas(const contract::PodQuery& pod,
                                     const std::vector<PodDevices>& devices) const {
  contract::PodAnswer answer;
  AddResourceHcas(devices, answer);
  // The DRA driver's prepared claims reserved for the pod (dra/prepare.h).
  for (const auto& c : contract::ClaimsOfPod(opts_.allocations_dir, pod.ns, pod.name)) {
    // "claim:<name>" (the pod's namespace): a slot entry must be a plain name.
    answer.slots.push_back("claim:" + c.claim.substr(c.claim.find('/') + 1));
    for (const auto& h : c.hcas) AddHca(answer, h);
    answer.claims[c.uid] = c.hcas;
  }
  answer.known = !answer.slots.empty();
  return answer;
}

Result<PodHcaMap> Manager::PodsHoldingHcas() {
  PodHcaMap out;
  if (!opts_.pod_resources.empty()) {
    KUBERDMA_ASSIGN_OR_RETURN(auto listed, usage_kubelet_->List(std::chrono::seconds(2)));
    std::map<std::string, std::vector<PodDevices>> by_pod;
    for (auto& d : listed) by_pod[d.pod].push_back(std::move(d));
    for (const auto& [pod, devices] : by_pod) {
      contract::PodAnswer a;
      AddResourceHcas(devices, a);
      if (!a.hcas.empty()) out[pod].insert(a.hcas.begin(), a.hcas.end());
    }
  }
  // The DRA claims' pods, from one read of the records (not one per pod, as PodHcas would).
  if (!opts_.allocations_dir.empty()) {
    for (const auto& c : contract::ListClaims(opts_.allocations_dir)) {
      for (const auto& pod : c.pods) out[pod].insert(c.hcas.begin(), c.hcas.end());
    }
  }
  return out;
}

uint16_t Manager::metrics_port() const { return http_ ? http_->port() : 0; }

std::string Manager::SocketPath(const std::string& full_name) const {
  return opts_.plugin_dir + "/" + SocketName(full_name);
}

void Manager::Wake(uint64_t bits) {
  requests_.fetch_or(bits);
  uint64_t one = 1;
  (void)WriteAll(wake_.get(), &one,
                 sizeof one);  // an eventfd only fails when it would overflow: already awake
}
void Manager::Stop() { Wake(kStop); }
void Manager::RequestRescan() { Wake(kRescan); }
void Manager::RequestReload() { Wake(kReload); }

namespace {

void LogRoleChanges(const rails::NodeRoles* before, const rails::NodeRoles& now) {
  for (const auto& [hca, role] : now.by_hca) {
    const rails::HcaRole* was = before == nullptr ? nullptr : before->Find(hca);
    if (was != nullptr && was->node_own == role.node_own && was->rail == role.rail) continue;
    if (!role.node_own.empty()) {
      spdlog::warn("event=node_nic hca={} offered=false reason={}", hca, LogQuoted(role.node_own));
    } else {
      spdlog::info("event=rail hca={} rail={}{}", hca, role.rail,
                   role.rail == 0 ? " reason=\"" + role.no_rail + "\"" : "");
    }
  }
  if (before != nullptr && before->unmatched == now.unmatched) return;
  for (const auto& u : now.unmatched) spdlog::warn("event=rail_unmatched detail={}", LogQuoted(u));
}

}  // namespace

Result<std::vector<sysfs::Hca>> Manager::Discover() {
  auto hcas = sysfs::DiscoverHcas(opts_.sysfs, sysfs::HcaDetail::kPorts);
  if (!hcas) return Fail(hcas.error().Wrap("discover HCAs"));
  auto host = netns::NetNs::Current();
  auto net =
      host ? rails::ReadHostNet(links_, addrs_, *host) : Result<rails::HostNet>(Fail(host.error()));
  if (!net) {
    // The CNI refuses to move the node's own NIC whatever is advertised: keep the last judgement.
    spdlog::error("event=node_nics_unknown error={} (keeping the last judgement)",
                  LogQuoted(net.error().message()));
    return hcas;
  }
  rails::NodeRoles now = rails::JudgeHcas(*hcas, *net, opts_.node);
  LogRoleChanges(roles(), now);
  metrics_.Clear("kuberdma_hca_node_nic");
  metrics_.Clear("kuberdma_hca_rail");
  for (const auto& [hca, role] : now.by_hca) {
    metrics_.Set("kuberdma_hca_node_nic", {{"hca", hca}}, role.node_own.empty() ? 0 : 1);
    metrics_.Set("kuberdma_hca_rail", {{"hca", hca}}, role.rail);
  }
  // LLDP on an Ethernet rail's netdev; an SMP out of an InfiniBand rail's port.
  std::vector<rails::RailNeighbor> rails = rails::CablingRails(*hcas, now);
  {
    std::lock_guard lock(snapshot_mu_);
    rail_netdevs_ = std::move(rails);
  }
  roles_ = std::move(now);
  return hcas;
}

std::vector<rails::RailNeighbor> Manager::RailNetdevs() const {
  std::lock_guard lock(snapshot_mu_);
  return rail_netdevs_;
}

Result<void> Manager::StartResources() {
  KUBERDMA_ASSIGN_OR_RETURN(auto hcas, Discover());
  for (const auto& rc : cfg_.resources) {
    if (servers_.contains(rc.FullName())) continue;
    auto shared =
        std::make_shared<SharedResource>(Resource(rc, opts_.sysfs), opts_.allocations_dir);
    shared->resource.Refresh(hcas, roles());
    KUBERDMA_ASSIGN_OR_RETURN(auto srv,
                              ResourceServer::Start(shared, SocketPath(rc.FullName()), metrics_,
                                                    [this] { Wake(kStreamClosed); }));
    // 0 until the kubelet accepts it: a plugin that never reaches the kubelet (a wrong kubelet
    // directory, no kubelet.sock) still has the series KubeRdmaResourceNotRegistered fires on.
    if (registered_.find(rc.FullName()) == registered_.end()) {
      metrics_.Set("kuberdma_registered", {{"resource", rc.FullName()}}, 0);
    }
    spdlog::info("event=serving resource={} socket={} hcas={} healthy={} policy={}", rc.FullName(),
                 srv->socket_path(), shared->resource.hcas().size(),
                 shared->resource.healthy_hcas(),
                 rc.policy == Policy::kPerHca ? "per-hca" : "pool");
    if (shared->resource.hcas().empty()) {
      spdlog::warn("event=no_devices resource={} (no HCA matches its selectors)", rc.FullName());
    }
    if (rc.cdi) {
      auto w = contract::WriteCdiSpec(cfg_.cdi_dir + "/kube-rdma-" + rc.resource_name + ".json",
                                      shared->resource.Cdi());
      if (!w)
        spdlog::error("event=cdi_spec_failed resource={} error={}", rc.FullName(),
                      LogQuoted(w.error().message()));
    }
    registered_[rc.FullName()] = false;
    servers_[rc.FullName()] = std::move(srv);
  }
  return {};
}

void Manager::StopResources() {
  servers_.clear();  // each destructor finishes streams, stops serving and removes its socket
  registered_.clear();
}

void Manager::RegisterOne(const std::string& full_name, ResourceServer& srv) {
  if (opts_.dra_resources.contains(full_name)) {
    registered_[full_name] = true;  // the DRA driver offers its HCAs: never the kubelet twice
    return;
  }
  auto channel = grpc::CreateChannel("unix:" + opts_.plugin_dir + "/" + kKubeletSocket,
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1beta1::RegisterRequest req;
  req.set_version("v1beta1");
  req.set_endpoint(Basename(srv.socket_path()));
  req.set_resource_name(full_name);
  {
    std::lock_guard lock(srv.shared()->mu);
    req.mutable_options()->set_get_preferred_allocation_available(
        srv.shared()->resource.config().policy == Policy::kPerHca);
  }
  v1beta1::Empty resp;
  grpc::Status st = stub->Register(&ctx, req, &resp);
  registered_[full_name] = st.ok();
  metrics_.Set("kuberdma_registered", {{"resource", full_name}}, st.ok() ? 1 : 0);
  metrics_.Inc("kuberdma_registrations_total",
               {{"resource", full_name}, {"result", st.ok() ? "ok" : "error"}});
  if (st.ok()) {
    spdlog::info("event=registered resource={} endpoint={}", full_name, req.endpoint());
  } else {
    spdlog::warn("event=register_failed resource={} error={} (retrying in 1 s)", full_name,
                 LogQuoted(st.error_message()));
    retry_at_ms_ = NowMs() + 1000;
  }
}

void Manager::RegisterAll(const char* why) {
  if (::access((opts_.plugin_dir + "/" + kKubeletSocket).c_str(), F_OK) != 0) {
    spdlog::info("event=waiting_for_kubelet socket={}/{}", opts_.plugin_dir, kKubeletSocket);
    return;
  }
  spdlog::info("event=register_all reason={}", why);
  for (auto& [name, srv] : servers_) RegisterOne(name, *srv);
}

void Manager::Rescan() {
  auto hcas = Discover();
  if (!hcas) {
    spdlog::error("event=rescan_failed error={}", LogQuoted(hcas.error().message()));
    return;
  }
  metrics_.Clear("kuberdma_hca_healthy");
  metrics_.Clear("kuberdma_devices");
  metrics_.Clear("kuberdma_port_active");
  for (const auto& h : *hcas) {
    for (const auto& p : h.ports) {
      metrics_.Set("kuberdma_port_active", {{"hca", h.name}, {"port", std::to_string(p.number)}},
                   p.state == sysfs::kPortActive ? 1 : 0);
    }
  }
  bool trim = false;
  for (auto& [name, srv] : servers_) {
    bool changed = Refresh(name, *srv, *hcas);
    metrics_.Set("kuberdma_list_and_watch_streams", {{"resource", name}},
                 static_cast<double>(srv->streams()));
    if (changed) {
      srv->Publish();
      trim = true;
    }
  }
  SnapshotHcas();
  NotifyRescan();
  // A published list of thousands of devices leaves freed blocks in malloc's arenas; hand them
  // back so the idle footprint stays small.
  if (trim) ::malloc_trim(0);
}

void Manager::SnapshotHcas() {
  std::map<std::string, std::vector<std::string>> snapshot;
  for (auto& [name, srv] : servers_) {
    std::lock_guard lock(srv->shared()->mu);
    for (const auto& [hca, st] : srv->shared()->resource.hcas()) {
      if (st.present) snapshot[name].push_back(hca);
    }
    snapshot.try_emplace(name);
  }
  std::lock_guard lock(snapshot_mu_);
  resource_hcas_ = std::move(snapshot);
}

void Manager::NotifyRescan() {
  if (!opts_.on_rescan) return;
  std::map<std::string, std::shared_ptr<SharedResource>> shared;
  for (auto& [name, srv] : servers_) shared[name] = srv->shared();
  opts_.on_rescan(shared, roles());
}

bool Manager::Refresh(const std::string& name, ResourceServer& srv,
                      const std::vector<sysfs::Hca>& hcas) {
  std::lock_guard lock(srv.shared()->mu);
  Resource& r = srv.shared()->resource;
  std::map<std::string, bool> before;
  for (const auto& [h, st] : r.hcas()) before[h] = st.healthy;
  bool changed = r.Refresh(hcas, roles());
  for (const auto& [h, st] : r.hcas()) {
    auto was = before.find(h);
    if (was == before.end() || was->second != st.healthy) {
      spdlog::info("event=health resource={} hca={} healthy={} reason={}", name, h, st.healthy,
                   LogQuoted(st.reason));
    }
    metrics_.Set("kuberdma_hca_healthy", {{"resource", name}, {"hca", h}}, st.healthy ? 1 : 0);
  }
  size_t healthy = r.healthy_slots();
  metrics_.Set("kuberdma_devices", {{"resource", name}, {"health", "Healthy"}},
               static_cast<double>(healthy));
  metrics_.Set("kuberdma_devices", {{"resource", name}, {"health", "Unhealthy"}},
               static_cast<double>(r.slots() - healthy));
  return changed;
}

void Manager::Reload() {
  if (opts_.config_path.empty()) return;
  auto text = ReadFile(opts_.config_path);
  auto cfg = text ? ParseConfig(*text) : Result<Config>(Fail(text.error()));
  if (!cfg) {
    metrics_.Inc("kuberdma_config_reloads_total", {{"result", "rejected"}});
    spdlog::error("event=reload_rejected error={} (the last good config keeps serving)",
                  LogQuoted(cfg.error().message()));
    return;
  }
  std::map<std::string, std::string> next;
  for (const auto& r : cfg->resources) next[r.FullName()] = Fingerprint(r);
  std::map<std::string, std::string> now;
  for (const auto& r : cfg_.resources) now[r.FullName()] = Fingerprint(r);
  if (next == now && cfg->health_poll_ms == cfg_.health_poll_ms) {
    spdlog::info("event=reload_unchanged");
    return;
  }
  for (const auto& [name, fp] : now) {
    auto it = next.find(name);
    if (it == next.end() || it->second != fp) {
      servers_.erase(
          name);  // stops serving and removes the socket; re-created below if still configured
      registered_.erase(name);
      metrics_.Remove("kuberdma_registered", {{"resource", name}});
      spdlog::info("event=resource_stopped resource={}", name);
    }
  }
  cfg_ = std::move(*cfg);
  metrics_.Inc("kuberdma_config_reloads_total", {{"result", "applied"}});
  if (auto s = StartResources(); !s) {
    spdlog::error("event=reload_start_failed error={}", LogQuoted(s.error().message()));
    return;
  }
  for (auto& [name, srv] : servers_) {
    if (!registered_[name]) RegisterOne(name, *srv);
  }
}

void Manager::HandleInotify() {
  alignas(inotify_event) char buf[8192];
  bool kubelet = false;
  bool ours_gone = false;
  bool config = false;
  for (;;) {
    ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
    if (n <= 0) break;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      std::string name = ev->len > 0 ? ev->name : "";
      if (name == kKubeletSocket && (ev->mask & (IN_CREATE | IN_MOVED_TO)) != 0) kubelet = true;
      if ((ev->mask & IN_DELETE) != 0 && name.rfind("kuberdma-", 0) == 0) ours_gone = true;
      if (!opts_.config_path.empty() && (name == Basename(opts_.config_path) || name == "..data"))
        config = true;
      p += sizeof(inotify_event) + ev->len;
    }
  }
  if (ours_gone) {
    // The kubelet removes every plugin socket when it restarts: serve again before it asks.
    std::vector<std::string> gone;
    for (auto& [name, srv] : servers_) {
      if (::access(srv->socket_path().c_str(), F_OK) != 0) gone.push_back(name);
    }
    for (const auto& g : gone) {
      servers_.erase(g);
      registered_.erase(g);
    }
    if (!gone.empty()) {
      spdlog::info("event=socket_removed count={} (restarting servers)", gone.size());
      if (auto s = StartResources(); !s)
        spdlog::error("event=restart_failed error={}", LogQuoted(s.error().message()));
      kubelet = kubelet || ::access((opts_.plugin_dir + "/" + kKubeletSocket).c_str(), F_OK) == 0;
    }
  }
  if (kubelet) {
    metrics_.Inc("kuberdma_kubelet_restarts_total", {});
    RegisterAll("kubelet.sock created");
  }
  if (config) Reload();
}

namespace {

// SIGTERM/SIGINT/SIGHUP as a readable descriptor (blocked in every thread by main()).
Result<UniqueFd> OpenSignalFd() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd.valid()) return FailErrno(errno, "signalfd");
  return fd;
}

std::optional<events::KernelEvents> OpenKernelEvents(bool wanted) {
  if (!wanted) return std::nullopt;
  auto ev = events::KernelEvents::Open();
  if (!ev) {
    spdlog::warn("event=no_kernel_events error={} (port-state timer only)",
                 LogQuoted(ev.error().message()));
    return std::nullopt;
  }
  return std::move(*ev);
}

// The requests signals make: SIGHUP reloads, the others stop.
uint64_t SignalRequests(const UniqueFd& sigfd, uint64_t stop, uint64_t reload) {
  uint64_t req = 0;
  signalfd_siginfo si{};
  while (sigfd.valid() && ::read(sigfd.get(), &si, sizeof si) == sizeof si) {
    req |= si.ssi_signo == SIGHUP ? reload : stop;
  }
  return req;
}

}  // namespace

void Manager::WaitForWork(const UniqueFd& sigfd, const std::optional<events::KernelEvents>& kernel,
                          int64_t next_poll) {
  std::vector<pollfd> fds = {{wake_.get(), POLLIN, 0}, {inotify_.get(), POLLIN, 0}};
  if (sigfd.valid()) fds.push_back({sigfd.get(), POLLIN, 0});
  if (kernel) {
    fds.push_back({kernel->link_fd(), POLLIN, 0});
    if (kernel->uevent_fd() >= 0) fds.push_back({kernel->uevent_fd(), POLLIN, 0});
  }
  int64_t deadline = next_poll;
  if (recheck_at_ms_ >= 0) deadline = std::min(deadline, recheck_at_ms_);
  if (retry_at_ms_ >= 0) deadline = std::min(deadline, retry_at_ms_);
  ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, deadline - NowMs())));
  uint64_t sink = 0;
  [[maybe_unused]] ssize_t drained =
      ::read(wake_.get(), &sink, sizeof sink);  // EAGAIN: nothing woke us
}

void Manager::RunTimers(int64_t now) {
  if (recheck_at_ms_ >= 0 && now >= recheck_at_ms_) {
    // A stream the kubelet closed without opening another means it lost us: register again.
    recheck_at_ms_ = -1;
    for (auto& [name, srv] : servers_) {
      if (srv->streams() == 0 &&
          ::access((opts_.plugin_dir + "/" + kKubeletSocket).c_str(), F_OK) == 0) {
        spdlog::info("event=stream_closed resource={} (registering again)", name);
        RegisterOne(name, *srv);
      }
    }
  }
  if (retry_at_ms_ >= 0 && now >= retry_at_ms_) {
    retry_at_ms_ = -1;
    for (auto& [name, srv] : servers_) {
      if (!registered_[name]) RegisterOne(name, *srv);
    }
  }
}

Result<void> Manager::Run(bool handle_signals) {
  UniqueFd sigfd;
  if (handle_signals) {
    KUBERDMA_ASSIGN_OR_RETURN(sigfd, OpenSignalFd());
  }
  std::optional<events::KernelEvents> kernel = OpenKernelEvents(opts_.kernel_events);
  KUBERDMA_TRY(StartResources());
  running_ = true;
  Rescan();
  RegisterAll("start");
  int64_t next_poll = NowMs() + cfg_.health_poll_ms;
  while (true) {
    WaitForWork(sigfd, kernel, next_poll);
    uint64_t req = requests_.exchange(0) | SignalRequests(sigfd, kStop, kReload);
    if ((req & kStop) != 0) break;
    if ((req & kReload) != 0) Reload();
    HandleInotify();
    bool rescan = (req & kRescan) != 0 || (kernel && kernel->Drain());
    int64_t now = NowMs();
    if (now >= next_poll) {
      rescan = true;
      next_poll = now + cfg_.health_poll_ms;
    }
    if (rescan) Rescan();
    if ((req & kStreamClosed) != 0 && recheck_at_ms_ < 0) recheck_at_ms_ = now + 300;
    RunTimers(now);
  }
  running_ = false;
  spdlog::info("event=stopping");
  StopResources();
  return {};
}

}  // namespace kuberdma::deviceplugin
