// SPDX-License-Identifier: Apache-2.0
// The LLDP watch: rounds of listening, merged into the last known neighbour of each rail.
#include "kuberdma/deviceplugin/cabling_watch.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <map>
#include <tuple>

#include "kuberdma/base/files.h"

namespace kuberdma::deviceplugin {

namespace {

// `known` updated with this round's rails and what was heard on them; true when it changed.
bool Merge(const std::vector<rails::RailNeighbor>& rails,
           std::vector<contract::CablingRecord>& known) {
  bool changed = false;
  for (const auto& r : rails) {
    if (!r.neighbor) continue;  // silent this round (or in a pod): keep what we had
    contract::CablingRecord rec =
        contract::CablingRecordOf(r, *r.neighbor, static_cast<int64_t>(std::time(nullptr)));
    auto old =
        std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.hca == r.hca; });
    if (old == known.end()) {
      known.push_back(rec);
      changed = true;
    } else if (old->switch_name != rec.switch_name || old->port != rec.port ||
               old->rail != rec.rail) {
      spdlog::warn("event=rail_recabled hca={} rail={} was=\"{} {}\" now=\"{} {}\"", r.hca, r.rail,
                   old->switch_name, old->port, rec.switch_name, rec.port);
      *old = rec;
      changed = true;
    }
  }
  std::sort(known.begin(), known.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rail, a.hca) < std::tie(b.rail, b.hca);
  });
  return changed;
}

}  // namespace

Result<std::unique_ptr<CablingWatch>> CablingWatch::Start(std::string dir,
                                                          lldp::LldpListener& listener, Rails rails,
                                                          std::chrono::milliseconds round,
                                                          OnChange on_change,
                                                          smp::HopProbe* probe) {
  std::unique_ptr<CablingWatch> w(new CablingWatch(std::move(dir), listener, std::move(rails),
                                                   round, std::move(on_change), probe));
  w->stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!w->stop_.valid()) return FailErrno(errno, "eventfd for the LLDP watch");
  if (auto old = contract::ListCabling(w->dir_)) w->known_ = *old;  // a restart keeps the past
  w->thread_ = std::thread([raw = w.get()] { raw->Loop(); });
  return w;
}

CablingWatch::~CablingWatch() {
  uint64_t one = 1;
  (void)WriteAll(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

bool CablingWatch::Hear(std::vector<rails::RailNeighbor>& rails) {
  bool asked = false;
  if (std::any_of(rails.begin(), rails.end(), [](const auto& r) { return !r.infiniband; })) {
    auto heard = rails::HearEthernet(listener_, rails, round_, stop_.valid() ? stop_.get() : -1);
    // Said once, not every round, until it works again (NET_RAW missing stays missing).
    if (!heard && !unavailable_)
      spdlog::warn("event=lldp_unavailable error=\"{}\"", heard.error().message());
    unavailable_ = !heard;
    asked = heard.has_value();
  }
  if (probe_ != nullptr) {
    auto heard = smp::HearInfiniband(*probe_, rails, std::chrono::seconds(1));
    if (!heard && !ib_unavailable_) {
      spdlog::warn("event=smp_unavailable error=\"{}\"", heard.error().message());
    }
    ib_unavailable_ = !heard;
    // Asked when an InfiniBand rail answered (or all did): a probe that reaches none (no umad
    // device in this container) writes nothing, as LLDP without NET_RAW does.
    asked = asked || heard.has_value() ||
            std::any_of(rails.begin(), rails.end(),
                        [](const auto& r) { return r.infiniband && r.neighbor.has_value(); });
  }
  return asked;
}

bool CablingWatch::Round() {
  std::vector<rails::RailNeighbor> rails = rails_();
  if (rails.empty()) return false;  // no scan yet, or no rail on the host
  if (!Hear(rails)) return true;
  if (!Merge(rails, known_) && written_) return true;
  if (auto w = contract::RecordCabling(dir_, known_); !w) {
    spdlog::error("event=cabling_not_recorded error=\"{}\"", w.error().message());
    return true;
  }
  written_ = true;
  if (on_change_) on_change_(known_);
  return true;
}

void CablingWatch::Loop() {
  for (;;) {
    pollfd p{stop_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) return;
    auto began = std::chrono::steady_clock::now();
    // A round that ended early (every rail heard, or LLDP unavailable) waits out the rest; with
    // no rails yet (the first scan), a second.
    auto left = Round() ? round_ - std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - began)
                        : std::chrono::milliseconds(1000);
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) > 0) return;
  }
}

}  // namespace kuberdma::deviceplugin
