// SPDX-License-Identifier: Apache-2.0
// Device-plugin slot IDs, written by rdma-device-plugin and read by rdma.
#include "kuberdma/podenv/slot_id.h"

#include <cstdio>

namespace kuberdma::podenv {

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

}  // namespace kuberdma::podenv
