// SPDX-License-Identifier: Apache-2.0
// SR-IOV VF settings through the PF: the rtnetlink bytes against the uapi layout, the IB GUIDs
// against libnl's own encoding (rtnl_link_vf_set_ib_node_guid), and the decoder on answers laid
// out as the kernel's rtnl_fill_vfinfo writes them (no kernel here has VFs).
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>

#include "kuberdma/link/netlink_vf_ops.h"
#include "kuberdma/testing/libnl_reference.h"
#include "nl_bytes.h"

namespace kuberdma::link {
namespace {

using testing::NlBytes;

ifinfomsg Ifi(int index) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = index;
  return ifi;
}

TEST_CASE("Reading VFs asks RTM_GETLINK for the PF with IFLA_EXT_MASK RTEXT_FILTER_VF") {
  ifinfomsg ifi = Ifi(12);
  auto want = NlBytes(RTM_GETLINK, NLM_F_REQUEST)
                  .Raw(&ifi, sizeof ifi)
                  .U32(IFLA_EXT_MASK, RTEXT_FILTER_VF)
                  .Done();
  CHECK(EncodeVfGet(12) == want);
}

TEST_CASE("A VF change is one RTM_NEWLINK on the PF, its attributes in the kernel's order") {
  ifinfomsg ifi = Ifi(12);
  ifla_vf_mac mac{};
  mac.vf = 3;
  const uint8_t m[6] = {0x06, 0x11, 0x22, 0x33, 0x44, 0x55};
  std::memcpy(mac.mac, m, 6);
  ifla_vf_vlan vlan{.vf = 3, .vlan = 100, .qos = 5};
  ifla_vf_rate rate{.vf = 3, .min_tx_rate = 0, .max_tx_rate = 25000};
  ifla_vf_spoofchk spoof{.vf = 3, .setting = 1};
  ifla_vf_link_state state{.vf = 3, .link_state = IFLA_VF_LINK_STATE_DISABLE};
  ifla_vf_trust trust{.vf = 3, .setting = 0};
  auto want = NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK)
                  .Raw(&ifi, sizeof ifi)
                  .Begin(IFLA_VFINFO_LIST)
                  .Begin(IFLA_VF_INFO)
                  .Struct(IFLA_VF_MAC, mac)
                  .Struct(IFLA_VF_VLAN, vlan)
                  .Struct(IFLA_VF_RATE, rate)
                  .Struct(IFLA_VF_SPOOFCHK, spoof)
                  .Struct(IFLA_VF_LINK_STATE, state)
                  .Struct(IFLA_VF_TRUST, trust)
                  .End()
                  .End()
                  .Done();
  auto got = EncodeVfChange(12, {.vf = 3,
                                 .mac = "06:11:22:33:44:55",
                                 .vlan = 100,
                                 .qos = 5,
                                 .spoofchk = true,
                                 .trust = false,
                                 .link_state = VfLinkState::kDisable,
                                 .min_tx_rate = 0,
                                 .max_tx_rate = 25000});
  REQUIRE(got);
  CHECK(*got == want);
  CHECK_FALSE(EncodeVfChange(12, {.vf = 3, .mac = "06:11:22"}));
}

TEST_CASE("An IB VF's node and port GUID are encoded as libnl's own VF API encodes them") {
  const uint64_t guid = 0x0203aa0000001234ULL;
  // libnl: a link carrying one VF with both GUIDs, built into RTM_NEWLINK by libnl itself.
  auto theirs = testing::LibnlVfGuidChange(12, 2, guid, guid);
  REQUIRE_FALSE(theirs.empty());
  auto ours = EncodeVfChange(12, {.vf = 2, .node_guid = guid, .port_guid = guid});
  REQUIRE(ours);
  auto want = testing::VfInfoAttributes(theirs);
  auto got = testing::VfInfoAttributes(*ours);
  // Field by field: libnl 3.7 leaves the 4 bytes of padding after `vf` uninitialised (seen as
  // garbage here), so whole payloads differ; ours are zero.
  for (int type : {IFLA_VF_IB_NODE_GUID, IFLA_VF_IB_PORT_GUID}) {
    REQUIRE(want.contains(type));
    REQUIRE(got.at(type).size() == want.at(type).size());
    REQUIRE(got.at(type).size() == sizeof(ifla_vf_guid));
    ifla_vf_guid g{};
    ifla_vf_guid w{};
    std::memcpy(&g, got.at(type).data(), sizeof g);
    std::memcpy(&w, want.at(type).data(), sizeof w);
    CHECK(g.vf == w.vf);
    CHECK(g.guid == w.guid);
    CHECK(g.vf == 2);
    CHECK(g.guid == guid);
    CHECK(std::all_of(got.at(type).begin() + 4, got.at(type).begin() + 8,
                      [](uint8_t b) { return b == 0; }));
  }
}

