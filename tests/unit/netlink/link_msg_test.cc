// SPDX-License-Identifier: Apache-2.0
// The one-message move, a child's creation and a deletion: rtnetlink bytes against the uapi
// layout.
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <catch2/catch.hpp>

#include "kuberdma/link/netlink_link_ops.h"
#include "nl_bytes.h"

namespace kuberdma::link {
namespace {

using testing::NlBytes;

TEST_CASE("A move is one RTM_NEWLINK with netns fd, new name and MTU, and IFF_UP in flags") {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = 42;
  ifi.ifi_flags = IFF_UP;
  ifi.ifi_change = IFF_UP;
  auto want = NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK)
                  .Raw(&ifi, sizeof ifi)
                  .U32(IFLA_NET_NS_FD, 9)
                  .Str(IFLA_IFNAME, "net1")
                  .U32(IFLA_MTU, 9000)
                  .Done();
  CHECK(EncodeLinkChange(42, {.name = "net1", .mtu = 9000, .up = true}, 9) == want);
}

TEST_CASE("An in-place change without netns fd or flags touches only what is set") {
  ifinfomsg ifi{};
  ifi.ifi_index = 7;
  auto want = NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK)
                  .Raw(&ifi, sizeof ifi)
                  .Str(IFLA_IFALIAS, "kube-rdma")
                  .Done();
  CHECK(EncodeLinkChange(7, {.alias = "kube-rdma"}, std::nullopt) == want);
  ifinfomsg down{};
  down.ifi_index = 7;
  down.ifi_change = IFF_UP;
  CHECK(EncodeLinkChange(7, {.up = false}, std::nullopt) ==
        NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK).Raw(&down, sizeof down).Done());
}

TEST_CASE(
    "A macvlan child is one RTM_NEWLINK creating it in the pod, in bridge mode, with its MAC") {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  auto want = NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
                  .Raw(&ifi, sizeof ifi)
                  .Str(IFLA_IFNAME, "net1")
                  .U32(IFLA_LINK, 12)
                  .U32(IFLA_NET_NS_FD, 9)
                  .U32(IFLA_MTU, 4200)
                  .Bytes(IFLA_ADDRESS, {0x02, 0x11, 0x22, 0x33, 0x44, 0x55})
                  .Begin(IFLA_LINKINFO)
                  .Str(IFLA_INFO_KIND, "macvlan")
                  .Begin(IFLA_INFO_DATA)
                  .U32(IFLA_MACVLAN_MODE, MACVLAN_MODE_BRIDGE)
                  .End()
                  .End()
                  .Done();
  auto got = EncodeChildLink(
      12, {.kind = ChildKind::kMacvlan, .name = "net1", .mac = "02:11:22:33:44:55", .mtu = 4200},
      9);
  REQUIRE(got);
  CHECK(*got == want);
  auto bad = EncodeChildLink(12, {.kind = ChildKind::kMacvlan, .name = "n", .mac = "02:11"}, 9);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("An ipvlan child is L2 mode, takes its parent's MAC and MTU when none is given") {
  ifinfomsg ifi{};
  auto want = NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
                  .Raw(&ifi, sizeof ifi)
                  .Str(IFLA_IFNAME, "net2")
                  .U32(IFLA_LINK, 3)
                  .U32(IFLA_NET_NS_FD, 5)
                  .Begin(IFLA_LINKINFO)
                  .Str(IFLA_INFO_KIND, "ipvlan")
                  .Begin(IFLA_INFO_DATA)
                  .U16(IFLA_IPVLAN_MODE, IPVLAN_MODE_L2)
                  .End()
                  .End()
                  .Done();
  // A MAC given for ipvlan is not sent: the kernel would refuse it.
  auto got = EncodeChildLink(
      3, {.kind = ChildKind::kIpvlan, .name = "net2", .mac = "02:00:00:00:00:01"}, 5);
  REQUIRE(got);
  CHECK(*got == want);
}

// libnl has no IPoIB link type to compare with: the bytes are checked against <linux/if_link.h>'s
// IFLA_IPOIB_* layout, the attributes drivers/infiniband/ulp/ipoib/ipoib_netlink.c parses.
TEST_CASE("An IPoIB child names its pkey and transport mode in IFLA_IPOIB_* attributes") {
  ifinfomsg ifi{};
  auto want = NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
                  .Raw(&ifi, sizeof ifi)
                  .Str(IFLA_IFNAME, "net1")
                  .U32(IFLA_LINK, 21)
                  .U32(IFLA_NET_NS_FD, 4)
                  .U32(IFLA_MTU, 2044)
                  .Begin(IFLA_LINKINFO)
                  .Str(IFLA_INFO_KIND, "ipoib")
                  .Begin(IFLA_INFO_DATA)
                  .U16(IFLA_IPOIB_PKEY, 0x8001)
                  .U16(IFLA_IPOIB_MODE, IPOIB_MODE_DATAGRAM)
                  .End()
                  .End()
                  .Done();
  auto got = EncodeChildLink(21,
                             {.kind = ChildKind::kIpoib,
                              .name = "net1",
                              .mac = "02:00:00:00:00:01",  // never sent: the kernel assigns it
                              .mtu = 2044,
                              .pkey = 0x8001,
                              .ipoib_mode = IpoibMode::kDatagram},
                             4);
  REQUIRE(got);
  CHECK(*got == want);
}

TEST_CASE("An IPoIB child without pkey or mode sends no IFLA_INFO_DATA: the parent's partition") {
  ifinfomsg ifi{};
  auto want = NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
                  .Raw(&ifi, sizeof ifi)
                  .Str(IFLA_IFNAME, "ib-pod")
                  .U32(IFLA_LINK, 8)
                  .U32(IFLA_NET_NS_FD, 6)
                  .Begin(IFLA_LINKINFO)
                  .Str(IFLA_INFO_KIND, "ipoib")
                  .End()
                  .Done();
  auto got = EncodeChildLink(8, {.kind = ChildKind::kIpoib, .name = "ib-pod"}, 6);
  REQUIRE(got);
  CHECK(*got == want);
  auto connected = EncodeChildLink(
      8, {.kind = ChildKind::kIpoib, .name = "c", .ipoib_mode = IpoibMode::kConnected}, 6);
  REQUIRE(connected);
  CHECK(*connected == NlBytes(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
                          .Raw(&ifi, sizeof ifi)
                          .Str(IFLA_IFNAME, "c")
                          .U32(IFLA_LINK, 8)
                          .U32(IFLA_NET_NS_FD, 6)
                          .Begin(IFLA_LINKINFO)
                          .Str(IFLA_INFO_KIND, "ipoib")
                          .Begin(IFLA_INFO_DATA)
                          .U16(IFLA_IPOIB_MODE, IPOIB_MODE_CONNECTED)
                          .End()
                          .End()
                          .Done());
}

TEST_CASE("A deletion is one RTM_DELLINK naming the ifindex") {
  ifinfomsg ifi{};
  ifi.ifi_index = 77;
  CHECK(EncodeLinkDelete(77) ==
        NlBytes(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK).Raw(&ifi, sizeof ifi).Done());
}

}  // namespace
}  // namespace kuberdma::link
