// SPDX-License-Identifier: Apache-2.0
// NamespaceOps: the seam through which plugins open namespaces, so unit tests can replace it
// (pods that are gone, namespaces that fail to open on the N-th call).
#pragma once

#include <string>

#include "kuberdma/netns/netns.h"

namespace kuberdma::netns {

class NamespaceOps {
 public:
  virtual ~NamespaceOps() = default;
  // Opens the namespace at `path`; kNotFound when it no longer exists.
  virtual Result<NetNs> Open(const std::string& path) = 0;
  // The namespace the process runs in (the node's, for a CNI plugin).
  virtual Result<NetNs> Host() = 0;
};

class RealNamespaceOps final : public NamespaceOps {
 public:
  Result<NetNs> Open(const std::string& path) override { return NetNs::Open(path); }
  Result<NetNs> Host() override { return NetNs::Current(); }
};

}  // namespace kuberdma::netns
