// SPDX-License-Identifier: Apache-2.0
// Device-plugin slot IDs, written by rdma-device-plugin and read by rdma.
#include "kuberdma/contract/slot_id.h"

#include <cstdio>

namespace kuberdma::contract {

std::string FormatSlot(const Slot& slot, uint32_t max) {
  int width = max > 1000 ? 5 : (max > 100 ? 3 : (max > 10 ? 2 : 1));
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*u", width, slot.index);
  std::string prefix = slot.kind == SlotKind::kPool ? std::string(kPoolSlotPrefix) : "";
  return prefix + slot.base + "-" + buf;
}

std::optional<Slot> ParseSlot(std::string_view id) {
  auto dash = id.find_last_of('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size()) return std::nullopt;
  std::string_view digits = id.substr(dash + 1);
  if (digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  Slot s;
  s.index = 0;
  for (char c : digits) s.index = s.index * 10 + static_cast<uint32_t>(c - '0');
  std::string_view base = id.substr(0, dash);
  if (base.substr(0, kPoolSlotPrefix.size()) == kPoolSlotPrefix) {
    s.kind = SlotKind::kPool;
    base.remove_prefix(kPoolSlotPrefix.size());
  }
  if (base.empty()) return std::nullopt;
  s.base = std::string(base);
  return s;
}

std::string FormatClaimDevice(const ClaimDevice& d) {
  std::string out = d.uid + "_" + d.address;
  if (d.port != 0) out += "_p" + std::to_string(d.port);
  return out;
}

namespace {

bool IsUid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = s[i];
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (dash ? c != '-' : !hex) return false;
  }
  return true;
}

bool IsCdiSafe(std::string_view s) {
  return !s.empty() && s.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789_-.:") == std::string_view::npos;
}

}  // namespace

std::optional<ClaimDevice> ParseClaimDevice(std::string_view id) {
  auto sep = id.find('_');
  if (sep == std::string_view::npos || !IsUid(id.substr(0, sep))) return std::nullopt;
  ClaimDevice d{.uid = std::string(id.substr(0, sep))};
  std::string_view rest = id.substr(sep + 1);
  auto p = rest.rfind("_p");
  if (p != std::string_view::npos && p + 2 < rest.size() && rest.size() - p - 2 <= 3 &&
      rest.substr(p + 2).find_first_not_of("0123456789") == std::string_view::npos) {
    for (char c : rest.substr(p + 2)) d.port = d.port * 10 + static_cast<uint32_t>(c - '0');
    rest = rest.substr(0, p);
  }
  if (!IsCdiSafe(rest)) return std::nullopt;
  d.address = std::string(rest);
  return d;
}

}  // namespace kuberdma::contract
