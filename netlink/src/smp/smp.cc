// SPDX-License-Identifier: Apache-2.0
// Directed-route SMPs one hop out (IBA 14.2.1.2 for the layout, 14.2.5.2-3 for NodeDescription
// and NodeInfo), and the rails' neighbours from them.
#include "kuberdma/smp/smp.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace kuberdma::smp {
namespace {

constexpr uint8_t kMethodGet = 0x01;
constexpr uint8_t kMethodGetResp = 0x81;
constexpr size_t kData = 64;          // the SMP's 64 bytes of attribute data
constexpr size_t kInitialPath = 128;  // 64 bytes: the ports out, hop by hop
constexpr size_t kDescription = 64;   // NodeDescription is 64 bytes of text

void Put16(std::span<uint8_t> at, uint16_t v) {
  at[0] = static_cast<uint8_t>(v >> 8);
  at[1] = static_cast<uint8_t>(v);
}

uint64_t Get64(std::span<const uint8_t> at) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = v << 8 | at[i];
  return v;
}

Error Bad(const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, "SMP answer: " + what + "; ignored");
}

// The common checks of a GetResp to one of our queries for `attr`.
Result<void> CheckAnswer(std::span<const uint8_t> mad, Attr attr) {
  if (mad.size() < kMadSize) {
    return Fail(Bad(std::to_string(mad.size()) + " bytes, not a " + std::to_string(kMadSize) +
                    "-byte MAD"));
  }
  if (mad[1] != kDirectedRouteClass || mad[3] != kMethodGetResp) {
    char what[64];
    std::snprintf(what, sizeof what, "class 0x%02x method 0x%02x, not a directed-route GetResp",
                  mad[1], mad[3]);
    return Fail(Bad(what));
  }
  uint16_t got = static_cast<uint16_t>(mad[16] << 8 | mad[17]);
  if (got != static_cast<uint16_t>(attr)) {
    char what[48];
    std::snprintf(what, sizeof what, "attribute 0x%04x answered, not 0x%04x", got,
                  static_cast<unsigned>(attr));
    return Fail(Bad(what));
  }
  // Status: 15 bits after the direction bit (IBA 14.2.1.2).
  int status = (mad[4] & 0x7f) << 8 | mad[5];
  if (status != 0) {
    char what[48];
    std::snprintf(what, sizeof what, "status 0x%04x (the neighbour refused the query)", status);
    return Fail(Bad(what));
  }
  return {};
}

std::string Hex64(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

std::array<uint8_t, kMadSize> HopQuery(Attr attr, uint8_t port, uint64_t tid) {
  std::array<uint8_t, kMadSize> m{};
  m[0] = 1;  // base version
  m[1] = kDirectedRouteClass;
  m[2] = 1;  // class version
  m[3] = kMethodGet;
  m[6] = 0;  // hop pointer
  m[7] = 1;  // hop count: one hop out
  for (size_t i = 0; i < 8; ++i) m[8 + i] = static_cast<uint8_t>(tid >> (56 - 8 * i));
  Put16(std::span(m).subspan(16, 2), static_cast<uint16_t>(attr));
  Put16(std::span(m).subspan(32, 2), 0xffff);  // DrSLID: permissive
  Put16(std::span(m).subspan(34, 2), 0xffff);  // DrDLID: permissive
  m[kInitialPath + 1] = port;                  // InitialPath[1]: out of this port
  return m;
}

Result<NodeInfo> ParseNodeInfo(std::span<const uint8_t> mad) {
  KUBERDMA_TRY(CheckAnswer(mad, Attr::kNodeInfo));
  std::span<const uint8_t> d = mad.subspan(kData, 64);
  return NodeInfo{.node_type = d[2],
                  .num_ports = d[3],
                  .node_guid = Get64(d.subspan(12)),
                  .port_guid = Get64(d.subspan(20)),
                  .local_port = d[36]};
}

Result<std::string> ParseNodeDescription(std::span<const uint8_t> mad) {
  KUBERDMA_TRY(CheckAnswer(mad, Attr::kNodeDescription));
  std::span<const uint8_t> d = mad.subspan(kData, kDescription);
  auto end = std::find(d.begin(), d.end(), uint8_t{0});
  return lldp::Escape(d.first(static_cast<size_t>(end - d.begin())));
}

lldp::Neighbor ToNeighbor(const NodeInfo& info, const std::string& description) {
  std::string guid = Hex64(info.node_guid);
  return {.chassis_id = guid,
          .port_id = std::to_string(info.local_port),
          .system_name = description.empty() ? guid : description};
}

Result<void> HearInfiniband(HopProbe& probe, std::vector<rails::RailNeighbor>& rails,
                            std::chrono::milliseconds timeout) {
  std::optional<Error> first;
  for (auto& r : rails) {
    if (!r.infiniband) continue;
    auto n = probe.Neighbor(r.hca, r.port, timeout);
    if (n) {
      r.neighbor = *n;
    } else if (!first) {
      first = n.error().Wrap(r.hca + " port " + std::to_string(r.port));
    }
  }
  if (first) return Fail(*first);
  return {};
}

}  // namespace kuberdma::smp
