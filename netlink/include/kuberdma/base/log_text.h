// SPDX-License-Identifier: Apache-2.0
// One value of a key=value log line, quoted so that nothing in it can end the value or forge
// another key: the names a switch sends (LLDP), an error's message (which may carry a file's
// text or a path a NAD named), anything from outside the process.
//
//   spdlog::warn("event=rail_recabled hca={} now={}", hca, LogQuoted(neighbor.Switch()));
//   // event=rail_recabled hca=mlx5_3 now="leaf \"7\"\x0a"
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace kuberdma {

// `text` in double quotes: '"' and '\' escaped with a backslash, any byte that is not printable
// ASCII as \xNN. Never fails.
inline std::string LogQuoted(std::string_view text) {
  std::string out = "\"";
  out.reserve(text.size() + 2);
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      char x[5];
      std::snprintf(x, sizeof x, "\\x%02x", c);
      out += x;
    }
  }
  out += '"';
  return out;
}

}  // namespace kuberdma
