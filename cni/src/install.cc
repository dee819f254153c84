// SPDX-License-Identifier: Apache-2.0
#include "kuberdma/cni/install.h"

#include <sys/stat.h>

#include <algorithm>
#include <functional>

#include "kuberdma/base/files.h"

namespace kuberdma::cni {

namespace {

bool HoldsMarker(const std::string& bytes) {
  return std::search(bytes.begin(), bytes.end(),
                     std::boyer_moore_searcher(kCniBinaryMarker.begin(), kCniBinaryMarker.end())) !=
         bytes.end();
}

std::string Basename(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<BinaryOwner> CniBinaryOwner(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return BinaryOwner::kAbsent;
    return FailErrno(errno, "stat " + path);
  }
  // A link or anything but a regular file was put there by someone else: never ours to replace.
  if (!S_ISREG(st.st_mode)) return BinaryOwner::kForeign;
  KUBERDMA_ASSIGN_OR_RETURN(std::string bytes, ReadRegularFile(path));
  return HoldsMarker(bytes) ? BinaryOwner::kOurs : BinaryOwner::kForeign;
}

Result<std::string> InstallCniBinary(const std::string& source, const std::string& dest) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string bytes, ReadFile(source));
  if (!HoldsMarker(bytes)) {
    return Fail(ErrorCode::kInvalidArgument,
                source + " is not kube-rdma's CNI binary (no marker): refusing to install it");
  }
  KUBERDMA_ASSIGN_OR_RETURN(BinaryOwner owner, CniBinaryOwner(dest));
  if (owner == BinaryOwner::kForeign) {
    std::string name = Basename(dest);
    return Fail(
        ErrorCode::kAlreadyExists,
        dest + " belongs to another CNI plugin (it is not kube-rdma's): not replacing it. " +
            (name == "rdma" ? "network-operator and sriov-network-operator install rdma-cni "
                              "under this name. "
                            : "") +
            "Install kube-rdma under a name of its own (the chart's cni.binaryName, default "
            "kube-rdma; NADs then say \"type\": that name), or remove that plugin from this "
            "node first (docs/migrate.md).");
  }
  if (owner == BinaryOwner::kOurs) {
    auto current = ReadRegularFile(dest);
    if (current && *current == bytes) return "unchanged " + dest + " (the same binary)";
  }
  KUBERDMA_TRY(WriteFileAtomic(dest, bytes, 0755));
  return std::string(owner == BinaryOwner::kOurs ? "replaced" : "installed") + " " + dest + " (" +
         std::to_string(bytes.size()) + " bytes)";
}

}  // namespace kuberdma::cni
