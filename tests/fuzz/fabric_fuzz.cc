// SPDX-License-Identifier: Apache-2.0
// Fuzz target for what the fabric says about a rail's neighbour: an LLDP frame off the wire and an
// SMP answer from the IB fabric. Parsed or refused, never read past; what is kept is printable,
// a parsed neighbour survives its state-file form (the node contract's cabling record) and an
// encoding, and a frame that parsed keeps the rules lldpd holds it to (checked here by a walk of
// its own: to an LLDP group, chassis ID, port ID and TTL first and never again, an empty End).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kuberdma/lldp/lldp.h"
#include "kuberdma/smp/smp.h"

namespace {

bool Printable(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// The frame obeys 802.1AB's (and lldpd's) rules, by a walk that shares nothing with the parser.
bool KeepsTheRules(std::span<const uint8_t> f) {
  bool to_group = false;
  for (const auto& g : kuberdma::lldp::kLldpGroups) {
    to_group = to_group || std::equal(g.begin(), g.end(), f.begin());
  }
  size_t at = (f[12] == 0x81 && f[13] == 0x00) ? 18 : 14;  // one 802.1Q tag
  for (int index = 0; at + 2 <= f.size(); ++index) {
    int type = f[at] >> 1;
    size_t len = static_cast<size_t>((f[at] & 1) << 8 | f[at + 1]);
    if (type == 0) return to_group && index >= 3 && len == 0;
    bool mandatory = type >= 1 && type <= 3;
    if (index < 3 ? type != index + 1 : mandatory) return false;
    at += 2 + len;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  (void)kuberdma::smp::ParseNodeInfo(in);
  if (auto d = kuberdma::smp::ParseNodeDescription(in); d && !Printable(*d)) std::abort();
  auto n = kuberdma::lldp::ParseFrame(in);
  if (!n) return 0;
  if (!KeepsTheRules(in)) std::abort();
  for (const auto* s : {&n->chassis_id, &n->port_id, &n->system_name, &n->port_description}) {
    if (!Printable(*s)) std::abort();
  }
  if (!(kuberdma::lldp::NeighborFromJson(kuberdma::lldp::ToJson(*n)) == *n)) std::abort();
  // Our own encoding reads back as itself (names are already printable and at most 255 bytes
  // of a TLV's 511: cut where longer).
  auto again = kuberdma::lldp::ParseFrame(kuberdma::lldp::EncodeFrame(*n, {}));
  if (!again) std::abort();
  return 0;
}
