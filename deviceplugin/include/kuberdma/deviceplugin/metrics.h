// SPDX-License-Identifier: Apache-2.0
// Metrics and health endpoints: /metrics in the Prometheus text exposition format and /healthz,
// served by a small HTTP/1.0 listener. (prometheus-cpp is not packaged in Debian 12; the
// exposition format is simple enough to write directly.)
//
//   Metrics m;
//   m.Inc("kuberdma_allocations_total", {{"resource", "rdma/shared"}});
//   HttpEndpoint http(9109, m, [] { return true; });   // serves until destroyed
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"

namespace kuberdma::deviceplugin {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  void Inc(const std::string& name, const Labels& labels, double by = 1);
  void Set(const std::string& name, const Labels& labels, double value);
  // Drops every series of `name` (a gauge family that is recomputed whole).
  void Clear(const std::string& name);
  double Get(const std::string& name, const Labels& labels) const;
  // The text exposition, with HELP and TYPE lines for known families.
  std::string Render() const;

 private:
  static std::string Key(const std::string& name, const Labels& labels);
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, double>> series_;  // name -> rendered labels -> value
};

class HttpEndpoint {
 public:
  // Listens on 0.0.0.0:`port` (0 picks a free port; see port()). `healthy` answers /healthz.
  static Result<std::unique_ptr<HttpEndpoint>> Start(uint16_t port, const Metrics& metrics,
                                                     std::function<bool()> healthy);
  ~HttpEndpoint();
  uint16_t port() const { return port_; }

 private:
  HttpEndpoint(UniqueFd fd, uint16_t port, const Metrics& m, std::function<bool()> healthy);
  void Serve();
  UniqueFd fd_;
  uint16_t port_;
  const Metrics& metrics_;
  std::function<bool()> healthy_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kuberdma::deviceplugin
