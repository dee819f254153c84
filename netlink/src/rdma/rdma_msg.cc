// SPDX-License-Identifier: Apache-2.0
// NETLINK_RDMA message encoding and decoding: pure functions over bytes, built with libnl's
// message helpers and the kernel's uapi constants (<rdma/rdma_netlink.h>).
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

#include "kuberdma/nl/common.h"
#include "kuberdma/rdma/rdma_ops.h"

namespace kuberdma::rdma {

namespace {

using nl::MsgPtr;

constexpr int Type(int cmd) { return RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd); }

MsgPtr New(int cmd, int flags) { return MsgPtr(nlmsg_alloc_simple(Type(cmd), flags)); }

std::vector<uint8_t> Bytes(const MsgPtr& m) { return nl::MsgBytes(m.get()); }

// Validates the header and parses attributes into `tb` (indexed by RDMA_NLDEV_ATTR_*).
Result<void> Parse(std::span<const uint8_t> msg, int want_cmd, nlattr** tb) {
  if (msg.size() < sizeof(nlmsghdr)) {
    return Fail(ErrorCode::kInvalidArgument, "RDMA netlink message truncated (no header)");
  }
  nlmsghdr hdr{};
  std::memcpy(&hdr, msg.data(), sizeof hdr);
  if (hdr.nlmsg_len < sizeof(nlmsghdr) || hdr.nlmsg_len > msg.size()) {
    return Fail(ErrorCode::kInvalidArgument, "RDMA netlink message length " +
                                                 std::to_string(hdr.nlmsg_len) + " exceeds " +
                                                 std::to_string(msg.size()) + " bytes received");
  }
  if (hdr.nlmsg_type != Type(want_cmd)) {
    return Fail(ErrorCode::kInvalidArgument,
                "unexpected RDMA netlink message type " + std::to_string(hdr.nlmsg_type));
  }
  // nlmsg_parse reads through a non-const header; hand it an aligned private copy.
  auto* h = const_cast<nlmsghdr*>(reinterpret_cast<const nlmsghdr*>(msg.data()));
  int err = nlmsg_parse(h, 0, tb, RDMA_NLDEV_ATTR_MAX - 1, nullptr);
  if (err < 0) return Fail(ErrorCode::kInvalidArgument, "malformed RDMA netlink attributes");
  return {};
}

bool Has(nlattr** tb, int attr, int min_len) {
  return tb[attr] != nullptr && nla_len(tb[attr]) >= min_len;
}

std::string Str(nlattr** tb, int attr) {
  if (!tb[attr] || nla_len(tb[attr]) <= 0) return "";
  const char* s = static_cast<const char*>(nla_data(tb[attr]));
  return {s, strnlen(s, static_cast<size_t>(nla_len(tb[attr])))};
}

std::string FormatGuid(uint64_t g) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%04" PRIx64 ":%04" PRIx64 ":%04" PRIx64 ":%04" PRIx64,
                (g >> 48) & 0xffff, (g >> 32) & 0xffff, (g >> 16) & 0xffff, g & 0xffff);
  return buf;
}

// Decoders run on bytes that may be unaligned (a std::vector<uint8_t> copy); copy the message
// into 4-byte aligned storage first, as netlink attributes require.
template <typename F>
auto WithAligned(std::span<const uint8_t> msg, F&& fn) {
  std::vector<uint32_t> buf((msg.size() + 3) / 4);
  // memcpy's arguments must not be null even for 0 bytes (an empty message: UBSan).
  if (!msg.empty()) std::memcpy(buf.data(), msg.data(), msg.size());
  return fn(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf.data()), msg.size()));
}

}  // namespace

std::vector<uint8_t> EncodeDeviceGet(uint32_t dev_index) {
  if (dev_index == 0) return Bytes(New(RDMA_NLDEV_CMD_GET, NLM_F_REQUEST | NLM_F_DUMP));
  MsgPtr m = New(RDMA_NLDEV_CMD_GET, NLM_F_REQUEST);
  nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  return Bytes(m);
}

std::vector<uint8_t> EncodePortGet(uint32_t dev_index, uint32_t port) {
  MsgPtr m = New(RDMA_NLDEV_CMD_PORT_GET, NLM_F_REQUEST);
  nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  nla_put_u32(m.get(), RDMA_NLDEV_ATTR_PORT_INDEX, port);
  return Bytes(m);
}

std::vector<uint8_t> EncodeSysGet() { return Bytes(New(RDMA_NLDEV_CMD_SYS_GET, NLM_F_REQUEST)); }

std::vector<uint8_t> EncodeSysSet(NetnsMode mode) {
  MsgPtr m = New(RDMA_NLDEV_CMD_SYS_SET, NLM_F_REQUEST | NLM_F_ACK);
  nla_put_u8(m.get(), RDMA_NLDEV_SYS_ATTR_NETNS_MODE, mode == NetnsMode::kShared ? 1 : 0);
  return Bytes(m);
}

