// SPDX-License-Identifier: Apache-2.0
// NetlinkVfOps: VfOps over rtnetlink (libnl3's sockets and attribute helpers), one socket per
// namespace, created inside it.
#pragma once

#include "kuberdma/link/link_ops.h"
#include "kuberdma/link/vf_ops.h"
#include "kuberdma/nl/common.h"

namespace kuberdma::link {

class NetlinkVfOps final : public VfOps {
 public:
  NetlinkVfOps();
  ~NetlinkVfOps() override;
  NetlinkVfOps(const NetlinkVfOps&) = delete;
  NetlinkVfOps& operator=(const NetlinkVfOps&) = delete;

  Result<std::vector<VfConfig>> List(const NetNs& ns, int pf_ifindex) override;
  Result<void> Set(const NetNs& ns, int pf_ifindex, const VfChange& change) override;

 private:
  nl::NlSocketCache socks_;
};

}  // namespace kuberdma::link
