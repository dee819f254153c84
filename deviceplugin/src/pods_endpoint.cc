// SPDX-License-Identifier: Apache-2.0
// The pods endpoint: the CNI's allocation check, answered from the kubelet's pod-resources API.
#include "kuberdma/deviceplugin/pods_endpoint.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "kuberdma/base/files.h"
#include "kuberdma/base/log_text.h"
#include "kuberdma/sock/stream.h"

namespace kuberdma::deviceplugin {

namespace {

constexpr int kRequestTimeoutMs = 2000;
constexpr size_t kMaxRequest = 4096;
constexpr std::chrono::milliseconds kKubeletTimeout{2000};

}  // namespace

Result<std::unique_ptr<PodsEndpoint>> PodsEndpoint::Start(std::string socket,
                                                          std::string pod_resources,
                                                          Resolve resolve) {
  std::unique_ptr<PodsEndpoint> ep(
      new PodsEndpoint(std::move(socket), std::move(pod_resources), std::move(resolve)));
  // Mode 0600 whatever the umask: only root (the CNI) may ask.
  KUBERDMA_ASSIGN_OR_RETURN(ep->listen_, sock::ListenUnix(ep->socket_, 0600));
  ep->stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!ep->stop_.valid()) return FailErrno(errno, "pods endpoint eventfd");
  ep->kubelet_ = std::make_unique<PodResourcesClient>(ep->pod_resources_);
  ep->thread_ = std::thread([raw = ep.get()] { raw->Loop(); });
  return ep;
}

PodsEndpoint::~PodsEndpoint() {
  uint64_t one = 1;
  if (stop_.valid()) (void)WriteAll(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  (void)::unlink(socket_.c_str());
}

void PodsEndpoint::Loop() {
  while (true) {
    pollfd p[2] = {{.fd = listen_.get(), .events = POLLIN}, {.fd = stop_.get(), .events = POLLIN}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("event=pods_endpoint_failed error={}",
                    LogQuoted(Error::FromErrno(errno, "poll").message()));
      return;
    }
    if ((p[1].revents & POLLIN) != 0) return;
    UniqueFd conn = sock::Accept(listen_.get());
    if (conn.valid()) Answer(conn.get());
  }
}

void PodsEndpoint::Answer(int conn) {
  contract::PodAnswer answer;
  auto request = ReadLineBefore(
      conn, std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestTimeoutMs),
      kMaxRequest);
  auto query = contract::DecodePodQuery(request ? *request : "");
  if (!query) {
    answer.error = query.error().message();
  } else {
    auto listed = kubelet_->List(kKubeletTimeout);
    if (!listed) {
      answer.error = listed.error().message();
    } else {
      std::vector<PodDevices> mine;
      for (auto& d : *listed) {
        if (d.pod == query->ns + "/" + query->name) mine.push_back(std::move(d));
      }
      answer = resolve_(*query, mine);
      answer.known = answer.known || !mine.empty();
    }
  }
  std::string line = contract::EncodePodAnswer(answer);
  (void)WriteAll(conn, line.data(), line.size());
}

}  // namespace kuberdma::deviceplugin
