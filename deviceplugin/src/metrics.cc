// SPDX-License-Identifier: Apache-2.0
// The device plugin's metrics on prometheus-cpp, served with /healthz by HttpServer.
#include "kuberdma/deviceplugin/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "http_server.h"

namespace kuberdma::deviceplugin {

namespace {

using FamilyTable = std::map<std::string, std::pair<std::string, std::string>>;

std::map<std::string, std::string> ToMap(const Labels& labels) {
  return {labels.begin(), labels.end()};
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

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(uint16_t port, const Metrics& metrics,
                                                          std::function<bool()> healthy,
                                                          const std::string& address) {
  std::unique_ptr<HttpEndpoint> ep(new HttpEndpoint(std::move(healthy)));
  ep->collectables_.push_back(metrics.registry());
  HttpServer::Options o;
  o.address = address;
  o.port = port;
  o.deadline_ms = kHttpRequestTimeoutMs;
  o.max_connections = kHttpMaxConnections;
  HttpEndpoint* raw = ep.get();
  auto server = HttpServer::Start(o, [raw](const std::string& path) { return raw->Answer(path); });
  if (!server) {
    return Fail(server.error().code(), "serve metrics on " + address + " port " +
                                           std::to_string(port) + ": " + server.error().message());
  }
  ep->server_ = std::move(*server);
  return ep;
}

HttpResponse HttpEndpoint::Answer(const std::string& path) const {
  if (path == "/healthz") {
    return Healthy() ? HttpResponse{200, "ok\n"} : HttpResponse{503, "not serving\n"};
  }
  if (path != "/metrics") return {404, "/metrics or /healthz\n"};
  std::vector<prometheus::MetricFamily> families;
  {
    std::lock_guard lock(mu_);
    for (const auto& c : collectables_) {
      auto f = c->Collect();
      families.insert(families.end(), std::make_move_iterator(f.begin()),
                      std::make_move_iterator(f.end()));
    }
  }
  return {200, prometheus::TextSerializer().Serialize(families),
          "text/plain; version=0.0.4; charset=utf-8"};
}

HttpEndpoint::HttpEndpoint(std::function<bool()> healthy) : healthy_(std::move(healthy)) {}

void HttpEndpoint::Serve(const std::shared_ptr<prometheus::Collectable>& c) {
  std::lock_guard lock(mu_);
  collectables_.push_back(c);
}

uint16_t HttpEndpoint::port() const { return server_->port(); }

HttpEndpoint::~HttpEndpoint() = default;

}  // namespace kuberdma::deviceplugin
