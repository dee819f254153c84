// SPDX-License-Identifier: Apache-2.0
// rdma-device-plugin --lldp: every rail's neighbour for the whole life of the plugin
// (docs/fabric.md): an Ethernet rail's heard by LLDP, an InfiniBand rail's asked with an SMP one
// hop out (smp.h), written to the allocations directory (the node contract's CablingRecord) for the
// DRA driver's leaf attribute, the node's topology labels and the doctor. One thread; each round
// listens until every rail has been heard or `round` is over, then writes what changed. A
// neighbour that says it is gone (an LLDPDU with TTL 0) is withdrawn at once, and one not heard
// for a whole round once its TTL has passed is withdrawn then: from the record, and through
// `on_change` from the DRA attribute and the labels, as a recabling is (each event logged). A rail
// a pod holds keeps the neighbour it had: its frames go to the pod.
//
//   auto watch = CablingWatch::Start(dir, listener, [&] { return manager.RailNetdevs(); });
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/lldp/lldp.h"
#include "kuberdma/rails/cabling.h"
#include "kuberdma/smp/smp.h"

namespace kuberdma::deviceplugin {

class CablingWatch {
 public:
  // The rails to listen on this round (an Ethernet rail's netdev on the host, an InfiniBand
  // rail's port; neighbor unset; `vf_away` where a VF of its PF is away, rails::NoteVfTenants).
  // Asked again when the round is over: a rail whose VF went away meanwhile takes nothing from it.
  using Rails = std::function<std::vector<rails::RailNeighbor>()>;
  // Called after each write with the records written (the topology labels' writer).
  using OnChange = std::function<void(const std::vector<contract::CablingRecord>&)>;

  // Starts the thread. `listener` and `probe` (null: InfiniBand rails are not asked) must
  // outlive the watch. kIo when the eventfd cannot be made.
  static Result<std::unique_ptr<CablingWatch>> Start(
      std::string dir, lldp::LldpListener& listener, Rails rails,
      std::chrono::milliseconds round = std::chrono::seconds(35), OnChange on_change = {},
      smp::HopProbe* probe = nullptr);
  // Stops the thread at once (it never waits out a round).
  ~CablingWatch();
  CablingWatch(const CablingWatch&) = delete;
  CablingWatch& operator=(const CablingWatch&) = delete;

  // One round: listen, merge, write when changed or heard again (or never written), `on_change`
  // when a neighbour came, moved or went. False when there was no rail to listen on.
  bool Round();

 private:
  CablingWatch(std::string dir, lldp::LldpListener& listener, Rails rails,
               std::chrono::milliseconds round, OnChange on_change, smp::HopProbe* probe)
      : dir_(std::move(dir)),
        listener_(listener),
        rails_(std::move(rails)),
        round_(round),
        on_change_(std::move(on_change)),
        probe_(probe) {}
  void Loop();
  // Each rail's neighbour this round (LLDP, then SMPs); false when neither could ask.
  bool Hear(std::vector<rails::RailNeighbor>& rails);
  // Voids what a rail heard when a VF of its PF went away during the round; logs each rail that
  // stops or starts being listened on for its VFs.
  void KeepVfsOut(std::vector<rails::RailNeighbor>& rails);

  std::string dir_;
  lldp::LldpListener& listener_;
  Rails rails_;
  std::chrono::milliseconds round_;
  OnChange on_change_;
  smp::HopProbe* probe_;
  std::vector<contract::CablingRecord> known_;  // by rail order; the thread's own
  bool written_ = false;
  bool unavailable_ = false;                    // the last round could not listen (said once)
  bool ib_unavailable_ = false;                 // the last round's SMPs failed (said once)
  std::map<std::string, std::string> vf_away_;  // HCA -> its PF's VF away, as last logged
  UniqueFd stop_;                               // eventfd
  std::thread thread_;
};

}  // namespace kuberdma::deviceplugin
