// SPDX-License-Identifier: Apache-2.0
// The LLDPDU's TLVs (802.1AB 8.4-8.5, the 802.1 and 802.3 organisational TLVs of annexes D and F)
// into a Neighbor, bounds-checked at every step.
#include "kuberdma/lldp/lldp.h"

#include <algorithm>
#include <cstdio>

namespace kuberdma::lldp {
namespace {

enum Tlv : int {
  kEnd = 0,
  kChassisId = 1,
  kPortId = 2,
  kTtl = 3,
  kPortDescription = 4,
  kSystemName = 5,
  kOrganizational = 127,
};
constexpr int kSubtypeMac = 4;      // chassis ID subtype "MAC address"
constexpr int kPortSubtypeMac = 3;  // port ID subtype "MAC address"
constexpr uint8_t kOui8021[3] = {0x00, 0x80, 0xc2};
constexpr uint8_t kOui8023[3] = {0x00, 0x12, 0x0f};
constexpr size_t kEthHeader = 14;

std::string Mac(std::span<const uint8_t> b) {
  std::string out;
  for (size_t i = 0; i < b.size(); ++i) {
    char x[4];
    std::snprintf(x, sizeof x, i == 0 ? "%02x" : ":%02x", b[i]);
    out += x;
  }
  return out;
}

// A chassis or port ID: a MAC when its subtype says so and it has six bytes, else text.
std::string Id(std::span<const uint8_t> v, int mac_subtype) {
  if (v.empty()) return "";
  std::span<const uint8_t> id = v.subspan(1);
  return v[0] == mac_subtype && id.size() == 6 ? Mac(id) : Escape(id);
}

uint16_t Be16(std::span<const uint8_t> v) { return static_cast<uint16_t>(v[0] << 8 | v[1]); }

void Organizational(std::span<const uint8_t> v, Neighbor& n) {
  if (v.size() < 6) return;  // OUI, subtype and a 16-bit value: anything shorter is not ours
  bool ieee8021 = std::equal(kOui8021, kOui8021 + 3, v.begin());
  bool ieee8023 = std::equal(kOui8023, kOui8023 + 3, v.begin());
  if (ieee8021 && v[3] == 1) n.port_vlan = Be16(v.subspan(4));
  if (ieee8023 && v[3] == 4) n.max_frame_size = Be16(v.subspan(4));
}

Error Bad(size_t off, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument,
               "LLDPDU: " + what + " at byte " + std::to_string(off) + "; frame ignored");
}

// The chassis or port ID TLV's own rules (802.1AB 8.5.2-8.5.3, lldpd's): a subtype of 1-7 and
// 1-255 bytes of ID after it.
Result<void> CheckId(int type, std::span<const uint8_t> v, size_t off) {
  const char* what = type == kChassisId ? "chassis ID" : "port ID";
  if (v.size() < 2) return Fail(Bad(off, std::string("a ") + what + " TLV with no ID"));
  if (v.size() > 256) return Fail(Bad(off, std::string("a ") + what + " longer than 255 bytes"));
  if (v[0] == 0 || v[0] > 7) {
    return Fail(
        Bad(off, std::string("a ") + what + " of reserved subtype " + std::to_string(v[0])));
  }
  return {};
}

// Applies TLV `type` (the `index`th, 0-based) with value `v`: the chassis ID, port ID and TTL
// first, in that order, and never again (802.1AB 8.2; lldpd drops such a frame).
Result<void> Apply(int type, int index, std::span<const uint8_t> v, size_t off, Neighbor& n) {
  static constexpr int kMandatory[] = {kChassisId, kPortId, kTtl};
  if (index < 3 && type != kMandatory[index]) {
    return Fail(Bad(off, "TLV " + std::to_string(type) + " where TLV " +
                             std::to_string(kMandatory[index]) + " must come"));
  }
  if (index >= 3 && (type == kChassisId || type == kPortId || type == kTtl)) {
    return Fail(Bad(off, "a second TLV " + std::to_string(type) +
                             " (the chassis ID, port ID and TTL come once each)"));
  }
  if (type == kChassisId || type == kPortId) KUBERDMA_TRY(CheckId(type, v, off));
  switch (type) {
    case kChassisId:
      n.chassis_id = Id(v, kSubtypeMac);
      break;
    case kPortId:
      n.port_id = Id(v, kPortSubtypeMac);
      break;
    case kTtl:
      if (v.size() < 2) return Fail(Bad(off, "a TTL shorter than 2 bytes"));
      n.ttl_s = Be16(v);
      break;
    case kPortDescription:
      n.port_description = Escape(v);
      break;
    case kSystemName:
      n.system_name = Escape(v);
      break;
    case kOrganizational:
      Organizational(v, n);
      break;
    default:
      break;  // capabilities, management address, reserved types: not needed
  }
  return {};
}

}  // namespace

std::string Neighbor::Port() const {
  bool port_id_is_mac = port_id.size() == 17 && port_id[2] == ':' && port_id[14] == ':';
  return port_id_is_mac && !port_description.empty() ? port_description : port_id;
}

std::string Escape(std::span<const uint8_t> bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (uint8_t c : bytes) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char x[8];
      std::snprintf(x, sizeof x, "\\x%02x", c);
      out += x;
    }
  }
  return out;
}

