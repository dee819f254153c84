// SPDX-License-Identifier: Apache-2.0
// LLDP (IEEE 802.1AB): who is on the other end of each rail's cable. The switch's LLDP agent
// sends a frame on every port every few seconds (30 by default); we read it ourselves from an
// AF_PACKET socket on the netdev instead of asking a node-side lldpd (docs/fabric.md#why-our-own-
// lldp-reader). A frame comes from the wire, so it is untrusted: a neighbour is taken only from a
// frame that 802.1AB and Debian's lldpd (1.0.16, src/daemon/protocols/lldp.c) would accept
// (addressed to an LLDP group, the mandatory TLVs once each and in order, an End TLV of length
// 0), every TLV is bounds-checked, and every name kept is printable (anything else escaped as
// \xNN). A frame whose TTL is 0 (a shutdown LLDPDU) parses: it withdraws the neighbour.
//
//   PacketLldpListener listener;
//   auto heard = listener.Listen({"ens1f0np0", "ens2f0np0"}, std::chrono::seconds(35),
//                                ListenUntil::kEachHeard);
//   for (const auto& [netdev, n] : heard->neighbors) std::cout << netdev << " " << n.Switch();
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::lldp {

inline constexpr uint16_t kEtherType = 0x88cc;
// The nearest-bridge group address, which switches send LLDP to (802.1AB 7.1).
inline constexpr uint8_t kNearestBridge[6] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e};
// Every destination an LLDPDU may have (802.1AB 7.1, and what lldpd accepts): the nearest bridge,
// the nearest non-TPMR bridge and the nearest customer bridge. No customer (C-VLAN) bridge
// forwards any of them (802.1Q Table 8-1): each comes from the other end of the cable, never from
// another host on the segment (docs/fabric.md#whose-word-the-node-takes).
inline constexpr std::array<std::array<uint8_t, 6>, 3> kLldpGroups = {{
    {0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e},
    {0x01, 0x80, 0xc2, 0x00, 0x00, 0x03},
    {0x01, 0x80, 0xc2, 0x00, 0x00, 0x00},
}};

// What one neighbour said. Names are printable ASCII (escaped); a TLV not sent is empty or 0.
struct Neighbor {
  std::string chassis_id;  // a MAC as aa:bb:cc:dd:ee:ff, else the escaped text
  std::string port_id;     // likewise
  std::string system_name;
  std::string port_description;
  int ttl_s = 0;           // how long the neighbour holds; 0: a shutdown LLDPDU, it is gone
  int port_vlan = 0;       // 802.1 Port VLAN ID
  int max_frame_size = 0;  // 802.3 Maximum Frame Size (the switch port's MTU plus 18)

  // The switch as people name it: its system name, else its chassis ID.
  const std::string& Switch() const { return system_name.empty() ? chassis_id : system_name; }
  // The switch port: the port ID when it is a name, else its description (lldpd's default sends
  // the port's MAC as its ID and the port's name as its description).
  std::string Port() const;
  bool operator==(const Neighbor&) const = default;
};

// `bytes` as printable ASCII: 0x20..0x7e kept except '\', which becomes "\\"; anything else
// "\xNN". Never fails.
std::string Escape(std::span<const uint8_t> bytes);
// A name another process wrote (a state file, a node's document), for showing: kept when
// already printable ASCII (our own escapes included), else escaped; at most `max` bytes read.
std::string ShowText(std::string_view text, size_t max = 511);

// The LLDPDU (the frame's payload after the EtherType). kInvalidArgument naming the offset for a
// TLV that runs past the end; the mandatory TLVs (chassis ID, port ID, TTL) missing, out of order
// or repeated; a chassis or port ID of a reserved subtype (0, 8-255) or longer than 255 bytes; an
// End TLV with a length; or no End TLV. TLVs of types 802.1AB reserves (9-126) are skipped, as
// lldpd does. Never throws; never reads past `pdu`.
Result<Neighbor> ParseLldpdu(std::span<const uint8_t> pdu);

// A whole Ethernet frame (with or without one 802.1Q tag). kInvalidArgument when it is not LLDP:
// not addressed to one of kLldpGroups (a broadcast, or a unicast to the rail's own MAC, is not
// the switch's word), another EtherType, or an LLDPDU ParseLldpdu refuses.
Result<Neighbor> ParseFrame(std::span<const uint8_t> frame);

// What a switch sends: `n` as an LLDP frame from `source` to the nearest-bridge group, the chassis
// and port IDs as locally assigned text (subtype 7), the system name, port description, port VLAN
// and max frame size when set. ParseFrame reads it back as `n` (a name longer than a TLV holds,
// 255 bytes, is cut). For simulated switches and tests; the node never sends.
std::vector<uint8_t> EncodeFrame(const Neighbor& n, const std::array<uint8_t, 6>& source);

// The state-file form (the node contract's cabling record) and back; FromJson skips fields of the
// wrong type and escapes what it keeps, as the file is written by another process.
nlohmann::json ToJson(const Neighbor& n);
Neighbor NeighborFromJson(const nlohmann::json& j);

// How long one Listen listens.
enum class ListenUntil {
  kEachHeard,  // until every netdev heard one LLDPDU (its first word), or the wait is over
  kWaitOver,   // for the whole wait, each netdev's last LLDPDU kept: a watch that must not miss a
               // shutdown LLDPDU, which a switch sends once
};

// What one Listen heard.
struct Heard {
  // Each netdev's neighbour as its LLDPDU said (TTL 0: the neighbour said it is gone).
  std::map<std::string, Neighbor> neighbors;
  // The netdevs not in this namespace (a pod holds them): not listened on, so their silence says
  // nothing. A netdev in neither heard nothing for the whole wait.
  std::set<std::string> absent;
};

// The seam: LLDP neighbours heard on netdevs of the caller's network namespace.
class LldpListener {
 public:
  virtual ~LldpListener() = default;
  // Listens on each of `netdevs` until `until` says (or `stop_fd`, an eventfd, -1 for none,
  // becomes readable). kPermissionDenied without CAP_NET_RAW. Frames that do not parse
  // (ParseFrame) are skipped, and so is any frame the netdev did not receive from the wire as a
  // multicast (one it sent, or a copy of another's).
  virtual Result<Heard> Listen(const std::vector<std::string>& netdevs,
                               std::chrono::milliseconds wait, ListenUntil until,
                               int stop_fd = -1) = 0;
};

// The real listener: one AF_PACKET socket per netdev, bound to it and to LLDP's EtherType, joined
// to the LLDP groups (a NIC filters multicast it was not asked for).
class PacketLldpListener final : public LldpListener {
 public:
  Result<Heard> Listen(const std::vector<std::string>& netdevs, std::chrono::milliseconds wait,
                       ListenUntil until, int stop_fd = -1) override;
};

}  // namespace kuberdma::lldp
