// SPDX-License-Identifier: Apache-2.0
// A short, stable name for a longer one: 32-bit FNV-1a as 8 hex digits. Used where a name must
// fit a limit and stay distinct (slice names, DRA attribute values, label values); not for
// anything an attacker could profit from colliding.
//
//   std::string id = "b-" + ShortHash(joined_leaves);   // "b-a911184c"
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kuberdma {

inline std::string ShortHash(std::string_view text) {
  uint32_t h = 2166136261u;
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  char b[9];
  std::snprintf(b, sizeof b, "%08x", h);
  return b;
}

}  // namespace kuberdma
