// SPDX-License-Identifier: Apache-2.0
// NetlinkRdmaOps: RdmaOps over libnl3 and NETLINK_RDMA, one socket per namespace.
#pragma once

#include <map>
#include <memory>
#include <optional>

#include "kuberdma/nl/common.h"
#include "kuberdma/rdma/rdma_ops.h"

struct nl_sock;

namespace kuberdma::rdma {

class NetlinkRdmaOps final : public RdmaOps {
 public:
  NetlinkRdmaOps();
  ~NetlinkRdmaOps() override;
  NetlinkRdmaOps(const NetlinkRdmaOps&) = delete;
  NetlinkRdmaOps& operator=(const NetlinkRdmaOps&) = delete;

  Result<std::vector<RdmaDevice>> List(const NetNs& ns) override;
  Result<RdmaDevice> GetByName(const NetNs& ns, const std::string& name) override;
  Result<RdmaPort> GetPort(const NetNs& ns, uint32_t dev_index, uint32_t port) override;
  Result<NetnsMode> GetNetnsMode(const NetNs& ns) override;
  Result<void> SetNetnsMode(const NetNs& ns, NetnsMode mode) override;
  Result<void> MoveTo(const NetNs& from, uint32_t dev_index, const NetNs& to) override;
  Result<void> Rename(const NetNs& ns, uint32_t dev_index, const std::string& name) override;

 private:
  Result<nl_sock*> Socket(const NetNs& ns);
  // Sends `msg` and collects every reply message (for dumps, all parts).
  Result<std::vector<std::vector<uint8_t>>> Request(const NetNs& ns,
                                                    const std::vector<uint8_t>& msg,
                                                    const std::string& what);
  nl::NlSocketCache socks_;
};

// Whether this kernel has the RDMA netlink family at all (ib_core loaded). Cheap; no side effects.
bool KernelHasRdma();

}  // namespace kuberdma::rdma
