// SPDX-License-Identifier: Apache-2.0
// Putting the CNI binary into the host's CNI directory without taking another plugin's place.
// Another project's plugin may own the name (network-operator's rdma-cni installs `rdma`): a file
// there that is not kube-rdma's is never replaced. Ours carries kCniBinaryMarker, which is how
// the installer and rdma-doctor tell them apart.
//
//   auto r = InstallCniBinary("/proc/self/exe", "/host/opt/cni/bin/kube-rdma");
#pragma once

#include <string>
#include <string_view>

#include "kuberdma/base/error.h"

namespace kuberdma::cni {

// Bytes only kube-rdma's CNI binary holds (its --version prints them).
inline constexpr std::string_view kCniBinaryMarker = "kube-rdma CNI plugin (github.com/kube-rdma)";

enum class BinaryOwner { kAbsent, kOurs, kForeign };

// Whose binary `path` is: absent, ours (holds the marker) or another's (anything else: another
// plugin, a symbolic link, a directory). Errors only when it exists but cannot be read.
Result<BinaryOwner> CniBinaryOwner(const std::string& path);

// Copies `source` to `dest` (a temporary name beside it, then a rename: a runtime never execs a
// half-written binary), mode 0755, unless `dest` is another plugin's: then kAlreadyExists saying
// whose name it is and what to do. Returns what it did, for the log ("installed ..." or
// "unchanged ...").
Result<std::string> InstallCniBinary(const std::string& source, const std::string& dest);

}  // namespace kuberdma::cni
