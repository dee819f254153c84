// SPDX-License-Identifier: Apache-2.0
// The device plugin's metrics on prometheus-cpp, and /healthz beside /metrics on its web server.
#include "kuberdma/deviceplugin/metrics.h"

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cstring>
#include <exception>

namespace kuberdma::deviceplugin {

namespace {

using FamilyTable = std::map<std::string, std::pair<std::string, std::string>>;

std::map<std::string, std::string> ToMap(const Labels& labels) {
  return {labels.begin(), labels.end()};
}

// The web server contexts of live endpoints, so /healthz (answered in civetweb's begin_request,
// which carries no user pointer of ours) reaches its endpoint. init_context runs inside the
// Exposer's constructor, on the constructing thread: `g_starting` names the endpoint being built.
std::mutex g_endpoints_mu;
std::map<const mg_context*, const HttpEndpoint*> g_endpoints;
thread_local const HttpEndpoint* g_starting = nullptr;

void InitContext(const mg_context* ctx) {
  std::lock_guard lock(g_endpoints_mu);
  g_endpoints[ctx] = g_starting;
}

void ExitContext(const mg_context* ctx) {
  std::lock_guard lock(g_endpoints_mu);
  g_endpoints.erase(ctx);
}

int BeginRequest(mg_connection* conn) {
  const mg_request_info* req = mg_get_request_info(conn);
  if (req == nullptr || req->local_uri == nullptr || std::strcmp(req->local_uri, "/healthz") != 0) {
    return 0;  // the exposer's /metrics (or its 404)
  }
  bool ok = false;
  {
    std::lock_guard lock(g_endpoints_mu);
    auto it = g_endpoints.find(mg_get_context(conn));
    ok = it != g_endpoints.end() && it->second != nullptr && it->second->Healthy();
  }
  const char* body = ok ? "ok\n" : "not serving\n";
  mg_printf(conn,
            "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n%s",
            ok ? "200 OK" : "503 Service Unavailable", std::strlen(body), body);
  return ok ? 200 : 503;
}

}  // namespace

const FamilyTable& Metrics::Families() {
  static const FamilyTable kFamilies = {
      {"kuberdma_devices", {"gauge", "Advertised device slots per resource and health."}},
      {"kuberdma_hca_healthy", {"gauge", "1 if the HCA is present with every port ACTIVE."}},
      {"kuberdma_port_active", {"gauge", "1 if the HCA port is ACTIVE, 0 if it is not."}},
      {"kuberdma_hca_node_nic",
       {"gauge", "1 if the HCA carries the node's own traffic and is offered by no resource."}},
      {"kuberdma_hca_rail", {"gauge", "The HCA's physical rail (1-based; 0: on no rail)."}},
      {"kuberdma_registered", {"gauge", "1 while the resource is registered with the kubelet."}},
      {"kuberdma_allocations_total", {"counter", "Successful container allocations."}},
      {"kuberdma_allocation_errors_total", {"counter", "Allocate calls answered with an error."}},
      {"kuberdma_registrations_total", {"counter", "Registrations with the kubelet, by result."}},
      {"kuberdma_kubelet_restarts_total", {"counter", "kubelet.sock re-creations seen."}},
      {"kuberdma_config_reloads_total", {"counter", "Config reloads, by result."}},
      {"kuberdma_list_and_watch_streams", {"gauge", "Open ListAndWatch streams per resource."}},
  };
  return kFamilies;
}

struct Metrics::Impl {
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges;
  // The series each gauge family holds, so Clear() can remove them.
  std::map<std::string, std::vector<prometheus::Gauge*>> gauge_series;
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()), impl_(std::make_unique<Impl>()) {
  for (const auto& [name, spec] : Families()) {
    if (spec.first == "counter") {
      impl_->counters[name] =
          &prometheus::BuildCounter().Name(name).Help(spec.second).Register(*registry_);
    } else {
      impl_->gauges[name] =
          &prometheus::BuildGauge().Name(name).Help(spec.second).Register(*registry_);
    }
  }
}

Metrics::~Metrics() = default;

void Metrics::Inc(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mu_);
  auto it = impl_->counters.find(name);
  if (it != impl_->counters.end()) it->second->Add(ToMap(labels)).Increment(by);
}

