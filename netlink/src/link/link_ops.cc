// SPDX-License-Identifier: Apache-2.0
// Helpers shared by every LinkOps implementation.
#include "kuberdma/link/link_ops.h"

#include <cctype>
#include <cstdio>

namespace kuberdma::link {

std::string_view ChildKindName(ChildKind kind) {
  switch (kind) {
    case ChildKind::kIpvlan:
      return "ipvlan";
    case ChildKind::kIpoib:
      return "ipoib";
    case ChildKind::kMacvlan:
      break;
  }
  return "macvlan";
}

std::string NormalizeMac(std::string_view mac) {
  std::string out(mac);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<std::vector<uint8_t>> MacBytes(std::string_view mac) {
  std::string text(mac);
  unsigned int b[6];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
                  &b[5], &tail) != 6) {
    return Fail(ErrorCode::kInvalidArgument, "MAC '" + text + "' is not aa:bb:cc:dd:ee:ff");
  }
  std::vector<uint8_t> out;
  for (unsigned int v : b) out.push_back(static_cast<uint8_t>(v));
  return out;
}

Result<LinkInfo> FindByMac(LinkOps& ops, const NetNs& ns, std::string_view mac) {
  KUBERDMA_ASSIGN_OR_RETURN(auto links, ops.List(ns));
  std::string want = NormalizeMac(mac);
  for (auto& l : links) {
    if (!want.empty() && NormalizeMac(l.mac) == want) return std::move(l);
  }
  return Fail(ErrorCode::kNotFound,
              "no link with MAC " + std::string(mac) + " in netns " + ns.path());
}

}  // namespace kuberdma::link