TEST_CASE("The PF's answer is read VF by VF, and what a driver does not report stays unreported") {
  ifinfomsg ifi = Ifi(12);
  auto vf_info = [](NlBytes& b, uint32_t vf, bool reports_spoofchk, bool ib) {
    ifla_vf_mac mac{};
    mac.vf = vf;
    mac.mac[0] = 0x06;
    mac.mac[5] = static_cast<uint8_t>(vf);
    ifla_vf_vlan vlan{.vf = vf, .vlan = 10 * vf, .qos = vf};
    ifla_vf_rate rate{.vf = vf, .min_tx_rate = 0, .max_tx_rate = 1000 * vf};
    // rtnl_fill_vfinfo: -1 where the driver's ndo_get_vf_config leaves the field.
    ifla_vf_spoofchk spoof{.vf = vf, .setting = reports_spoofchk ? 1U : ~0U};
    ifla_vf_trust trust{.vf = vf, .setting = ~0U};
    ifla_vf_link_state state{.vf = vf, .link_state = IFLA_VF_LINK_STATE_AUTO};
    b.Begin(IFLA_VF_INFO).Struct(IFLA_VF_MAC, mac).Struct(IFLA_VF_VLAN, vlan);
    b.Struct(IFLA_VF_RATE, rate).Struct(IFLA_VF_SPOOFCHK, spoof).Struct(IFLA_VF_LINK_STATE, state);
    b.Struct(IFLA_VF_TRUST, trust);
    if (ib) {
      ifla_vf_guid g{.vf = vf, .guid = 0x0200000000000100ULL + vf};
      b.Struct(IFLA_VF_IB_NODE_GUID, g).Struct(IFLA_VF_IB_PORT_GUID, g);
    }
    b.End();
  };
  NlBytes b(RTM_NEWLINK, 0);
  b.Raw(&ifi, sizeof ifi).U32(IFLA_NUM_VF, 2).Begin(IFLA_VFINFO_LIST);
  vf_info(b, 0, true, false);
  vf_info(b, 1, false, true);
  auto vfs = DecodeVfList(b.End().Done());
  REQUIRE(vfs);
  REQUIRE(vfs->size() == 2);
  const VfConfig& a = (*vfs)[0];
  CHECK(a.vf == 0);
  CHECK(a.mac == "06:00:00:00:00:00");
  CHECK(a.has_spoofchk);
  CHECK(a.spoofchk);
  CHECK_FALSE(a.has_trust);
  CHECK_FALSE(a.has_guids);
  const VfConfig& v = (*vfs)[1];
  CHECK(v.mac == "06:00:00:00:00:01");
  CHECK(v.vlan == 10);
  CHECK(v.qos == 1);
  CHECK(v.max_tx_rate == 1000);
  CHECK_FALSE(v.has_spoofchk);
  CHECK(v.has_guids);
  CHECK(v.node_guid == 0x0200000000000101ULL);
  // No list (a link without VFs) is no VFs; a cut message is an error, never a crash.
  ifinfomsg plain = Ifi(3);
  auto none = DecodeVfList(NlBytes(RTM_NEWLINK, 0).Raw(&plain, sizeof plain).Done());
  REQUIRE(none);
  CHECK(none->empty());
  auto whole = b.Done();
  whole.resize(10);
  CHECK_FALSE(DecodeVfList(whole));
}

TEST_CASE("Restoring a VF sends back only what differs and what the driver reports") {
  VfConfig was{.vf = 4,
               .mac = "00:00:00:00:00:00",
               .spoofchk = false,
               .has_spoofchk = true,
               .has_rate = true};
  VfConfig now = was;
  now.mac = "06:aa:bb:cc:dd:ee";
  now.vlan = 7;
  now.spoofchk = true;
  now.max_tx_rate = 100;
  VfChange back = RestoreChange(was, now);
  CHECK(back.vf == 4);
  CHECK(back.mac == "00:00:00:00:00:00");
  CHECK(back.vlan == 0);
  CHECK(back.spoofchk == false);
  CHECK(back.max_tx_rate == 0);
  CHECK_FALSE(back.trust);  // not reported: never sent
  CHECK(RestoreChange(was, was).Empty());
}

TEST_CASE("GUIDs are read in sysfs' and ip link's spellings and written back in both") {
  CHECK(*ParseGuid("b83f:d203:0030:0001") == 0xb83fd20300300001ULL);
  CHECK(*ParseGuid("b8:3f:d2:03:00:30:00:01") == 0xb83fd20300300001ULL);
  CHECK(FormatGuidColons(0xb83fd20300300001ULL) == "b8:3f:d2:03:00:30:00:01");
  CHECK(FormatGuidSysfs(0xb83fd20300300001ULL) == "b83f:d203:0030:0001");
  for (const char* bad : {"", "b83f:d203:0030", "b83f:d203:0030:00011", "zz:3f:d2:03:00:30:00:01",
                          "b83fd20300300001", "b8:3f:d2:03:00:30:00:01:"}) {
    INFO(bad);
    CHECK_FALSE(ParseGuid(bad));
  }
}

}  // namespace
}  // namespace kuberdma::link
