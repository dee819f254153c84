// SPDX-License-Identifier: Apache-2.0
// RDMA device operations over NETLINK_RDMA (the `rdma` tool's protocol): list devices and ports,
// read or set the system netns mode, move a device into a namespace, rename it. The real
// implementation is NetlinkRdmaOps; tests use fakes that can fail the N-th call.
//
//   NetlinkRdmaOps ops;
//   KUBERDMA_ASSIGN_OR_RETURN(NetnsMode mode, ops.GetNetnsMode(host));
//   if (mode == NetnsMode::kExclusive) {
//     KUBERDMA_ASSIGN_OR_RETURN(RdmaDevice d, ops.GetByName(host, "mlx5_0"));
//     KUBERDMA_TRY(ops.MoveTo(host, d.index, pod));   // sent from the namespace it is in
//   }
//
// A kernel without the RDMA subsystem answers every call with ErrorCode::kUnsupported and a
// message that says so; no call blocks for more than a few seconds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/rdma/netns_mode.h"

namespace kuberdma::rdma {

using netns::NetNs;

struct RdmaDevice {
  uint32_t index = 0;
  std::string name;
  std::string node_guid;  // "b83f:d203:0012:3456"
  std::string protocol;   // "ib", "roce", "iw" (RDMA_NLDEV_ATTR_DEV_PROTOCOL)
  uint32_t num_ports = 0;
  std::string fw_version;
};

struct RdmaPort {
  uint32_t dev_index = 0;
  uint32_t port = 0;
  uint8_t state = 0;  // ib_port_state: 4 is ACTIVE
  uint8_t phys_state = 0;
  uint32_t netdev_index = 0;
  std::string netdev_name;
};

class RdmaOps {
 public:
  virtual ~RdmaOps() = default;
  // Devices visible from `ns` (all of them in shared mode; the namespace's own in exclusive).
  virtual Result<std::vector<RdmaDevice>> List(const NetNs& ns) = 0;
  // The device named `name` as seen from `ns`; kNotFound if absent.
  virtual Result<RdmaDevice> GetByName(const NetNs& ns, const std::string& name) = 0;
  virtual Result<RdmaPort> GetPort(const NetNs& ns, uint32_t dev_index, uint32_t port) = 0;
  // The system-wide netns mode (it is a property of the init user namespace).
  virtual Result<NetnsMode> GetNetnsMode(const NetNs& ns) = 0;
  virtual Result<void> SetNetnsMode(const NetNs& ns, NetnsMode mode) = 0;
  // Moves device `dev_index` from `from` (where it must be) into `to`. Exclusive mode only.
  virtual Result<void> MoveTo(const NetNs& from, uint32_t dev_index, const NetNs& to) = 0;
  virtual Result<void> Rename(const NetNs& ns, uint32_t dev_index, const std::string& name) = 0;
};

// ---- Pure message encoding and decoding (tested byte for byte against the uapi constants) ----

// RDMA_NLDEV_CMD_GET; a dump of every device when `dev_index` is 0.
std::vector<uint8_t> EncodeDeviceGet(uint32_t dev_index);
// RDMA_NLDEV_CMD_PORT_GET for one port.
std::vector<uint8_t> EncodePortGet(uint32_t dev_index, uint32_t port);
// RDMA_NLDEV_CMD_SYS_GET.
std::vector<uint8_t> EncodeSysGet();
// RDMA_NLDEV_CMD_SYS_SET with RDMA_NLDEV_SYS_ATTR_NETNS_MODE (1 shared, 0 exclusive).
std::vector<uint8_t> EncodeSysSet(NetnsMode mode);
// RDMA_NLDEV_CMD_SET with RDMA_NLDEV_NET_NS_FD.
std::vector<uint8_t> EncodeMove(uint32_t dev_index, int netns_fd);
// RDMA_NLDEV_CMD_SET with RDMA_NLDEV_ATTR_DEV_NAME.
std::vector<uint8_t> EncodeRename(uint32_t dev_index, const std::string& name);

// Decoders take one complete netlink message (header included). kInvalidArgument on a message
// that is truncated, of the wrong type, or lacks a required attribute.
Result<RdmaDevice> DecodeDevice(std::span<const uint8_t> raw);
Result<RdmaPort> DecodePort(std::span<const uint8_t> raw);
Result<NetnsMode> DecodeSys(std::span<const uint8_t> raw);

}  // namespace kuberdma::rdma
