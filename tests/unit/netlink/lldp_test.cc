// SPDX-License-Identifier: Apache-2.0
// LLDP frames into neighbours: a frame Debian's lldpd sent (captured on a veth in a namespace),
// the organisational TLVs, and hostile frames: truncated, out of order, control characters,
// longest TLVs, and every truncation and byte flip of the real frame.
#include "kuberdma/lldp/lldp.h"

#include <array>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace kuberdma::lldp {
namespace {

std::vector<uint8_t> Hex(const std::string& h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// lldpd 1.0.16 in a namespace whose hostname is leaf-1, on its port swp1.
const std::string kLldpdFrame =
    "0180c200000e8ab6514159fe88cc0207048ab6514159fe0407038ab6514159fe060200780a066c6561662d310c"
    "5644656269616e20474e552f4c696e75782031322028626f6f6b776f726d29204c696e757820362e31382e3434"
    "2d66632d763131343720233120534d5020505245454d50545f44594e414d4943204030207838365f36340e0400"
    "9c008010181102fe8000000000000088b651fffe4159fe020000000200080473777031fe0900120f0301000000"
    "00fe0900120f0100800000360000";

// A TLV: 7-bit type, 9-bit length.
void Tlv(std::vector<uint8_t>& pdu, unsigned type, const std::vector<uint8_t>& value) {
  pdu.push_back(static_cast<uint8_t>(type << 1 | (value.size() >> 8 & 1)));
  pdu.push_back(static_cast<uint8_t>(value.size() & 0xff));
  pdu.insert(pdu.end(), value.begin(), value.end());
}

std::vector<uint8_t> Text(int subtype, const std::string& s) {
  std::vector<uint8_t> v(s.size() + 1);
  v[0] = static_cast<uint8_t>(subtype);
  for (size_t i = 0; i < s.size(); ++i) v[i + 1] = static_cast<uint8_t>(s[i]);
  return v;
}

std::vector<uint8_t> Mandatory() {
  std::vector<uint8_t> pdu;
  Tlv(pdu, 1, Text(7, "chassis-7"));
  Tlv(pdu, 2, Text(5, "Ethernet12"));
  Tlv(pdu, 3, {0x00, 0x78});
  return pdu;
}

TEST_CASE("A frame lldpd sent names the switch and its port") {
  auto frame = Hex(kLldpdFrame);
  auto n = ParseFrame(frame);
  REQUIRE(n);
  CHECK(n->chassis_id == "8a:b6:51:41:59:fe");
  CHECK(n->system_name == "leaf-1");
  CHECK(n->Switch() == "leaf-1");
  CHECK(n->port_id == "8a:b6:51:41:59:fe");
  CHECK(n->port_description == "swp1");
  CHECK(n->Port() == "swp1");  // lldpd's port ID is a MAC: its description names the port
  CHECK(n->ttl_s == 120);
  CHECK(n->max_frame_size == 0);  // lldpd sends 802.3 MAC/PHY and aggregation, no frame size here
  CHECK(n->port_vlan == 0);
}

TEST_CASE("A switch's named port, VLAN and frame size, and a tagged frame") {
  auto pdu = Mandatory();
  Tlv(pdu, 5, {0x73, 0x70, 0x69, 0x6e, 0x65});          // "spine"
  Tlv(pdu, 127, {0x00, 0x80, 0xc2, 0x01, 0x00, 0x64});  // 802.1 port VLAN 100
  Tlv(pdu, 127, {0x00, 0x12, 0x0f, 0x04, 0x23, 0x2e});  // 802.3 max frame 9006
  Tlv(pdu, 127, {0x00, 0x12, 0x0f});                    // too short to be anything: ignored
  Tlv(pdu, 0, {});
  auto n = ParseLldpdu(pdu);
  REQUIRE(n);
  CHECK(n->chassis_id == "chassis-7");
  CHECK(n->Port() == "Ethernet12");
  CHECK(n->Switch() == "spine");
  CHECK(n->port_vlan == 100);
  CHECK(n->max_frame_size == 9006);
  std::vector<uint8_t> frame = {1, 0x80, 0xc2, 0,    0,    0x0e, 2,    0,    0,
                                0, 0,    1,    0x81, 0x00, 0x00, 0x64, 0x88, 0xcc};
  frame.insert(frame.end(), pdu.begin(), pdu.end());
  auto tagged = ParseFrame(frame);
  REQUIRE(tagged);
  CHECK(*tagged == *n);
}

TEST_CASE("Hostile names are shown escaped, and the longest TLV is read whole") {
  auto pdu = Mandatory();
  Tlv(pdu, 5, {'l', 'e', 'a', 'f', '\n', 0x1b, '[', '2', 'J', '\\', 0xff});
  Tlv(pdu, 4, std::vector<uint8_t>(511, 'A'));
  Tlv(pdu, 0, {});
  auto n = ParseLldpdu(pdu);
  REQUIRE(n);
  CHECK(n->system_name == "leaf\\x0a\\x1b[2J\\\\\\xff");
  CHECK(n->port_description == std::string(511, 'A'));
  for (char c : n->system_name) CHECK((c >= 0x20 && c < 0x7f));
}

TEST_CASE("What a simulated switch sends reads back as sent, a name too long cut") {
  Neighbor n{.chassis_id = "leaf-3",
             .port_id = "swp12",
             .system_name = "leaf-3",
             .port_description = "to gpu-12",
             .ttl_s = 120,
             .port_vlan = 101,
             .max_frame_size = 9234};
  auto frame = EncodeFrame(n, {0x02, 0, 0, 0, 0, 1});
  CHECK(std::vector<uint8_t>(frame.begin(), frame.begin() + 6) ==
        std::vector<uint8_t>(kNearestBridge, kNearestBridge + 6));
  auto back = ParseFrame(frame);
  REQUIRE(back);
  CHECK(*back == n);
  n.system_name = std::string(400, 's');
  auto cut = ParseFrame(EncodeFrame(n, {}));
  REQUIRE(cut);
  CHECK(cut->system_name == std::string(255, 's'));
}

TEST_CASE("Malformed LLDPDUs are refused with where they broke") {
  SECTION("a TLV longer than what is left") {
    auto pdu = Mandatory();
    pdu.push_back(5 << 1 | 1);  // a system name of 300 bytes
    pdu.push_back(44);
    pdu.push_back('x');
    auto n = ParseLldpdu(pdu);
    REQUIRE_FALSE(n);
    CHECK_THAT(n.error().message(), Catch::Contains("runs past the frame"));
    CHECK_THAT(n.error().message(), Catch::Contains("byte 29"));
  }
  SECTION("the TTL before the port ID") {
    std::vector<uint8_t> pdu;
    Tlv(pdu, 1, Text(7, "c"));
    Tlv(pdu, 3, {0, 1});
    Tlv(pdu, 0, {});
    auto n = ParseLldpdu(pdu);
    REQUIRE_FALSE(n);
    CHECK_THAT(n.error().message(), Catch::Contains("TLV 3 where TLV 2 must come"));
  }
  SECTION("no End TLV") {
    auto n = ParseLldpdu(Mandatory());
    REQUIRE_FALSE(n);
    CHECK_THAT(n.error().message(), Catch::Contains("no End TLV"));
  }
  SECTION("an End TLV before the mandatory ones") {
    std::vector<uint8_t> pdu;
    Tlv(pdu, 0, {});
    CHECK_FALSE(ParseLldpdu(pdu));
  }
  SECTION("an empty chassis ID") {
    std::vector<uint8_t> pdu;
    Tlv(pdu, 1, {4});
    CHECK_FALSE(ParseLldpdu(pdu));
  }
  SECTION("not LLDP") {
    auto frame = Hex(kLldpdFrame);
    frame[12] = 0x08;
    frame[13] = 0x00;
    CHECK_FALSE(ParseFrame(frame));
    CHECK_FALSE(ParseFrame(std::vector<uint8_t>(5, 0)));
  }
}

std::vector<uint8_t> Framed(const std::array<uint8_t, 6>& to, const std::vector<uint8_t>& pdu) {
  std::vector<uint8_t> frame(to.begin(), to.end());
  const std::vector<uint8_t> rest = {0x02, 0x00, 0x00, 0x00, 0x00, 0x07, 0x88, 0xcc};
  frame.insert(frame.end(), rest.begin(), rest.end());
  frame.insert(frame.end(), pdu.begin(), pdu.end());
  return frame;
}

std::vector<uint8_t> Whole() {
  auto pdu = Mandatory();
  Tlv(pdu, 0, {});
  return pdu;
}

TEST_CASE("Only a frame to an LLDP group is the switch's word: a broadcast or a unicast is not") {
  for (const auto& group : kLldpGroups) CHECK(ParseFrame(Framed(group, Whole())));
  auto broadcast = ParseFrame(Framed({0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Whole()));
  REQUIRE_FALSE(broadcast);
  CHECK_THAT(broadcast.error().message(),
             Catch::Contains("a frame to ff:ff:ff:ff:ff:ff (not an LLDP group address"));
  CHECK_FALSE(ParseFrame(Framed({0x0c, 0x42, 0xa1, 0x00, 0x00, 0x01}, Whole())));  // the rail's MAC
  CHECK_FALSE(ParseFrame(Framed({0x01, 0x80, 0xc2, 0x00, 0x00, 0x0d}, Whole())));  // another group
  CHECK_FALSE(ParseFrame(Framed({0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}, Whole())));  // IP multicast
}

TEST_CASE("The mandatory TLVs come once each, the End TLV is empty, IDs have a defined subtype") {
  auto refused = [](const std::vector<uint8_t>& pdu, const std::string& why) {
    auto n = ParseLldpdu(pdu);
    REQUIRE_FALSE(n);
    CHECK_THAT(n.error().message(), Catch::Contains(why));
  };
  for (unsigned again : {1u, 2u, 3u}) {
    auto pdu = Mandatory();
    Tlv(pdu, 5, {'l'});  // an optional TLV between: the mandatory ones are not only first
    Tlv(pdu, again, again == 3 ? std::vector<uint8_t>{0x00, 0x05} : Text(7, "forged"));
    Tlv(pdu, 0, {});
    refused(pdu, "a second TLV " + std::to_string(again));
  }
  {
    auto pdu = Mandatory();
    Tlv(pdu, 0, {0x00});
    refused(pdu, "an End TLV of 1 bytes, not 0");
  }
  for (int subtype : {0, 8, 255}) {
    std::vector<uint8_t> pdu;
    Tlv(pdu, 1, Text(subtype, "c"));
    Tlv(pdu, 2, Text(7, "p"));
    Tlv(pdu, 3, {0, 120});
    Tlv(pdu, 0, {});
    refused(pdu, "a chassis ID of reserved subtype " + std::to_string(subtype));
  }
  {
    std::vector<uint8_t> pdu;
    Tlv(pdu, 1, Text(7, "c"));
    Tlv(pdu, 2, Text(5, std::string(256, 'p')));
    Tlv(pdu, 3, {0, 120});
    Tlv(pdu, 0, {});
    refused(pdu, "a port ID longer than 255 bytes");
  }
  SECTION("a TLV of a reserved type is skipped, as lldpd skips it") {
    auto pdu = Mandatory();
    Tlv(pdu, 9, {1, 2, 3});
    Tlv(pdu, 126, {});
    Tlv(pdu, 0, {});
    CHECK(ParseLldpdu(pdu));
  }
  SECTION("a repeated optional TLV keeps the last, as lldpd does") {
    auto pdu = Mandatory();
    Tlv(pdu, 5, {'a'});
    Tlv(pdu, 5, {'b'});
    Tlv(pdu, 0, {});
    auto n = ParseLldpdu(pdu);
    REQUIRE(n);
    CHECK(n->system_name == "b");
  }
}

TEST_CASE("A shutdown LLDPDU (TTL 0) parses: it is how a switch says its word is withdrawn") {
  std::vector<uint8_t> pdu;
  Tlv(pdu, 1, Text(7, "leaf-1"));
  Tlv(pdu, 2, Text(7, "swp3"));
  Tlv(pdu, 3, {0, 0});
  Tlv(pdu, 0, {});
  auto n = ParseFrame(Framed(kLldpGroups[0], pdu));
  REQUIRE(n);
  CHECK(n->ttl_s == 0);
  CHECK(n->Switch() == "leaf-1");
}

TEST_CASE(
    "Every truncation and every byte flip of a real frame is parsed or refused, never "
    "read past") {
  const auto frame = Hex(kLldpdFrame);
  int refused = 0;
  for (size_t len = 0; len < frame.size(); ++len) {
    // A copy of exactly `len` bytes, so AddressSanitizer catches a read past it.
    std::vector<uint8_t> cut(frame.begin(), frame.begin() + static_cast<long>(len));
    if (!ParseFrame(cut)) ++refused;
  }
  CHECK(refused > static_cast<int>(frame.size()) - 10);  // only cuts inside trailing padding pass
  for (size_t i = 14; i < frame.size(); ++i) {
    for (unsigned x : {0x01u, 0x80u, 0xffu}) {
      auto flipped = frame;
      flipped[i] = static_cast<uint8_t>(flipped[i] ^ x);
      auto n = ParseFrame(flipped);
      if (!n) continue;
      for (const std::string* s :
           {&n->chassis_id, &n->port_id, &n->system_name, &n->port_description}) {
        for (char c : *s) REQUIRE((c >= 0x20 && c < 0x7f));
      }
    }
  }
}

TEST_CASE("A neighbour survives its state-file form and another process's fields are escaped") {
  auto n = ParseFrame(Hex(kLldpdFrame));
  REQUIRE(n);
  CHECK(NeighborFromJson(ToJson(*n)) == *n);
  auto j = ToJson(*n);
  j["systemName"] = "evil\x07name";
  j["ttl"] = "not a number";
  j["portVlan"] = 1 << 30;
  Neighbor back = NeighborFromJson(j);
  CHECK(back.system_name == "evil\\x07name");
  CHECK(back.ttl_s == 0);
  CHECK(back.port_vlan == 65535);
  CHECK(NeighborFromJson(nlohmann::json::array()) == Neighbor{});
}

}  // namespace
}  // namespace kuberdma::lldp
