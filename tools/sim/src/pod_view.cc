// SPDX-License-Identifier: Apache-2.0
// A pod's sysfs view written from a fixture: renamed netdevs and address-derived GIDs.
#include "kuberdma/sim/pod_view.h"

#include <cstdio>
#include <filesystem>

#include "kuberdma/base/files.h"
#include "kuberdma/link/addr_ops.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::sim {

namespace fs = std::filesystem;

namespace {

std::string MappedGid(const std::string& ipv4) {
  unsigned a = 0;
  unsigned b = 0;
  unsigned c = 0;
  unsigned d = 0;
  std::sscanf(ipv4.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a, b, c, d);
  return buf;
}

// Moves <device>/net/<old> to <device>/net/<new> and points class/net/<new> at it.
Result<void> RenameNetdev(const sysfs::SysfsRoot& root, const sysfs::Hca& h,
                          const std::string& to) {
  if (h.netdevs.empty()) return {};
  std::error_code ec;
  fs::path dev = root.Sys(h.device_path + "/net");
  fs::rename(dev / h.netdevs.front(), dev / to, ec);
  if (ec) return FailErrno(ec.value(), "rename " + (dev / h.netdevs.front()).string());
  fs::path cls = root.Sys("class/net");
  fs::remove(cls / h.netdevs.front(), ec);
  fs::create_symlink(fs::relative(dev / to, cls), cls / to, ec);
  if (ec) return FailErrno(ec.value(), "link " + (cls / to).string());
  return {};
}

Result<void> WriteGids(const sysfs::SysfsRoot& root, const sysfs::Hca& h, const PodAttachment& a) {
  std::string port = root.Sys(h.device_path + "/infiniband/" + h.name + "/ports/1/");
  for (int i = 0; i < 2; ++i)
    KUBERDMA_TRY(WriteFileAtomic(port + "gid_attrs/ndevs/" + std::to_string(i), a.ifname + "\n"));
  if (a.ipv4.empty()) return {};
  for (auto [index, type] : {std::pair{2, "IB/RoCE v1"}, std::pair{3, "RoCE v2"}}) {
    std::string i = std::to_string(index);
    KUBERDMA_TRY(WriteFileAtomic(port + "gids/" + i, MappedGid(a.ipv4) + "\n"));
    KUBERDMA_TRY(WriteFileAtomic(port + "gid_attrs/types/" + i, std::string(type) + "\n"));
    KUBERDMA_TRY(WriteFileAtomic(port + "gid_attrs/ndevs/" + i, a.ifname + "\n"));
  }
  return {};
}

}  // namespace

Result<void> WritePodView(const std::string& fixture, const std::string& out,
                          const std::vector<PodAttachment>& attachments) {
  std::error_code ec;
  fs::remove_all(out, ec);
  fs::copy(fixture, out, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) return FailErrno(ec.value(), "copy " + fixture + " to " + out);
  sysfs::SysfsRoot root(out);
  for (const auto& a : attachments) {
    KUBERDMA_ASSIGN_OR_RETURN(sysfs::Hca h,
                              sysfs::ReadHca(root, a.hca, sysfs::HcaDetail::kIdentity));
    KUBERDMA_TRY(WriteGids(root, h, a));
    KUBERDMA_TRY(RenameNetdev(root, h, a.ifname));
  }
  return {};
}

}  // namespace kuberdma::sim
