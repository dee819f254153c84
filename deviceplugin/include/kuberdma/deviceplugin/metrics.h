// SPDX-License-Identifier: Apache-2.0
// Metrics and health endpoints over prometheus-cpp (Debian's prometheus-cpp-dev): the device
// plugin's counters and gauges in a prometheus::Registry, and /metrics (its text exposition) and
// /healthz (200 while serving, 503 otherwise) served by one event-driven server (http_server.h).
//
//   Metrics m;
//   m.Inc("kuberdma_allocations_total", {{"resource", "rdma/shared"}});
//   auto http = HttpEndpoint::Start(9109, m, [] { return true; });   // serves until destroyed
//
// Family names, types and help texts are a fixed table (metrics.cc), the contract that
// deploy/'s alert rules are checked against.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"

namespace prometheus {
class Registry;
class Collectable;
}  // namespace prometheus

namespace kuberdma::deviceplugin {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Adds `by` to counter `name` (a family ending in _total) with `labels`.
  void Inc(const std::string& name, const Labels& labels, double by = 1);
  // Sets gauge `name` with `labels`.
  void Set(const std::string& name, const Labels& labels, double value);
  // Drops every series of gauge `name` (a family that is recomputed whole).
  void Clear(const std::string& name);
  // Drops the one series of gauge `name` with `labels` (its subject is gone).
  void Remove(const std::string& name, const Labels& labels);
  // The current value of a series; 0 when it does not exist.
  double Get(const std::string& name, const Labels& labels) const;
  // The text exposition, as /metrics serves it.
  std::string Render() const;
  // The names, types ("counter", "gauge") and help of every family this plugin exports.
  static const std::map<std::string, std::pair<std::string, std::string>>& Families();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  struct Impl;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Impl> impl_;
  mutable std::mutex mu_;
};

inline constexpr int kHttpRequestTimeoutMs = 2000;
inline constexpr size_t kHttpMaxConnections = 1024;

struct HttpResponse;
class HttpServer;

class HttpEndpoint {
 public:
  // Serves /metrics and /healthz on `address`:`port` (0 picks a free port; see port()).
  // `healthy` answers /healthz. An error when the port cannot be bound.
  //
  // The port is on the node network (hostNetwork), so anyone there can connect. One thread serves
  // every connection (epoll), each closed kHttpRequestTimeoutMs after its accept however slowly it
  // writes, and at kHttpMaxConnections open the oldest is closed for the newest: idle or slow
  // clients cannot keep the kubelet's liveness probe (one second) from an answer, however many
  // there are (tests/deviceplugin/grpc_test.cc holds 300 open while probing).
  static Result<std::unique_ptr<HttpEndpoint>> Start(uint16_t port, const Metrics& metrics,
                                                     std::function<bool()> healthy,
                                                     const std::string& address = "0.0.0.0");
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;
  uint16_t port() const;
  bool Healthy() const { return healthy_(); }
  // Also serves what `c` collects on each scrape (PortCounters); kept alive by the caller.
  void Serve(const std::shared_ptr<prometheus::Collectable>& c);

 private:
  explicit HttpEndpoint(std::function<bool()> healthy);
  HttpResponse Answer(const std::string& path) const;
  std::function<bool()> healthy_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<HttpServer> server_;  // last: stopped before what it reads
};

}  // namespace kuberdma::deviceplugin
