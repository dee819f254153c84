// SPDX-License-Identifier: Apache-2.0
// Fuzz target for what the fabric says about a rail's neighbour: an LLDP frame off the wire and an
// SMP answer from the IB fabric. Parsed or refused, never read past; what is kept is printable,
// and a parsed neighbour survives its state-file form (the node contract's cabling record) and an
// encoding.
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  (void)kuberdma::smp::ParseNodeInfo(in);
  if (auto d = kuberdma::smp::ParseNodeDescription(in); d && !Printable(*d)) std::abort();
  auto n = kuberdma::lldp::ParseFrame(in);
  if (!n) return 0;
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
