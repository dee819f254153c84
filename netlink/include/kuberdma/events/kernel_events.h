// SPDX-License-Identifier: Apache-2.0
// KernelEvents: the two kernel event streams that say an HCA may have changed, as pollable
// descriptors: rtnetlink link notifications (RTNLGRP_LINK: carrier and oper-state changes of the
// HCAs' netdevs) and kobject uevents (an RDMA device or netdev added or removed: driver reloads).
//
//   KUBERDMA_ASSIGN_OR_RETURN(KernelEvents ev, KernelEvents::Open());
//   poll({ev.link_fd(), ev.uevent_fd()}, ...);
//   if (ev.Drain()) Rescan();   // true when something relevant arrived
//
// ib_core sends no event when an InfiniBand port changes state, so readers still re-read port state
// on a short timer; these events make the common cases immediate.
#pragma once

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"

namespace kuberdma::events {

class KernelEvents {
 public:
  // Opens both sockets (non-blocking). The uevent socket needs the initial network namespace
  // (where the kernel broadcasts them); elsewhere it is absent and uevent_fd() is -1.
  static Result<KernelEvents> Open();

  int link_fd() const { return link_.get(); }
  int uevent_fd() const { return uevent_.get(); }
  // Reads everything pending on both sockets; true if any link message, or any uevent of the
  // infiniband, infiniband_verbs or net subsystems, arrived.
  bool Drain();

 private:
  KernelEvents(UniqueFd link, UniqueFd uevent)
      : link_(std::move(link)), uevent_(std::move(uevent)) {}
  UniqueFd link_;
  UniqueFd uevent_;
};

// True when a raw uevent message (NUL-separated "KEY=value" strings) concerns RDMA devices or
// netdevs.
bool UeventIsRelevant(const char* msg, size_t len);

}  // namespace kuberdma::events
