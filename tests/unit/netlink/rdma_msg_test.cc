// SPDX-License-Identifier: Apache-2.0
// NETLINK_RDMA encoding and decoding, byte for byte against the kernel uapi constants.
#include <rdma/rdma_netlink.h>

#include <catch2/catch.hpp>

#include "kuberdma/rdma/netlink_rdma_ops.h"
#include "kuberdma/rdma/rdma_ops.h"
#include "nl_bytes.h"

namespace kuberdma::rdma {
namespace {

using testing::NlBytes;

constexpr uint16_t T(int cmd) {
  return static_cast<uint16_t>(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd));
}

TEST_CASE("A move is RDMA_NLDEV_CMD_SET with the device index and RDMA_NLDEV_NET_NS_FD") {
  auto want = NlBytes(T(RDMA_NLDEV_CMD_SET), NLM_F_REQUEST | NLM_F_ACK)
                  .U32(RDMA_NLDEV_ATTR_DEV_INDEX, 3)
                  .U32(RDMA_NLDEV_NET_NS_FD, 17)
                  .Done();
  CHECK(EncodeMove(3, 17) == want);
  CHECK(T(RDMA_NLDEV_CMD_SET) == (5 << 10) + 2);  // RDMA_NL_NLDEV is 5, CMD_SET 2
}

TEST_CASE("Rename carries RDMA_NLDEV_ATTR_DEV_NAME as a NUL-terminated, padded string") {
  auto want = NlBytes(T(RDMA_NLDEV_CMD_SET), NLM_F_REQUEST | NLM_F_ACK)
                  .U32(RDMA_NLDEV_ATTR_DEV_INDEX, 1)
                  .Str(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_9")
                  .Done();
  CHECK(EncodeRename(1, "mlx5_9") == want);
}

TEST_CASE("Netns mode get and set use the SYS commands and a u8 mode (1 shared, 0 exclusive)") {
  CHECK(EncodeSysGet() == NlBytes(T(RDMA_NLDEV_CMD_SYS_GET), NLM_F_REQUEST).Done());
  CHECK(EncodeSysSet(NetnsMode::kExclusive) ==
        NlBytes(T(RDMA_NLDEV_CMD_SYS_SET), NLM_F_REQUEST | NLM_F_ACK)
            .U8(RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 0)
            .Done());
  CHECK(EncodeSysSet(NetnsMode::kShared).at(20) == 1);
}

TEST_CASE("Device get is a dump for index 0 and a single get otherwise") {
  CHECK(EncodeDeviceGet(0) == NlBytes(T(RDMA_NLDEV_CMD_GET), NLM_F_REQUEST | NLM_F_DUMP).Done());
  CHECK(EncodeDeviceGet(4) ==
        NlBytes(T(RDMA_NLDEV_CMD_GET), NLM_F_REQUEST).U32(RDMA_NLDEV_ATTR_DEV_INDEX, 4).Done());
  CHECK(EncodePortGet(4, 1) == NlBytes(T(RDMA_NLDEV_CMD_PORT_GET), NLM_F_REQUEST)
                                   .U32(RDMA_NLDEV_ATTR_DEV_INDEX, 4)
                                   .U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1)
                                   .Done());
}

TEST_CASE("A kernel device reply decodes into name, index, GUID, protocol and port count") {
  auto msg = NlBytes(T(RDMA_NLDEV_CMD_GET), NLM_F_MULTI)
                 .U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2)
                 .Str(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_1")
                 .U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1)
                 .Str(RDMA_NLDEV_ATTR_FW_VERSION, "28.39.1002")
                 .U64(RDMA_NLDEV_ATTR_NODE_GUID, 0xb83fd20300121000ULL)
                 .Str(RDMA_NLDEV_ATTR_DEV_PROTOCOL, "roce")
                 .Done();
  auto d = DecodeDevice(msg);
  REQUIRE(d);
  CHECK(d->index == 2);
  CHECK(d->name == "mlx5_1");
  CHECK(d->num_ports == 1);
  CHECK(d->fw_version == "28.39.1002");
  CHECK(d->node_guid == "b83f:d203:0012:1000");
  CHECK(d->protocol == "roce");
}

