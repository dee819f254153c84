// SPDX-License-Identifier: Apache-2.0
// TimedLinkOps: a LinkOps decorator that adds up the wall time spent in calls that change links
// (MoveTo, Change, CreateChild, Delete). The binary logs it at debug level so a slow ADD can be
// split into kernel time (netns moves wait for RCU under rtnl) and our own, without a profiler.
#pragma once

#include <chrono>

#include "kuberdma/link/link_ops.h"

namespace kuberdma::cni {

class TimedLinkOps final : public link::LinkOps {
 public:
  explicit TimedLinkOps(link::LinkOps& inner) : inner_(inner) {}

  Result<link::LinkInfo> GetByName(const link::NetNs& ns, const std::string& name) override {
    return inner_.GetByName(ns, name);
  }
  Result<link::LinkInfo> GetByIndex(const link::NetNs& ns, int ifindex) override {
    return inner_.GetByIndex(ns, ifindex);
  }
  Result<std::vector<link::LinkInfo>> List(const link::NetNs& ns) override {
    return inner_.List(ns);
  }
  Result<void> Change(const link::NetNs& ns, int ifindex, const link::LinkChange& c) override {
    return Timed([&] { return inner_.Change(ns, ifindex, c); });
  }
  Result<void> MoveTo(const link::NetNs& from, int ifindex, const link::NetNs& to,
                      const link::LinkChange& c) override {
    return Timed([&] { return inner_.MoveTo(from, ifindex, to, c); });
  }

  Result<void> CreateChild(const link::NetNs& parent_ns, int parent_ifindex,
                           const link::NetNs& into, const link::ChildLink& child) override {
    return Timed([&] { return inner_.CreateChild(parent_ns, parent_ifindex, into, child); });
  }
  Result<void> Delete(const link::NetNs& ns, int ifindex) override {
    return Timed([&] { return inner_.Delete(ns, ifindex); });
  }

  // Milliseconds spent inside MoveTo, Change, CreateChild and Delete so far.
  double changing_ms() const { return changing_ms_; }

 private:
  template <typename F>
  Result<void> Timed(F&& fn) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = fn();
    changing_ms_ +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  link::LinkOps& inner_;
  double changing_ms_ = 0;
};

}  // namespace kuberdma::cni
