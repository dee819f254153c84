// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition and a minimal HTTP listener for /metrics and /healthz.
#include "kuberdma/deviceplugin/metrics.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kuberdma::deviceplugin {

namespace {

const std::map<std::string, std::pair<const char*, const char*>>& Help() {
  static const std::map<std::string, std::pair<const char*, const char*>> kHelp = {
      {"kuberdma_devices", {"gauge", "Advertised device slots per resource and health."}},
      {"kuberdma_hca_healthy", {"gauge", "1 if the HCA is present with every port ACTIVE."}},
      {"kuberdma_allocations_total", {"counter", "Successful container allocations."}},
      {"kuberdma_allocation_errors_total", {"counter", "Allocate calls answered with an error."}},
      {"kuberdma_registrations_total", {"counter", "Registrations with the kubelet, by result."}},
      {"kuberdma_kubelet_restarts_total", {"counter", "kubelet.sock re-creations seen."}},
      {"kuberdma_config_reloads_total", {"counter", "Config reloads, by result."}},
      {"kuberdma_list_and_watch_streams", {"gauge", "Open ListAndWatch streams per resource."}},
  };
  return kHelp;
}

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string Metrics::Key(const std::string& name, const Labels& labels) {
  (void)name;
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=\"" + Escape(v) + "\"";
  return out;
}

void Metrics::Inc(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mu_);
  series_[name][Key(name, labels)] += by;
}

void Metrics::Set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  series_[name][Key(name, labels)] = value;
}

void Metrics::Clear(const std::string& name) {
  std::lock_guard lock(mu_);
  series_.erase(name);
}

double Metrics::Get(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mu_);
  auto it = series_.find(name);
  if (it == series_.end()) return 0;
  auto s = it->second.find(Key(name, labels));
  return s == it->second.end() ? 0 : s->second;
}

std::string Metrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, series] : series_) {
    if (auto h = Help().find(name); h != Help().end()) {
      out += "# HELP " + name + " " + h->second.second + "\n# TYPE " + name + " " +
             h->second.first + "\n";
    }
    for (const auto& [labels, value] : series) {
      char num[64];
      std::snprintf(num, sizeof num, "%.17g", value);
      out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + num + "\n";
    }
  }
  return out;
}

Result<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(uint16_t port, const Metrics& metrics,
                                                          std::function<bool()> healthy) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return FailErrno(errno, "metrics socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return FailErrno(errno, "bind metrics port " + std::to_string(port));
  }
  if (::listen(fd.get(), 16) != 0) return FailErrno(errno, "listen on metrics port");
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<HttpEndpoint>(
      new HttpEndpoint(std::move(fd), ntohs(addr.sin_port), metrics, std::move(healthy)));
}

HttpEndpoint::HttpEndpoint(UniqueFd fd, uint16_t port, const Metrics& m,
                           std::function<bool()> healthy)
    : fd_(std::move(fd)), port_(port), metrics_(m), healthy_(std::move(healthy)), thread_([this] {
        Serve();
      }) {}

HttpEndpoint::~HttpEndpoint() {
  stop_ = true;
  ::shutdown(fd_.get(), SHUT_RDWR);
  thread_.join();
}

void HttpEndpoint::Serve() {
  while (!stop_) {
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c.valid()) continue;
    timeval tv{2, 0};
    ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[2048];
    ssize_t n = ::recv(c.get(), req, sizeof req - 1, 0);
    if (n <= 0) continue;
    req[n] = '\0';
    std::string status = "404 Not Found";
    std::string body = "not found\n";
    std::string type = "text/plain";
    if (std::strncmp(req, "GET /metrics", 12) == 0) {
      status = "200 OK";
      body = metrics_.Render();
      type = "text/plain; version=0.0.4";
    } else if (std::strncmp(req, "GET /healthz", 12) == 0) {
      bool ok = healthy_();
      status = ok ? "200 OK" : "503 Service Unavailable";
      body = ok ? "ok\n" : "not serving\n";
    }
    std::string resp = "HTTP/1.0 " + status + "\r\nContent-Type: " + type +
                       "\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n\r\n" + body;
    (void)!::send(c.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
  }
}

}  // namespace kuberdma::deviceplugin
