// SPDX-License-Identifier: Apache-2.0
// A small event-driven HTTP/1.x server for /metrics and /healthz on the node network: one thread,
// one epoll set, every connection a file descriptor and a deadline, not a thread. It exists because
// the port is reachable by anyone on the node network and the kubelet's liveness probe must get
// through: civetweb (prometheus-cpp's exposer) gives each connection a worker thread, so a few
// dozen idle clients starve the probe, and libmicrohttpd 0.9.75's timeout is per inactivity, so a
// client writing a byte a second holds its slot for ever. Here each connection has an absolute
// deadline from its accept, and at the connection cap the oldest one is closed to make room.
//
//   HttpServer::Options o{.address = "0.0.0.0", .port = 9109};
//   auto s = HttpServer::Start(o, [](const std::string& path) { return Response{200, "ok\n"}; });
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"

namespace kuberdma::deviceplugin {

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

class HttpServer {
 public:
  struct Options {
    std::string address = "0.0.0.0";
    uint16_t port = 0;                // 0: a free port (port() says which)
    int deadline_ms = 2000;           // from accept to the last byte written
    size_t max_connections = 1024;    // at the cap, the oldest connection is closed
    size_t max_request_bytes = 8192;  // the request line and headers
  };
  // `handler` gets the path of each GET or HEAD request and runs on the server's thread.
  using Handler = std::function<HttpResponse(const std::string& path)>;

  static Result<std::unique_ptr<HttpServer>> Start(const Options& options, Handler handler);
  ~HttpServer();  // stops the thread and closes every connection
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct Loop;
  HttpServer() = default;
  std::unique_ptr<Loop> loop_;
  UniqueFd stop_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace kuberdma::deviceplugin