std::vector<uint8_t> EncodeMove(uint32_t dev_index, int netns_fd) {
  MsgPtr m = New(RDMA_NLDEV_CMD_SET, NLM_F_REQUEST | NLM_F_ACK);
  nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  nla_put_u32(m.get(), RDMA_NLDEV_NET_NS_FD, static_cast<uint32_t>(netns_fd));
  return Bytes(m);
}

std::vector<uint8_t> EncodeRename(uint32_t dev_index, const std::string& name) {
  MsgPtr m = New(RDMA_NLDEV_CMD_SET, NLM_F_REQUEST | NLM_F_ACK);
  nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  nla_put_string(m.get(), RDMA_NLDEV_ATTR_DEV_NAME, name.c_str());
  return Bytes(m);
}

Result<RdmaDevice> DecodeDevice(std::span<const uint8_t> raw) {
  return WithAligned(raw, [](std::span<const uint8_t> msg) -> Result<RdmaDevice> {
    nlattr* tb[RDMA_NLDEV_ATTR_MAX] = {};
    KUBERDMA_TRY(Parse(msg, RDMA_NLDEV_CMD_GET, tb));
    if (!Has(tb, RDMA_NLDEV_ATTR_DEV_INDEX, 4) || !Has(tb, RDMA_NLDEV_ATTR_DEV_NAME, 1)) {
      return Fail(ErrorCode::kInvalidArgument, "RDMA device message lacks index or name");
    }
    RdmaDevice d;
    d.index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
    d.name = Str(tb, RDMA_NLDEV_ATTR_DEV_NAME);
    if (Has(tb, RDMA_NLDEV_ATTR_NODE_GUID, 8)) {
      d.node_guid = FormatGuid(nla_get_u64(tb[RDMA_NLDEV_ATTR_NODE_GUID]));
    }
    d.protocol = Str(tb, RDMA_NLDEV_ATTR_DEV_PROTOCOL);
    d.fw_version = Str(tb, RDMA_NLDEV_ATTR_FW_VERSION);
    if (Has(tb, RDMA_NLDEV_ATTR_PORT_INDEX, 4)) {
      d.num_ports = nla_get_u32(tb[RDMA_NLDEV_ATTR_PORT_INDEX]);
    }
    return d;
  });
}

Result<RdmaPort> DecodePort(std::span<const uint8_t> raw) {
  return WithAligned(raw, [](std::span<const uint8_t> msg) -> Result<RdmaPort> {
    nlattr* tb[RDMA_NLDEV_ATTR_MAX] = {};
    KUBERDMA_TRY(Parse(msg, RDMA_NLDEV_CMD_PORT_GET, tb));
    if (!Has(tb, RDMA_NLDEV_ATTR_DEV_INDEX, 4) || !Has(tb, RDMA_NLDEV_ATTR_PORT_INDEX, 4)) {
      return Fail(ErrorCode::kInvalidArgument, "RDMA port message lacks device or port index");
    }
    RdmaPort p;
    p.dev_index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
    p.port = nla_get_u32(tb[RDMA_NLDEV_ATTR_PORT_INDEX]);
    if (Has(tb, RDMA_NLDEV_ATTR_PORT_STATE, 1))
      p.state = nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_STATE]);
    if (Has(tb, RDMA_NLDEV_ATTR_PORT_PHYS_STATE, 1)) {
      p.phys_state = nla_get_u8(tb[RDMA_NLDEV_ATTR_PORT_PHYS_STATE]);
    }
    if (Has(tb, RDMA_NLDEV_ATTR_NDEV_INDEX, 4)) {
      p.netdev_index = nla_get_u32(tb[RDMA_NLDEV_ATTR_NDEV_INDEX]);
    }
    p.netdev_name = Str(tb, RDMA_NLDEV_ATTR_NDEV_NAME);
    return p;
  });
}

Result<NetnsMode> DecodeSys(std::span<const uint8_t> raw) {
  return WithAligned(raw, [](std::span<const uint8_t> msg) -> Result<NetnsMode> {
    nlattr* tb[RDMA_NLDEV_ATTR_MAX] = {};
    KUBERDMA_TRY(Parse(msg, RDMA_NLDEV_CMD_SYS_GET, tb));
    if (!Has(tb, RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 1)) {
      return Fail(ErrorCode::kInvalidArgument, "RDMA sys message lacks the netns mode");
    }
    return nla_get_u8(tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE]) != 0 ? NetnsMode::kShared
                                                               : NetnsMode::kExclusive;
  });
}

}  // namespace kuberdma::rdma
