// SPDX-License-Identifier: Apache-2.0
// Reading the objects deploy/ ships, for tests that must run what the cluster is given: the block
// scalar under a key (a ConfigMap's JSON, a NAD's config, an annotation), without a YAML library.
#pragma once

#include <string>

#include "kuberdma/base/error.h"
#include "kuberdma/base/files.h"

namespace kuberdma::test_support {

// The text of the block scalar (`key: |` or `key: >-`) or plain scalar after the first `key:` in
// deploy/<file>: its more-indented lines, joined by newlines (JSON reads folded and literal
// blocks alike). kNotFound when the file or the key is missing.
inline Result<std::string> ShippedBlock(const std::string& file, const std::string& key) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile(std::string(KUBERDMA_DEPLOY) + "/" + file));
  auto at = text.find(key + ":");
  if (at == std::string::npos) return Fail(ErrorCode::kNotFound, key + " not in " + file);
  size_t key_indent =
      at - (text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1);
  size_t eol = text.find('\n', at);
  std::string rest = text.substr(at + key.size() + 1, eol - at - key.size() - 1);
  auto first = rest.find_first_not_of(' ');
  if (first != std::string::npos && rest[first] != '|' && rest[first] != '>') {
    return rest.substr(first);  // a plain scalar on the key's line
  }
  std::string out;
  size_t pos = eol + 1;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end == std::string::npos ? end : end - pos);
    size_t lead = line.find_first_not_of(' ');
    if (lead != std::string::npos) {
      if (lead <= key_indent) break;
      out += line.substr(lead) + "\n";
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

}  // namespace kuberdma::test_support
