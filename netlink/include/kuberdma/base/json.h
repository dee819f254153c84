// SPDX-License-Identifier: Apache-2.0
// Parsing JSON that comes from outside the process (a NAD, an IPAM plugin's answer, a state
// record, a kubelet checkpoint, a pod's environment) with bounds that nlohmann's parser lacks: a
// nesting depth (nlohmann builds, copies and dumps a document recursively, so 200,000 levels end
// in a stack overflow) and a size.
//
//   auto doc = ParseUntrustedJson(text, "network config");
//   if (!doc) return Fail(doc.error());  // "network config: nesting deeper than 64 levels ..."
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "kuberdma/base/error.h"

namespace kuberdma {

// Deep enough for every document we read (a CNI result nests 5 levels, a checkpoint 6).
inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonBytes = 16u << 20;

// The deepest nesting of arrays and objects in `text`, counted outside strings; stops counting
// (and returns max_depth + 1) as soon as `max_depth` is exceeded. Never fails: malformed text is
// for the parser to report.
int JsonNestingDepth(std::string_view text, int max_depth);

// Parses `text` as JSON. kInvalidArgument, with `what` first in the message, when it exceeds
// `max_depth` levels or kMaxJsonBytes, or is not valid JSON. Never throws.
Result<nlohmann::json> ParseUntrustedJson(std::string_view text, std::string_view what,
                                          int max_depth = kMaxJsonDepth);

// `j` as text, with invalid UTF-8 in strings replaced by U+FFFD instead of throwing: every
// document we print may carry a name an outsider chose.
std::string DumpJson(const nlohmann::json& j, int indent = -1);

}  // namespace kuberdma
