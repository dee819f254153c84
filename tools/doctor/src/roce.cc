// SPDX-License-Identifier: Apache-2.0
// RoCE checks: the pod's GID tables as show_gids prints them, whether each HCA has a GID NCCL can
// route with, whether NCCL_IB_GID_INDEX fits every HCA, NCCL's retry settings, and the node's
// lossless setup per RoCE port (PFC, trust, ECN).
#include <algorithm>
#include <cstdlib>

#include "internal.h"

namespace kuberdma::doctor::internal {

// The IPv4 addresses on this namespace's interfaces: the pod's own. On an HCA several pods share,
// every pod's entries are in the one table and `ndevs` names collide (net1 for all), so an entry
// is the pod's when its address is. Empty when the addresses cannot be listed.
std::vector<std::string> OwnIpv4(const Inputs& in) {
  std::vector<std::string> out;
  auto here = netns::NetNs::Current();
  if (!here || in.links == nullptr || in.addrs == nullptr) return out;
  auto links = in.links->List(*here);
  if (!links) return out;
  for (const auto& l : *links) {
    auto list = in.addrs->ListAddresses(*here, l.ifindex);
    if (!list) continue;
    for (const auto& a : *list)
      if (a.family == 4) out.push_back(a.address);
  }
  return out;
}

using nlohmann::json;

namespace {

constexpr const char* kGidCheck = "roce-routable-gid";
constexpr const char* kGidIndexCheck = "nccl-ib-gid-index";
constexpr const char* kFamilyFix =
    "unset NCCL_IB_GID_INDEX and let NCCL choose per HCA: NCCL_IB_ADDR_FAMILY=AF_INET and "
    "NCCL_IB_ROCE_VERSION_NUM=2";
// The same advice for a pod that does not set NCCL_IB_GID_INDEX: nothing to unset.
constexpr const char* kFamilyHint =
    "let NCCL choose the GID by family and version, not by scanning: NCCL_IB_ADDR_FAMILY=AF_INET "
    "and NCCL_IB_ROCE_VERSION_NUM=2";

bool IsRoce(const sysfs::Hca& h) { return h.link_layer() == sysfs::LinkLayer::kEthernet; }

std::string NetdevOf(const sysfs::Hca& h, const sysfs::Port& p) {
  if (!p.netdev.empty()) return p.netdev;
  return h.netdevs.empty() ? "" : h.netdevs.front();
}

// A table with a hole before its last entry: indices are not what a dense table would give.
bool Sparse(const sysfs::Port& p) {
  for (size_t i = 0; i < p.gids.size(); ++i) {
    if (p.gids[i].index != i) return true;
  }
  return false;
}

bool Owns(const std::vector<std::string>& own, const sysfs::Gid& g) {
  return !g.Ipv4().empty() && std::find(own.begin(), own.end(), g.Ipv4()) != own.end();
}

// The entry NCCL should use: the first RoCE v2 one of the pod's own addresses, or (addresses
// unknown) the first routable one of the port's netdev.
const sysfs::Gid* Preferred(const sysfs::Port& p, const std::string& netdev,
                            const std::vector<std::string>& own) {
  return own.empty() ? sysfs::FirstRoutableV2(p.gids, netdev)
                     : sysfs::FirstV2ForAddresses(p.gids, own);
}

json GidRow(const sysfs::Hca& h, const sysfs::Port& p, const sysfs::Gid& g,
            const std::vector<std::string>& own) {
  json row = {{"device", h.name},  {"port", p.number},
              {"index", g.index},  {"gid", g.gid},
              {"ipv4", g.Ipv4()},  {"version", g.IsRoceV2() ? "v2" : (g.IsRoceV1() ? "v1" : "")},
              {"netdev", g.netdev}};
  if (!own.empty() && !g.Ipv4().empty()) row["owner"] = Owns(own, g) ? "this pod" : "another pod";
  return row;
}

// NCCL_IB_GID_INDEX names one index for every HCA: it must be a routable entry on each.
void CheckGidIndex(const sysfs::Hca& h, const sysfs::Port& p, int index,
                   const std::vector<std::string>& own, View& v) {
  auto it = std::find_if(p.gids.begin(), p.gids.end(),
                         [&](const sysfs::Gid& g) { return static_cast<int>(g.index) == index; });
  std::string what;
  if (it == p.gids.end()) {
    what = "empty";
  } else if (it->IsLinkLocal()) {
    what = "link-local (" + it->Address() + ")";
  } else if (!it->IsRoceV2()) {
    what = "RoCE v1";
  } else if (!own.empty() && !Owns(own, *it)) {
    what = "another pod's (" + it->Ipv4() + ", not an address of this pod)";
  } else if (own.empty() && it->netdev != NetdevOf(h, p)) {
    what = "of another netdev (" + it->netdev + ")";
  }
  if (what.empty()) return;
  const sysfs::Gid* good = Preferred(p, NetdevOf(h, p), own);
  Add(v, kGidIndexCheck, Status::kFail,
      "NCCL_IB_GID_INDEX=" + std::to_string(index) + " breaks " + h.name + ": its entry " +
          std::to_string(index) + " is " + what +
          (good != nullptr ? "; its RoCE v2 GID for " + good->Ipv4() + " is at index " +
                                 std::to_string(good->index)
                           : ""),
      kFamilyFix);
}

// The port's routable RoCE v2 GID (the pod's own where its addresses are known) into `routable`,
// or a warning that it has none.
void CheckRoutable(const sysfs::Hca& h, const sysfs::Port& p, const std::vector<std::string>& own,
                   std::vector<std::string>* routable, View& v) {
  std::string nd = NetdevOf(h, p);
  if (const sysfs::Gid* g = Preferred(p, nd, own)) {
    routable->push_back(h.name + " " + std::to_string(g->index) + ":" + g->Ipv4());
    return;
  }
  Add(v, kGidCheck, Status::kWarn,
      h.name + " has no RoCE v2 GID for a routable address of " + nd +
          (own.empty() ? "" : " that is this pod's") +
          " (link-local only): the interface has no IP address, so NCCL reaches peers on "
          "this L2 segment only",
      "give the attachment an address: an ipam section in the NAD (host-local or "
      "whereabouts, one range per rail; docs/cni.md)");
}

// On a shared HCA: "mlx5_0: index 3 (10.10.1.2) before this pod's 6" when NCCL's automatic
// choice (the first RoCE v2 IPv4 entry) would take another pod's entry; "" otherwise.
std::string AutoChoiceIsAnotherPods(const sysfs::Hca& h, const sysfs::Port& p,
                                    const std::vector<std::string>& own) {
  // An HCA without an entry of the pod's is not its (the routable-GID check says so).
  const sysfs::Gid* mine = own.empty() ? nullptr : sysfs::FirstV2ForAddresses(p.gids, own);
  if (mine == nullptr) return "";
  for (const auto& g : p.gids) {
    if (!g.IsRoceV2() || g.Ipv4().empty()) continue;
    if (Owns(own, g)) return "";
    return h.name + ": index " + std::to_string(g.index) + " (" + g.Ipv4() +
           ") before this pod's " + std::to_string(mine->index);
  }
  return "";
}

void CheckSharedTables(const Inputs& in, const std::vector<std::string>& taken, View& v) {
  if (taken.empty()) return;
  // Either variable decides NCCL's choice; CheckGidIndex judges an index, the range is the
  // operator's (rdma-validate --nccl-env prints one that holds).
  if (!Env(in, "NCCL_IB_GID_INDEX").empty() || !Env(in, "NCCL_IB_ADDR_RANGE").empty()) return;
  Add(v, "roce-gid-table-shared", Status::kFail,
      "NCCL's automatic GID choice (the first RoCE v2 IPv4 entry) would take another pod's "
      "entry: " +
          Join(taken, "; "),
      "eval \"$(rdma-validate --nccl-env)\" before NCCL starts: it sets NCCL_IB_GID_INDEX or "
      "NCCL_IB_ADDR_RANGE to this pod's entries, or says why neither can "
      "(docs/install.md#one-hca-per-pod-or-many-pods-per-hca)");
}

}  // namespace

void GidTables(const Inputs& in, const std::vector<sysfs::Hca>& expected, View& v) {
  json rows = json::array();
  std::string gid_index = Env(in, "NCCL_IB_GID_INDEX");
  std::vector<std::string> routable;
  std::vector<std::string> sparse;
  std::vector<std::string> taken;  // HCAs whose automatic choice is another pod's entry
  const std::vector<std::string> own = OwnIpv4(in);
  for (const auto& listed : expected) {
    if (!IsRoce(listed)) continue;
    auto h = sysfs::ReadHca(in.root, listed.name, sysfs::HcaDetail::kTables);
    if (!h) continue;
    for (const auto& p : h->ports) {
      for (const auto& g : p.gids) rows.push_back(GidRow(*h, p, g, own));
      CheckRoutable(*h, p, own, &routable, v);
      if (!gid_index.empty()) CheckGidIndex(*h, p, std::atoi(gid_index.c_str()), own, v);
      if (Sparse(p)) sparse.push_back(h->name);
      if (auto t = AutoChoiceIsAnotherPods(*h, p, own); !t.empty()) taken.push_back(t);
    }
  }
  v.doc["gids"] = rows;
  CheckSharedTables(in, taken, v);
  if (!routable.empty()) {
    Add(v, kGidCheck, Status::kOk, "RoCE v2 GIDs (HCA index:address): " + Join(routable, ", "));
  }
  if (!sparse.empty()) {
    std::string nccl = NcclLibraryVersion(in);
    Add(v, "roce-gid-table-sparse", Status::kWarn,
        Join(sparse) +
            ": GID table has holes (indices are not fixed); NCCL's automatic GID choice "
            "has mis-scanned such tables in some versions (NCCL seen: " +
            (nccl.empty() ? "none found" : nccl) + ")",
        std::string(gid_index.empty() ? kFamilyHint : kFamilyFix) +
            "; or re-add the address so the table is dense again");
  }
}

void CheckRoceRetries(const Inputs& in, const std::vector<sysfs::Hca>& expected, View& v) {
  if (std::none_of(expected.begin(), expected.end(), IsRoce)) return;
  // A RoCE fabric that pauses (PFC) delays packets: NCCL_IB_TIMEOUT 22 waits 4.096 us x 2^22,
  // about 17 s, per try, and 7 retries is the most the verbs allow.
  struct Want {
    const char* var;
    const char* check;
    int recommended;
    int nccl_default;
  };
  for (auto [var, check, want, dflt] : {Want{"NCCL_IB_TIMEOUT", "nccl-ib-timeout", 22, 20},
                                        Want{"NCCL_IB_RETRY_CNT", "nccl-ib-retry-cnt", 7, 7}}) {
    std::string value = Env(in, var);
    int have = value.empty() ? dflt : std::atoi(value.c_str());
    if (have >= want) {
      Add(v, check, Status::kOk,
          value.empty() ? std::string(var) + " is unset: NCCL's default " + std::to_string(dflt) +
                              " meets the " + std::to_string(want) + " a lossless RoCE fabric needs"
                        : std::string(var) + "=" + value);
      continue;
    }
    Add(v, check, Status::kWarn,
        std::string(var) + (value.empty() ? " is unset (NCCL's default " : " is " + value + " (") +
            std::to_string(have) + "): RoCE retransmits give up before " + std::to_string(want) +
            " would, when a lossless fabric pauses",
        "set NCCL_IB_TIMEOUT=22 (about 17 s per try) and NCCL_IB_RETRY_CNT=7 in the workload");
  }
}

}  // namespace kuberdma::doctor::internal
