// SPDX-License-Identifier: Apache-2.0
// What the doctor's tests give rdma-doctor in place of a pod: its environment, its addresses.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/link/addr_ops.h"

namespace kuberdma::doctor {

// The pod's environment; NCCL is looked for only where a test puts it (KUBERDMA_NCCL_LIBRARY),
// never in this machine's own libraries.
inline std::function<const char*(const char*)> Env(std::map<std::string, std::string> m) {
  m.emplace("KUBERDMA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(m));
  return [shared](const char* k) -> const char* {
    auto it = shared->find(k);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// This namespace's interfaces all carry `ip`: the pod's own addresses, as the doctor lists them.
class OwnAddrs final : public link::AddrOps {
 public:
  explicit OwnAddrs(std::string ip) : ip_(std::move(ip)) {}
  Result<void> AddAddress(const netns::NetNs&, int, const link::IpPrefix&) override { return {}; }
  Result<void> DeleteAddress(const netns::NetNs&, int, const link::IpPrefix&) override {
    return {};
  }
  Result<std::vector<link::IpPrefix>> ListAddresses(const netns::NetNs&, int) override {
    return std::vector<link::IpPrefix>{{.family = 4, .address = ip_, .prefix_len = 24}};
  }
  Result<void> AddRoute(const netns::NetNs&, const link::Route&) override { return {}; }
  Result<std::vector<link::Route>> ListRoutes(const netns::NetNs&, int) override {
    return std::vector<link::Route>{};
  }
  Result<std::vector<std::pair<int, link::IpPrefix>>> ListAllAddresses(
      const netns::NetNs&) override {
    return std::vector<std::pair<int, link::IpPrefix>>{};
  }
  Result<std::vector<link::Route>> ListAllRoutes(const netns::NetNs&) override {
    return std::vector<link::Route>{};
  }

 private:
  std::string ip_;
};

}  // namespace kuberdma::doctor
