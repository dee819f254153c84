// SPDX-License-Identifier: Apache-2.0
// SysfsRoot: every read of /sys (and the /dev/infiniband node list) goes through one value whose
// root tests can move onto a fixture tree, as rdma-core does with SYSFS_PATH.
//
//   SysfsRoot root = SysfsRoot::FromEnv();              // "/" unless KUBERDMA_SYSFS_ROOT is set
//   auto mode = root.ReadAttr("module/ib_core/parameters/netns_mode");   // /sys/module/...
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"

namespace kuberdma::sysfs {

// The environment variable that moves the root for binaries (tests and the demo set it).
inline constexpr const char* kSysfsRootEnv = "KUBERDMA_SYSFS_ROOT";

class SysfsRoot {
 public:
  // `root` is the directory that holds `sys/` and `dev/` ("/" on a real node).
  explicit SysfsRoot(std::string root = "/");
  // Root from $KUBERDMA_SYSFS_ROOT, else "/".
  static SysfsRoot FromEnv();

  const std::string& root() const { return root_; }
  // Absolute path of `rel` below <root>/sys.
  std::string Sys(std::string_view rel) const;
  // Absolute path of `rel` below <root>/dev.
  std::string Dev(std::string_view rel) const;

  // Reads a sysfs attribute, trailing whitespace removed. kNotFound when absent.
  Result<std::string> ReadAttr(std::string_view rel) const;
  // ReadAttr, or `fallback` when the attribute cannot be read.
  std::string ReadAttrOr(std::string_view rel, std::string_view fallback) const;
  // Entries of a directory below sys/, sorted in natural order (mlx5_2 before mlx5_10).
  Result<std::vector<std::string>> ListDir(std::string_view rel) const;
  bool Exists(std::string_view rel) const;
  // Writes `value` to an existing sysfs attribute in one write(2), as the kernel's store
  // functions want (sriov_numvfs, driver bind/unbind). kNotFound when the attribute is absent;
  // the kernel's refusal (EBUSY, EINVAL, ...) as the errno of the Error, naming the path.
  Result<void> WriteAttr(std::string_view rel, std::string_view value) const;
  // Resolves symbolic links under sys/ to a path relative to <root>/sys
  // ("devices/pci.../0000:1a:00.0").
  Result<std::string> Resolve(std::string_view rel) const;

 private:
  std::string root_;
};

// Natural ordering for device names: digit runs compare numerically (mlx5_2 < mlx5_10).
bool NaturalLess(std::string_view a, std::string_view b);

}  // namespace kuberdma::sysfs
