// SPDX-License-Identifier: Apache-2.0
// Bounded JSON parsing for outside input.
#include "kuberdma/base/json.h"

namespace kuberdma {

int JsonNestingDepth(std::string_view text, int max_depth) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > max_depth) return max_depth + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<nlohmann::json> ParseUntrustedJson(std::string_view text, std::string_view what,
                                          int max_depth) {
  if (text.size() > kMaxJsonBytes) {
    return Fail(ErrorCode::kInvalidArgument,
                std::string(what) + ": " + std::to_string(text.size()) + " bytes exceed the " +
                    std::to_string(kMaxJsonBytes >> 20) + " MiB limit");
  }
  if (JsonNestingDepth(text, max_depth) > max_depth) {
    return Fail(ErrorCode::kInvalidArgument, std::string(what) + ": nesting deeper than " +
                                                 std::to_string(max_depth) + " levels is refused");
  }
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Fail(ErrorCode::kInvalidArgument, std::string(what) + " is not valid JSON");
  }
  return j;
}

std::string DumpJson(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kuberdma