TEST_CASE("Port and sys replies decode") {
  auto port = DecodePort(NlBytes(T(RDMA_NLDEV_CMD_PORT_GET), 0)
                             .U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2)
                             .U32(RDMA_NLDEV_ATTR_PORT_INDEX, 1)
                             .U8(RDMA_NLDEV_ATTR_PORT_STATE, 4)
                             .U8(RDMA_NLDEV_ATTR_PORT_PHYS_STATE, 5)
                             .U32(RDMA_NLDEV_ATTR_NDEV_INDEX, 7)
                             .Str(RDMA_NLDEV_ATTR_NDEV_NAME, "ens2f0np0")
                             .Done());
  REQUIRE(port);
  CHECK(port->state == 4);
  CHECK(port->phys_state == 5);
  CHECK(port->netdev_index == 7);
  CHECK(port->netdev_name == "ens2f0np0");
  auto sys =
      DecodeSys(NlBytes(T(RDMA_NLDEV_CMD_SYS_GET), 0).U8(RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 1).Done());
  REQUIRE(sys);
  CHECK(*sys == NetnsMode::kShared);
}

TEST_CASE("Truncated, mistyped and incomplete messages are errors, not crashes") {
  auto good = NlBytes(T(RDMA_NLDEV_CMD_GET), 0)
                  .U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2)
                  .Str(RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_1")
                  .Done();
  for (size_t cut : {size_t{0}, size_t{8}, size_t{16}, good.size() - 1}) {
    INFO("cut at " << cut);
    auto r = DecodeDevice(std::span(good.data(), cut));
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kInvalidArgument);
  }
  CHECK_FALSE(DecodePort(good));  // a device message is not a port message
  auto no_name = NlBytes(T(RDMA_NLDEV_CMD_GET), 0).U32(RDMA_NLDEV_ATTR_DEV_INDEX, 2).Done();
  CHECK_FALSE(DecodeDevice(no_name));
  auto short_attr = NlBytes(T(RDMA_NLDEV_CMD_GET), 0)
                        .U8(RDMA_NLDEV_ATTR_DEV_INDEX, 2)
                        .Str(RDMA_NLDEV_ATTR_DEV_NAME, "x")
                        .Done();
  CHECK_FALSE(DecodeDevice(short_attr));  // a u32 attribute one byte long
}

TEST_CASE("A kernel without the RDMA subsystem is reported as unsupported, quickly") {
  if (KernelHasRdma()) {
    SUCCEED("this kernel has RDMA netlink; the absent-subsystem path is covered elsewhere");
    return;
  }
  NetlinkRdmaOps ops;
  auto host = netns::NetNs::Current();
  REQUIRE(host);
  auto mode = ops.GetNetnsMode(*host);
  REQUIRE_FALSE(mode);
  CHECK(mode.error().code() == ErrorCode::kUnsupported);
  CHECK_THAT(mode.error().message(), Catch::Contains("no RDMA subsystem"));
  CHECK(ops.List(*host).error().code() == ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace kuberdma::rdma

TEST_CASE("The RDMA netns mode's names read back, and anything else is unavailable") {
  using kuberdma::rdma::NetnsMode;
  for (NetnsMode m : {NetnsMode::kShared, NetnsMode::kExclusive}) {
    CHECK(kuberdma::rdma::ParseNetnsMode(kuberdma::rdma::NetnsModeName(m)) == m);
  }
  CHECK(kuberdma::rdma::NetnsModeName(std::optional<NetnsMode>{}) == "unavailable");
  CHECK_FALSE(kuberdma::rdma::ParseNetnsMode("unavailable").has_value());
  CHECK_FALSE(kuberdma::rdma::ParseNetnsMode("Exclusive").has_value());
}
