// SPDX-License-Identifier: Apache-2.0
// The device plugin's answer to the CNI's "which HCAs was this pod allocated?" (contract/
// allocation.h): a unix socket in the allocations directory, one JSON line each way, answered from
// the kubelet's pod-resources API. One thread handles one connection at a time; each connection
// is bounded (a line of at most 4 KiB within two seconds), and so is the kubelet's answer.
//
//   auto ep = PodsEndpoint::Start(dir + "/pods.sock", kPodResourcesSocket, resolve);
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/deviceplugin/podresources.h"

namespace kuberdma::deviceplugin {

class PodsEndpoint {
 public:
  // Turns the kubelet's allocations of one pod (its entries of ListPodResources) into HCAs.
  using Resolve =
      std::function<contract::PodAnswer(const contract::PodQuery&, const std::vector<PodDevices>&)>;

  // Listens on `socket` (mode 0600: the CNI runs as root; an old socket is replaced), asking the
  // kubelet at `pod_resources`. An error when the socket cannot be made.
  static Result<std::unique_ptr<PodsEndpoint>> Start(std::string socket, std::string pod_resources,
                                                     Resolve resolve);
  // Stops the thread and removes the socket.
  ~PodsEndpoint();
  PodsEndpoint(const PodsEndpoint&) = delete;
  PodsEndpoint& operator=(const PodsEndpoint&) = delete;

  const std::string& socket() const { return socket_; }

 private:
  PodsEndpoint(std::string socket, std::string pod_resources, Resolve resolve)
      : socket_(std::move(socket)),
        pod_resources_(std::move(pod_resources)),
        resolve_(std::move(resolve)) {}
  void Loop();
  void Answer(int conn);

  std::string socket_;
  std::string pod_resources_;
  Resolve resolve_;
  std::unique_ptr<PodResourcesClient> kubelet_;
  UniqueFd listen_;
  UniqueFd stop_;  // eventfd
  std::thread thread_;
};

}  // namespace kuberdma::deviceplugin