void Metrics::Set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  auto it = impl_->gauges.find(name);
  if (it == impl_->gauges.end()) return;
  prometheus::Gauge& g = it->second->Add(ToMap(labels));
  g.Set(value);
  auto& series = impl_->gauge_series[name];
  if (std::find(series.begin(), series.end(), &g) == series.end()) series.push_back(&g);
}

void Metrics::Clear(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = impl_->gauges.find(name);
  if (it == impl_->gauges.end()) return;
  for (prometheus::Gauge* g : impl_->gauge_series[name]) it->second->Remove(g);
  impl_->gauge_series.erase(name);
}

void Metrics::Remove(const std::string& name, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto it = impl_->gauges.find(name);
  auto want = ToMap(labels);
  if (it == impl_->gauges.end() || !it->second->Has(want)) return;
  prometheus::Gauge* g = &it->second->Add(want);
  auto& series = impl_->gauge_series[name];
  series.erase(std::remove(series.begin(), series.end(), g), series.end());
  it->second->Remove(g);
}

double Metrics::Get(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mu_);
  auto want = ToMap(labels);
  if (auto c = impl_->counters.find(name); c != impl_->counters.end()) {
    return c->second->Has(want) ? c->second->Add(want).Value() : 0;
  }
  if (auto g = impl_->gauges.find(name); g != impl_->gauges.end()) {
    return g->second->Has(want) ? g->second->Add(want).Value() : 0;
  }
  return 0;
}

std::string Metrics::Render() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

namespace {

// civetweb's options (its docs/UserManual.md): see HttpEndpoint::Start for why each.
std::vector<std::string> ServerOptions(const std::string& address, uint16_t port) {
  std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  return {"listening_ports",       host + ":" + std::to_string(port),
          "num_threads",           std::to_string(kHttpWorkers),
          "request_timeout_ms",    std::to_string(kHttpRequestTimeoutMs),
          "enable_keep_alive",     "no",
          "keep_alive_timeout_ms", "500",
          "linger_timeout_ms",     "0",
          "connection_queue",      std::to_string(kHttpQueue),
          "listen_backlog",        std::to_string(kHttpQueue)};
}

}  // namespace

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(uint16_t port, const Metrics& metrics,
                                                          std::function<bool()> healthy,
                                                          const std::string& address) {
  std::unique_ptr<HttpEndpoint> ep(new HttpEndpoint(std::move(healthy)));
  CivetCallbacks callbacks;
  callbacks.begin_request = BeginRequest;
  callbacks.init_context = InitContext;
  callbacks.exit_context = ExitContext;
  g_starting = ep.get();
  try {
    ep->exposer_ = std::make_unique<prometheus::Exposer>(ServerOptions(address, port), &callbacks);
  } catch (const std::exception& e) {  // CivetException: the port cannot be bound
    g_starting = nullptr;
    return Fail(ErrorCode::kIo,
                "serve metrics on " + address + " port " + std::to_string(port) + ": " + e.what());
  }
  g_starting = nullptr;
  ep->exposer_->RegisterCollectable(metrics.registry());
  auto ports = ep->exposer_->GetListeningPorts();
  ep->port_ = ports.empty() ? port : static_cast<uint16_t>(ports.front());
  return ep;
}

HttpEndpoint::HttpEndpoint(std::function<bool()> healthy) : healthy_(std::move(healthy)) {}

void HttpEndpoint::Serve(const std::shared_ptr<prometheus::Collectable>& c) {
  exposer_->RegisterCollectable(c);
}
HttpEndpoint::~HttpEndpoint() = default;

}  // namespace kuberdma::deviceplugin
