// SPDX-License-Identifier: Apache-2.0
// The node view's cabling: each rail's LLDP neighbour (switch, port, VLAN, frame size) and the
// rails cabled to a switch other than the node config's railSwitches (rails/cabling.h).
#include <algorithm>

#include "internal.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/rails/cabling.h"

namespace kuberdma::doctor::internal {

using nlohmann::json;

namespace {

// The rails this doctor can ask: IB rails with a probe, Ethernet rails whose netdev is here.
std::vector<rails::RailNeighbor> RailsOf(const Inputs& in, const netns::NetNs& host,
                                         const std::vector<sysfs::Hca>& hcas,
                                         const rails::NodeRoles& roles) {
  std::vector<rails::RailNeighbor> out;
  auto rails = rails::CablingRails(hcas, roles);
  rails::NoteVfTenants(in.root, rails);
  for (auto& r : rails) {
    // An InfiniBand rail is asked with an SMP; an Ethernet one heard on its netdev, when the
    // netdev is on the host (a pod holding it hears its frames).
    bool askable = r.infiniband ? in.ib_probe != nullptr
                                : in.lldp != nullptr && in.links->GetByName(host, r.netdev);
    if (askable) out.push_back(std::move(r));
  }
  return out;
}

// Each rail's neighbour: LLDP on the Ethernet rails' netdevs, an SMP out of each InfiniBand
// rail's port. False (said in a finding) when the Ethernet rails could not be listened on.
bool Hear(const Inputs& in, std::vector<rails::RailNeighbor>& rails, View& v) {
  if (in.lldp != nullptr) {
    auto heard = rails::HearEthernet(*in.lldp, rails, std::chrono::milliseconds(in.lldp_wait_ms),
                                     lldp::ListenUntil::kEachHeard);
    if (!heard) {
      Add(v, "rail-lldp", Status::kUnknown, heard.error().message(),
          "run on the host (hostNetwork) as root: LLDP is read from each rail's netdev");
      return false;
    }
    std::vector<std::string> gone, away;
    for (auto& r : rails) {
      if (!r.vf_away.empty()) {
        away.push_back("rail " + std::to_string(r.rail) + " (" + r.netdev + ": VF " + r.vf_away +
                       ")");
      }
      if (!r.neighbor || r.neighbor->ttl_s != 0) continue;
      gone.push_back("rail " + std::to_string(r.rail) + " (" + r.netdev + ", " +
                     r.neighbor->Switch() + ")");
      r.neighbor.reset();  // a shutdown LLDPDU: the switch says it is no longer there
    }
    if (!away.empty()) {
      Add(v, "rail-lldp", Status::kUnknown,
          "not listened on " + Join(away, ", ") +
              ": a VF of the rail's PF is in a pod or a VM, and its LLDPDUs reach the PF as if "
              "the switch had sent them",
          "judge these rails when their VFs are back on the host, or from the device plugin's "
          "record (rdma-device-plugin --lldp keeps the switch it heard before)");
    }
    if (!gone.empty()) {
      Add(v, "rail-lldp", Status::kWarn,
          "the switch withdrew itself (an LLDPDU with TTL 0) on " + Join(gone, ", "),
          "the switch port's LLDP agent stopped or the port is shutting down: check the switch "
          "(docs/runbooks.md#rail-lldp)");
    }
  }
  if (in.ib_probe != nullptr) {
    auto heard = smp::HearInfiniband(*in.ib_probe, rails, std::chrono::seconds(1));
    if (!heard) {
      Add(v, "rail-smp", Status::kUnknown,
          "an InfiniBand rail's neighbour was not asked: " + heard.error().message(),
          "run on the host as root with ib_umad loaded (/dev/infiniband/umad*); the port must "
          "be ACTIVE (docs/runbooks.md#rail-smp)");
    }
  }
  return true;
}

json Shown(const rails::RailNeighbor& r) {
  json e = {{"rail", r.rail}, {"hca", r.hca}, {"netdev", r.netdev}};
  if (!r.neighbor) {
    e["neighbor"] = nullptr;
    return e;
  }
  e["switch"] = r.neighbor->Switch();
  e["port"] = r.neighbor->Port();
  e["neighbor"] = lldp::ToJson(*r.neighbor);
  return e;
}

void Judge(const std::vector<rails::RailNeighbor>& heard, const std::vector<std::string>& expected,
           const std::string& config_path, View& v) {
  auto findings = rails::JudgeNodeCabling(heard, expected);
  for (const auto& f : findings) {
    Add(v, "rail-cabling", f.certain ? Status::kFail : Status::kWarn, f.Message(),
        f.certain
            ? "recable the rail to " + f.expected +
                  " (docs/runbooks.md#rail-cabling), or correct railSwitches in " + config_path
            : "a rail-optimised fabric gives each rail its own leaf: check these cables "
              "against the cabling plan (docs/runbooks.md#rail-cabling)");
  }
  std::vector<std::string> silent;
  for (const auto& r : heard) {
    if (!r.neighbor && r.vf_away.empty())
      silent.push_back("rail " + std::to_string(r.rail) + " (" + r.netdev + ")");
  }
  if (!silent.empty()) {
    Add(v, "rail-lldp", Status::kWarn, "no LLDP neighbour heard on " + Join(silent, ", "),
        "enable LLDP transmit on the switch ports (lldp enable / set lldp), or wait longer than "
        "the switch's interval (--lldp-wait)");
  }
  if (findings.empty() && silent.empty()) {
    Add(v, "rail-cabling", Status::kOk,
        std::to_string(heard.size()) + " rail(s) heard" +
            (expected.empty() ? " (no railSwitches to hold them to: the fleet's majority is "
                                "rdma-doctor cabling's)"
                              : ", each on its railSwitches entry"),
        "");
  }
}

}  // namespace

namespace {

// What the device plugin's LLDP watch last heard (rdma-device-plugin --lldp), as rails with their
// neighbours; nullopt when it never wrote one.
std::optional<std::vector<rails::RailNeighbor>> Recorded(const Inputs& in, View& v) {
  auto recs = contract::ListCabling(in.allocations_dir);
  if (!recs) {
    if (recs.error().code() != ErrorCode::kNotFound) {
      Add(v, "rail-lldp", Status::kWarn, recs.error().message(),
          "the device plugin rewrites it on its next round; or listen here: --lldp-wait 35");
    }
    return std::nullopt;
  }
  return contract::RailNeighbors(*recs);
}

}  // namespace

void CheckCabling(const Inputs& in, const netns::NetNs& host, const std::vector<sysfs::Hca>& hcas,
                  const rails::NodeRoles& roles, const rails::NodeConfig& config, View& v) {
  if (in.lldp_wait_ms <= 0) {
    // Not asked to listen: show what the device plugin's watch heard, if it runs.
    auto rails = Recorded(in, v);
    if (!rails) return;
    json shown = json::array();
    for (const auto& r : *rails) shown.push_back(Shown(r));
    v.doc["cabling"] = shown;
    v.doc["cablingSource"] = "rdma-device-plugin --lldp (" + in.allocations_dir + "/cabling.json)";
    Judge(*rails, config.rail_switches, in.node_config, v);
    return;
  }
  if ((in.lldp == nullptr && in.ib_probe == nullptr) || in.links == nullptr) return;
  std::vector<rails::RailNeighbor> rails = RailsOf(in, host, hcas, roles);
  if (rails.empty()) {
    Add(v, "rail-lldp", Status::kUnknown,
        "no Ethernet rail with its netdev on the host to listen on, and no InfiniBand rail",
        "a rail a pod holds hears its LLDP frames in the pod: run this before the pods, or "
        "read the device plugin's record (rdma-device-plugin --lldp)");
    return;
  }
  if (!Hear(in, rails, v)) return;
  json shown = json::array();
  for (const auto& r : rails) shown.push_back(Shown(r));
  v.doc["cabling"] = shown;
  bool ib = std::any_of(rails.begin(), rails.end(), [](const auto& r) { return r.infiniband; });
  v.doc["cablingSource"] = "listened " + std::to_string(in.lldp_wait_ms / 1000) + " s" +
                           (ib ? "; InfiniBand rails asked with an SMP one hop out" : "");
  Judge(rails, config.rail_switches, in.node_config, v);
}

}  // namespace kuberdma::doctor::internal
