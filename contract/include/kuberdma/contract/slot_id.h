// SPDX-License-Identifier: Apache-2.0
// The device IDs rdma-device-plugin advertises to the kubelet, and how `rdma` reads them back when
// Multus passes the i-th allocated ID as an attachment's deviceID (and pciBusID). One grammar for
// the writer and the reader:
//   per-HCA slot  "<hca>-<n>"              mlx5_3-017: that HCA
//   pool slot     "pool-<resource>-<n>"    pool-shared-017: one share of the pool, no HCA in it
// <n> has as many digits as the resource's largest slot number needs.
// And the DRA driver's per-device CDI names (kube-rdma.io/hca=<id>), whose <id> released Multus
// (v4.2.x-v4.3.0, the kubelet's pod-resources path) passes as deviceID:
//   claim device  "<claim uid>_<address>[_p<port>]"  8c1f..._0000:18:00.0: that HCA, of that claim
//
//   std::string id = FormatSlot({SlotKind::kPerHca, "mlx5_3", 17}, 1000);   // "mlx5_3-017"
//   if (auto s = ParseSlot(id); s && s->kind == SlotKind::kPerHca) UseHca(s->base);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kuberdma::contract {

enum class SlotKind { kPerHca, kPool };

struct Slot {
  SlotKind kind = SlotKind::kPerHca;
  std::string base;  // the HCA (per-HCA) or the resource name without its prefix (pool)
  uint32_t index = 0;
  bool operator==(const Slot&) const = default;
};

inline constexpr std::string_view kPoolSlotPrefix = "pool-";

// The ID of `slot` in a resource whose slots number `max` (the index's width follows from it).
std::string FormatSlot(const Slot& slot, uint32_t max);

// The slot `id` names, or nullopt when it is not a slot ID (a PCI address, an HCA name). Pure
// syntax: whether the HCA exists, or the index is below the resource's max, is the caller's.
// An RDMA device named "pool-..." cannot be told from a pool slot (no driver names them so).
std::optional<Slot> ParseSlot(std::string_view id);

// One device of a prepared DRA claim: the claim's uid, the HCA's bus address (PCI or
// auxiliary, as sysfs names it; the HCA name where it has none) and, on an HCA with several
// ports, the port. Its text is a CDI device name (letters, digits, '_', '-', '.', ':').
struct ClaimDevice {
  std::string uid;
  std::string address;
  uint32_t port = 0;  // 0: the HCA has one port
  bool operator==(const ClaimDevice&) const = default;
};

inline constexpr std::string_view kClaimDeviceCdiKind = "kube-rdma.io/hca";

std::string FormatClaimDevice(const ClaimDevice& d);
// nullopt when `id` is not of that form (a uid is 36 characters of hex digits and dashes, the
// address is non-empty and CDI-safe).
std::optional<ClaimDevice> ParseClaimDevice(std::string_view id);

}  // namespace kuberdma::contract