std::string ShowText(std::string_view text, size_t max) {
  std::string_view head = text.substr(0, max);
  bool printable =
      std::all_of(head.begin(), head.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  return printable ? std::string(head)
                   : Escape({reinterpret_cast<const uint8_t*>(head.data()), head.size()});
}

Result<Neighbor> ParseLldpdu(std::span<const uint8_t> pdu) {
  Neighbor n;
  size_t off = 0;
  for (int index = 0;; ++index) {
    if (off + 2 > pdu.size()) return Fail(Bad(off, "no End TLV before the frame ends"));
    int type = pdu[off] >> 1;
    size_t len = static_cast<size_t>((pdu[off] & 1) << 8 | pdu[off + 1]);  // 9 bits: <= 511
    if (off + 2 + len > pdu.size()) {
      return Fail(Bad(off, "TLV " + std::to_string(type) + " of " + std::to_string(len) +
                               " bytes runs past the frame"));
    }
    if (type == kEnd) {
      if (index < 3) return Fail(Bad(off, "the frame ends before its chassis ID, port ID and TTL"));
      if (len != 0) return Fail(Bad(off, "an End TLV of " + std::to_string(len) + " bytes, not 0"));
      return n;
    }
    KUBERDMA_TRY(Apply(type, index, pdu.subspan(off + 2, len), off, n));
    off += 2 + len;
  }
}

Result<Neighbor> ParseFrame(std::span<const uint8_t> frame) {
  if (frame.size() < kEthHeader) return Fail(Bad(0, "a frame shorter than its Ethernet header"));
  const bool to_group = std::any_of(kLldpGroups.begin(), kLldpGroups.end(), [&](const auto& g) {
    return std::equal(g.begin(), g.end(), frame.begin());
  });
  if (!to_group) {
    return Fail(Bad(0, "a frame to " + Mac(frame.first(6)) +
                           " (not an LLDP group address, so not from the cable's other end)"));
  }
  size_t at = 12;
  if (Be16(frame.subspan(at)) == 0x8100 && frame.size() >= kEthHeader + 4) at += 4;  // 802.1Q
  if (Be16(frame.subspan(at)) != kEtherType) return Fail(Bad(at, "not LLDP's EtherType"));
  return ParseLldpdu(frame.subspan(at + 2));
}

namespace {

// A TLV: 7-bit type, 9-bit length.
void PutTlv(std::vector<uint8_t>& out, int type, std::span<const uint8_t> value) {
  out.push_back(static_cast<uint8_t>(static_cast<size_t>(type) << 1 | (value.size() >> 8 & 1)));
  out.push_back(static_cast<uint8_t>(value.size() & 0xff));
  out.insert(out.end(), value.begin(), value.end());
}

// A TLV whose value is `prefix` then `text`, cut to what a TLV holds next to the prefix.
void PutText(std::vector<uint8_t>& out, int type, std::vector<uint8_t> prefix,
             std::string_view text) {
  size_t room = std::min<size_t>(255, 511 - prefix.size());
  prefix.insert(prefix.end(), text.begin(), text.begin() + std::min(text.size(), room));
  PutTlv(out, type, prefix);
}

}  // namespace

std::vector<uint8_t> EncodeFrame(const Neighbor& n, const std::array<uint8_t, 6>& source) {
  constexpr int kLocal = 7;  // chassis and port ID subtype "locally assigned"
  std::vector<uint8_t> f;
  f.reserve(1536);  // one frame's worth: no reallocation between the header's parts
  for (uint8_t b : kNearestBridge) f.push_back(b);
  for (uint8_t b : source) f.push_back(b);
  f.push_back(kEtherType >> 8);
  f.push_back(kEtherType & 0xff);
  PutText(f, kChassisId, {kLocal}, n.chassis_id);
  PutText(f, kPortId, {kLocal}, n.port_id);
  const uint8_t ttl[2] = {static_cast<uint8_t>(n.ttl_s >> 8), static_cast<uint8_t>(n.ttl_s)};
  PutTlv(f, kTtl, ttl);
  if (!n.port_description.empty()) PutText(f, kPortDescription, {}, n.port_description);
  if (!n.system_name.empty()) PutText(f, kSystemName, {}, n.system_name);
  auto org = [&](const uint8_t* oui, uint8_t subtype, int value) {
    const uint8_t v[6] = {oui[0],
                          oui[1],
                          oui[2],
                          subtype,
                          static_cast<uint8_t>(value >> 8),
                          static_cast<uint8_t>(value)};
    PutTlv(f, kOrganizational, v);
  };
  if (n.port_vlan > 0) org(kOui8021, 1, n.port_vlan);
  if (n.max_frame_size > 0) org(kOui8023, 4, n.max_frame_size);
  PutTlv(f, kEnd, {});
  return f;
}

nlohmann::json ToJson(const Neighbor& n) {
  return {{"chassisId", n.chassis_id},
          {"portId", n.port_id},
          {"systemName", n.system_name},
          {"portDescription", n.port_description},
          {"ttl", n.ttl_s},
          {"portVlan", n.port_vlan},
          {"maxFrameSize", n.max_frame_size}};
}

Neighbor NeighborFromJson(const nlohmann::json& j) {
  auto text = [&](const char* k) {
    const auto it = j.find(k);
    return it == j.end() || !it->is_string() ? std::string()
                                             : ShowText(it->get_ref<const std::string&>(), 2048);
  };
  auto number = [&](const char* k) {
    const auto it = j.find(k);
    return it != j.end() && it->is_number_integer()
               ? std::clamp(it->get<int64_t>(), int64_t{0}, int64_t{65535})
               : 0;
  };
  if (!j.is_object()) return {};
  return {.chassis_id = text("chassisId"),
          .port_id = text("portId"),
          .system_name = text("systemName"),
          .port_description = text("portDescription"),
          .ttl_s = static_cast<int>(number("ttl")),
          .port_vlan = static_cast<int>(number("portVlan")),
          .max_frame_size = static_cast<int>(number("maxFrameSize"))};
}

}  // namespace kuberdma::lldp
