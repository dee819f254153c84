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
#include "kuberdma/base/log_text.h"

namespace kuberdma::deviceplugin {

namespace {

using Records = std::vector<contract::CablingRecord>;

std::string Said(const contract::CablingRecord& r) {
  return LogQuoted(r.switch_name + " " + r.port);
}

// Whether `r`'s neighbour is to be withdrawn from `known` now (`old` its record): it said it is
// gone (an LLDPDU with TTL 0), or its netdev was listened on for a whole round without a word and
// its TTL has passed. A rail a pod holds (not listened on) keeps what it had.
const char* WithdrawReason(const rails::RailNeighbor& r, const contract::CablingRecord& old,
                           int64_t now) {
  if (r.infiniband) return nullptr;  // an SMP answer has no lifetime
  if (r.neighbor) return r.neighbor->ttl_s == 0 ? "shutdown" : nullptr;
  return r.listened && old.expires_at != 0 && now >= old.expires_at ? "expired" : nullptr;
}

struct Merged {
  bool changed = false;    // a neighbour added, recabled or withdrawn: republish
  bool refreshed = false;  // only heard again: rewrite the record's times
};

// `known` updated with one rail's round.
void MergeOne(const rails::RailNeighbor& r, int64_t now, Records& known, Merged& m) {
  auto old =
      std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.hca == r.hca; });
  if (old != known.end()) {
    if (const char* why = WithdrawReason(r, *old, now)) {
      spdlog::warn("event=rail_neighbor_withdrawn hca={} rail={} was={} reason={}", r.hca, r.rail,
                   Said(*old), why);
      known.erase(old);
      m.changed = true;
      return;
    }
  }
  if (!r.neighbor || (!r.infiniband && r.neighbor->ttl_s == 0)) return;  // nothing to learn
  contract::CablingRecord rec = contract::CablingRecordOf(r, *r.neighbor, now);
  if (old == known.end()) {
    spdlog::info("event=rail_neighbor_heard hca={} rail={} now={}", r.hca, r.rail, Said(rec));
    known.push_back(rec);
    m.changed = true;
  } else if (old->switch_name != rec.switch_name || old->port != rec.port ||
             old->rail != rec.rail) {
    spdlog::warn("event=rail_recabled hca={} rail={} was={} now={}", r.hca, r.rail, Said(*old),
                 Said(rec));
    *old = rec;
    m.changed = true;
  } else if (old->heard_at != rec.heard_at || old->expires_at != rec.expires_at) {
    *old = rec;
    m.refreshed = true;
  }
}

// `known` updated with this round's rails and what was heard on them (or not).
Merged Merge(const std::vector<rails::RailNeighbor>& rails, Records& known) {
  const auto now = static_cast<int64_t>(std::time(nullptr));
  Merged m;
  for (const auto& r : rails) MergeOne(r, now, known, m);
  std::sort(known.begin(), known.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rail, a.hca) < std::tie(b.rail, b.hca);
  });
  return m;
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
    // The whole round, rounds back to back: a switch says its shutdown LLDPDU once.
    auto heard = rails::HearEthernet(listener_, rails, round_, lldp::ListenUntil::kWaitOver,
                                     stop_.valid() ? stop_.get() : -1);
    // Said once, not every round, until it works again (NET_RAW missing stays missing).
    if (!heard && !unavailable_)
      spdlog::warn("event=lldp_unavailable error={}", LogQuoted(heard.error().message()));
    unavailable_ = !heard;
    asked = heard.has_value();
  }
  if (probe_ != nullptr) {
    auto heard = smp::HearInfiniband(*probe_, rails, std::chrono::seconds(1));
    if (!heard && !ib_unavailable_) {
      spdlog::warn("event=smp_unavailable error={}", LogQuoted(heard.error().message()));
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

void CablingWatch::KeepVfsOut(std::vector<rails::RailNeighbor>& rails) {
  const std::vector<rails::RailNeighbor> now = rails_();
  for (auto& r : rails) {
    auto it = std::find_if(now.begin(), now.end(), [&](const auto& n) { return n.hca == r.hca; });
    if (r.vf_away.empty() && it != now.end() && !it->vf_away.empty()) {
      r.vf_away = it->vf_away;  // went away while the round listened: its word is void
      r.neighbor.reset();
      r.listened = false;
    }
    std::string& logged = vf_away_[r.hca];
    if (logged == r.vf_away) continue;
    if (r.vf_away.empty()) {
      spdlog::info("event=rail_listened_again hca={} rail={}", r.hca, r.rail);
    } else {
      spdlog::warn(
          "event=rail_not_listened hca={} rail={} vf={} reason={}", r.hca, r.rail, r.vf_away,
          LogQuoted("a VF of its PF is in a pod or a VM, and a VF's LLDPDUs reach the PF as the "
                    "switch's would: the rail keeps the switch it had until the VF is back"));
    }
    logged = r.vf_away;
  }
}

bool CablingWatch::Round() {
  std::vector<rails::RailNeighbor> rails = rails_();
  if (rails.empty()) return false;  // no scan yet, or no rail on the host
  if (!Hear(rails)) return true;
  KeepVfsOut(rails);
  Merged m = Merge(rails, known_);
  if (!m.changed && !m.refreshed && written_) return true;
  if (auto w = contract::RecordCabling(dir_, known_); !w) {
    spdlog::error("event=cabling_not_recorded error={}", LogQuoted(w.error().message()));
    return true;
  }
  // A first write publishes what a restart kept; a refresh only moves the times.
  if ((m.changed || !written_) && on_change_) on_change_(known_);
  written_ = true;
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
