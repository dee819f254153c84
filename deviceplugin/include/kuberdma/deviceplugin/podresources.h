// SPDX-License-Identifier: Apache-2.0
// A client of the kubelet's pod-resources API (v1 List), answering in plain types so that tools
// (rdma-doctor) need no gRPC of their own.
//
//   auto a = ListPodResources("/var/lib/kubelet/pod-resources/kubelet.sock",
//   std::chrono::seconds(2)); for (const auto& x : *a) if (x.resource.rfind("rdma/", 0) == 0) ...
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::deviceplugin {

inline constexpr const char* kPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

struct PodDevices {
  std::string pod;  // "<namespace>/<name>"
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
};

// A client that keeps one channel to the kubelet's pod-resources socket (gRPC reconnects it when
// the kubelet restarts): the device plugin asks it for every CNI allocation check, and a channel
// per call costs a connection and an HTTP/2 handshake each time.
class PodResourcesClient {
 public:
  explicit PodResourcesClient(std::string socket);
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;
  // Every device allocation the kubelet reports; kIo when it does not answer within `timeout`.
  Result<std::vector<PodDevices>> List(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every device allocation the kubelet reports. kUnsupported... kIo when the socket cannot be
// reached within `timeout` (the caller falls back to the checkpoint file).
Result<std::vector<PodDevices>> ListPodResources(const std::string& socket,
                                                 std::chrono::milliseconds timeout);

}  // namespace kuberdma::deviceplugin
