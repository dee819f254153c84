// SPDX-License-Identifier: Apache-2.0
// Which NCCL variables pick this pod's GIDs, and when none can.
#include "kuberdma/validator/gid_env.h"

#include <arpa/inet.h>

#include <algorithm>
#include <optional>

#include "../format.h"
#include "kuberdma/contract/pod_env.h"

namespace kuberdma::validator {
namespace {

std::optional<uint32_t> Parse(const std::string& ipv4) {
  in_addr a{};
  if (::inet_pton(AF_INET, ipv4.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string Format(uint32_t host_order) {
  in_addr a{htonl(host_order)};
  char buf[INET_ADDRSTRLEN];
  return ::inet_ntop(AF_INET, &a, buf, sizeof buf) != nullptr ? buf : "";
}

// An IPv4 prefix: `net` (host order) of `bits` leading bits.
struct V4Prefix {
  uint32_t net = 0;
  int bits = 32;

  uint32_t Mask() const { return bits == 0 ? 0 : ~0U << (32 - bits); }
  bool Holds(const std::string& ipv4) const {
    auto v = Parse(ipv4);
    return v && (*v & Mask()) == net;
  }
  std::string Cidr() const { return Format(net) + "/" + std::to_string(bits); }
};

// The smallest prefix holding every address of `ipv4`; nullopt for none or one that does not
// parse.
std::optional<V4Prefix> Covering(const std::vector<std::string>& ipv4) {
  std::optional<uint32_t> lo;
  std::optional<uint32_t> hi;
  for (const auto& ip : ipv4) {
    auto v = Parse(ip);
    if (!v) return std::nullopt;
    lo = lo ? std::min(*lo, *v) : *v;
    hi = hi ? std::max(*hi, *v) : *v;
  }
  if (!lo) return std::nullopt;
  V4Prefix p;
  while (p.bits > 0 && (*lo >> (32 - p.bits)) != (*hi >> (32 - p.bits))) --p.bits;
  p.net = *lo & p.Mask();
  return p;
}

struct Own {
  std::string hca;
  uint32_t port = 1;
  uint32_t index = 0;
  std::string ipv4;
};

// Other pods' RoCE v2 IPv4 entries inside `prefix` on the HCAs the pod uses ("10.9.2.7 on rxe1").
std::vector<std::string> OthersInside(const std::vector<GidTable>& tables,
                                      const std::vector<Own>& own,
                                      const std::vector<std::string>& own_ipv4,
                                      const V4Prefix& prefix) {
  std::vector<std::string> out;
  for (const auto& t : tables) {
    bool used = std::any_of(own.begin(), own.end(), [&](const Own& o) { return o.hca == t.hca; });
    if (!used) continue;
    for (const auto& g : t.gids) {
      std::string ip = g.Ipv4();
      if (!g.IsRoceV2() || ip.empty() || !prefix.Holds(ip)) continue;
      if (std::find(own_ipv4.begin(), own_ipv4.end(), ip) == own_ipv4.end()) {
        out.push_back(ip + " on " + t.hca + " (index " + std::to_string(g.index) + ")");
      }
    }
  }
  return out;
}

}  // namespace

std::string CoveringPrefix(const std::vector<std::string>& ipv4) {
  auto p = Covering(ipv4);
  return p ? p->Cidr() : "";
}

namespace {

// Each HCA's first RoCE v2 entry of the pod's addresses; a note per HCA.
std::vector<Own> OwnEntries(const std::vector<GidTable>& tables,
                            const std::vector<std::string>& own_ipv4,
                            std::vector<std::string>* notes) {
  std::vector<Own> own;
  for (const auto& t : tables) {
    const sysfs::Gid* g = sysfs::FirstV2ForAddresses(t.gids, own_ipv4);
    if (g == nullptr) {
      notes->push_back(t.hca + ": no RoCE v2 entry of this pod's addresses (not this pod's)");
      continue;
    }
    own.push_back({t.hca, t.port, g->index, g->Ipv4()});
    notes->push_back(t.hca + ": this pod's RoCE v2 GID is index " + std::to_string(g->index) +
                     " (" + g->Ipv4() + ")");
  }
  return own;
}

std::string NeitherHolds(const std::vector<Own>& own, const std::string& cidr,
                         const std::vector<std::string>& others) {
  std::vector<std::string> indices;
  for (const auto& o : own) indices.push_back(o.hca + " " + std::to_string(o.index));
  return "this pod's RoCE v2 GIDs have different indices (" + Join(indices, ", ") +
         "), and NCCL_IB_GID_INDEX is one index for every HCA; the smallest prefix holding its "
         "addresses, " +
         cidr + ", also holds another pod's (" + Join(others, ", ") +
         "), so NCCL_IB_ADDR_RANGE cannot single them out. Give each pod an address block of its "
         "own across its rails (one prefix per pod, e.g. static or whereabouts ranges per pod), "
         "or attach pods in the same order on every rail so that their indices line up";
}

}  // namespace

PodGids OwnGids(const std::vector<GidTable>& tables, const std::vector<std::string>& own_ipv4) {
  PodGids out;
  std::vector<Own> own = OwnEntries(tables, own_ipv4, &out.notes);
  if (own.empty()) {
    out.why_not = "no HCA has a RoCE v2 GID of this pod's addresses (" +
                  (own_ipv4.empty() ? std::string("none") : Join(own_ipv4, ", ")) +
                  "): give the pod's RDMA interfaces an address (an ipam section in their NAD)";
    return out;
  }
  std::vector<std::string> addresses;
  for (const auto& o : own) {
    out.hcas.push_back({.name = o.hca,
                        .port = o.port,
                        .link_layer = "Ethernet",
                        .gid_index = o.index,
                        .address = o.ipv4});
    addresses.push_back(o.ipv4);
  }
  bool same = std::all_of(own.begin(), own.end(),
                          [&](const Own& o) { return o.index == own.front().index; });
  if (same) return out;
  auto prefix = Covering(addresses);  // the pod's entries' addresses: IPv4, so it exists
  std::vector<std::string> others;
  if (prefix) others = OthersInside(tables, own, own_ipv4, *prefix);
  if (!prefix || !others.empty()) {
    out.why_not = NeitherHolds(own, prefix ? prefix->Cidr() : "none", others);
    return out;
  }
  out.roce_range = prefix->Cidr();
  out.notes.push_back("the indices differ, so one GID index cannot be used; " + out.roce_range +
                      " holds this pod's addresses and no other entry");
  return out;
}

GidEnvPlan PlanNcclGidEnv(const std::vector<GidTable>& tables,
                          const std::vector<std::string>& own_ipv4) {
  GidEnvPlan plan;
  PodGids gids = OwnGids(tables, own_ipv4);
  plan.notes = gids.notes;
  if (!gids.why_not.empty()) {
    plan.why_not = gids.why_not;
    return plan;
  }
  auto nccl = contract::PlanFor(contract::Library::kNccl,
                                {.hcas = gids.hcas, .roce_range = gids.roce_range});
  if (!nccl) {
    plan.why_not = nccl.error().message();
    return plan;
  }
  plan.ok = true;
  for (auto& [k, v] : nccl->vars) {
    if (k != "NCCL_SOCKET_IFNAME") plan.vars.emplace_back(std::move(k), std::move(v));
  }
  return plan;
}

std::string ShellQuote(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string FormatExports(const GidEnvPlan& plan) {
  std::string out;
  for (const auto& [name, value] : plan.vars)
    out += "export " + name + "=" + ShellQuote(value) + "\n";
  return out;
}

}  // namespace kuberdma::validator
