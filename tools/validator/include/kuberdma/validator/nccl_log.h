// SPDX-License-Identifier: Apache-2.0
// Reads NCCL's INFO log (NCCL_DEBUG=INFO, NCCL_DEBUG_FILE) for what NCCL chose: the network it
// used, its device list ("NET/IB : Using [0]mlx5_0:1/RoCE ..." or "NET/Socket : Using
// [0]net1:10.1.0.1<0> ..."), how many channels went through each device ("Channel 00/0 : 0[0] ->
// 1[1] [send] via NET/IB/0/GDRDMA", PXN "via NET/IB/0(1)/GDRDMA"), and whether any channel used a
// path that bypasses the NICs (P2P, SHM, NVLS, CollNet).
//
//   NcclLog log;
//   for (auto& line : lines) log.Add(line);
//   log.devices()  // {"mlx5_0", "mlx5_3"}; merged NICs ("mlx5_0+mlx5_1") count for both
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/sysfs/hca.h"

namespace kuberdma::validator {

// The GID a RoCE device's queue pairs used, from "NET/IB: NCCL Dev 0 IbDev 3 Port 1 qpn 1234
// mtu 5 GID 3 (0/1020A0AFFFF0000) ..." (NCCL prints the two 64-bit halves of the raw GID as the
// host reads them: little-endian).
struct GidUse {
  int index = -1;
  uint64_t subnet_prefix = 0;
  uint64_t interface_id = 0;
  // The GID's 16 bytes in network order.
  std::array<uint8_t, 16> Bytes() const;
  // The same GID as the kernel's gid table spells it, for sysfs::Gid's questions.
  sysfs::Gid AsSysfs() const;
  bool IsLinkLocal() const;     // fe80::/64
  std::string Ipv4() const;     // of an IPv4-mapped GID, else ""
  std::string Address() const;  // canonical IPv6 text
};

// What NCCL said about GPUDirect RDMA for one NET device (NCCL 2.18-2.28 print it the same way
// in substance): whether the device could do it at all ("NET/IB : GPU Direct RDMA Enabled|Disabled
// for HCA 0 'mlx5_0'": nvidia-peermem or DMA-BUF), whether a GPU was close enough ("GPU Direct RDMA
// Disabled for GPU 0 / HCA 0 (distance 9 > 5)"), and how many channels through it moved GPU
// memory directly ("via NET/IB/0/GDRDMA") or staged it through host memory ("via NET/IB/0").
struct GdrUse {
  int direct_channels = 0;
  int staged_channels = 0;
  int supported = -1;   // 1 enabled, 0 disabled, -1 not said
  std::string too_far;  // "distance 9 > 5" when NCCL found a GPU too far for it; else ""
};

// Bounds on what a log may cost: a rank killed by the watchdog, or a loop of warnings, can leave
// a log of any size and a line cut anywhere.
inline constexpr size_t kMaxLogHeadBytes = 12u << 20;  // NCCL's set-up lines come first
inline constexpr size_t kMaxLogTailBytes = 4u << 20;   // its last warnings come last
inline constexpr size_t kMaxWarnings = 64;
inline constexpr size_t kMaxLineBytes = 64u << 10;

// NCCL's INFO log, parsed line by line. Total: any bytes are accepted, nothing throws.
class NcclLog {
 public:
  void Add(std::string_view line);
  void AddText(std::string_view text);  // many lines
  // Adds a log file's lines: all of it up to kMaxLogHeadBytes + kMaxLogTailBytes, else its head
  // and tail (what was skipped is counted in skipped_bytes()). false when it cannot be read.
  bool AddFile(const std::string& path);

  const std::string& network() const { return network_; }  // "IB", "Socket" ("" if not seen)
  const std::string& version() const { return version_; }  // "2.28.3"
  // Device names in NCCL's index order; a merged device "a+b" is one entry.
  const std::vector<std::string>& device_list() const { return devices_; }
  // Every physical device name NCCL said it uses (merged devices split).
  std::set<std::string> devices() const;
  // Channels (send and receive connections) through each physical device.
  const std::map<std::string, int>& channels() const { return channels_; }
  // Transports that carried channels: "NET/IB", "NET/Socket", "P2P", "SHM", "NVLS", "CollNet".
  const std::set<std::string>& transports() const { return transports_; }
  // Transports other than NET that carried a channel (the collective bypassed the NICs).
  std::set<std::string> bypasses() const;
  // The first kMaxWarnings warnings (each cut to 1 KiB); dropped_warnings() counts the rest.
  const std::vector<std::string>& warnings() const { return warnings_; }
  size_t dropped_warnings() const { return dropped_warnings_; }
  size_t skipped_bytes() const { return skipped_bytes_; }
  // The GID each RoCE device used (by physical device name), where NCCL logged its QPs.
  const std::map<std::string, GidUse>& gids() const { return gids_; }
  // GPUDirect RDMA per physical device name, where NCCL said anything about it.
  const std::map<std::string, GdrUse>& gdr() const { return gdr_; }

 private:
  void UsingLine(std::string_view net, std::string_view rest);
  void ChannelLine(std::string_view via);
  void QpLine(std::string_view line);
  void GdrLine(std::string_view rest);
  // The devices behind NCCL's NET index `idx` (a merged device is several); empty when unlisted.
  std::vector<std::string> DevicesAt(long idx) const;
  void Warn(std::string_view text);
  std::string network_;
  std::string version_;
  std::vector<std::string> devices_;
  std::map<std::string, int> channels_;
  std::set<std::string> transports_;
  std::vector<std::string> warnings_;
  size_t dropped_warnings_ = 0;
  size_t skipped_bytes_ = 0;
  std::map<std::string, GidUse> gids_;
  std::map<std::string, GdrUse> gdr_;
};

}  // namespace kuberdma::validator
