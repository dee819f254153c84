// SPDX-License-Identifier: Apache-2.0
// The one-message move: RTM_NEWLINK bytes against the uapi layout.
#include <linux/if.h>
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

}  // namespace
}  // namespace kuberdma::link
