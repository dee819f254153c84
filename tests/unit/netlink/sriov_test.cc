// SPDX-License-Identifier: Apache-2.0
// SR-IOV in the sysfs model: PFs and their VFs (sriov and sriov-ib fixtures), a VF's number on
// its PF, sriov_numvfs written through 0 and never past sriov_totalvfs, and a driver rebind (on
// a copy of a fixture, whose attribute files record what was written).
#include "kuberdma/sysfs/sriov.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/sysfs/hca.h"

namespace kuberdma::sysfs {
namespace {

SysfsRoot Fixture(const std::string& name) {
  return SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + name);
}

// A fixture copied to a temporary directory, removed with it.
struct Copy {
  explicit Copy(const std::string& name) {
    char tmpl[] = "/tmp/kuberdma-sriov-XXXXXX";
    dir = mkdtemp(tmpl);
    std::filesystem::copy(
        std::string(KUBERDMA_FIXTURES) + "/sysfs/" + name, dir,
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
  }
  ~Copy() { std::filesystem::remove_all(dir); }
  std::string dir;
};

TEST_CASE("A PF reports its VF capacity and VFs; a VF knows its PF and its number on it") {
  auto pf = ReadSriovPf(Fixture("sriov"), "0000:1b:00.0");
  REQUIRE(pf);
  REQUIRE(*pf);
  CHECK((*pf)->total_vfs == 16);
  CHECK((*pf)->num_vfs == 4);
  CHECK((*pf)->driver == "mlx5_core");
  CHECK((*pf)->autoprobe == true);
  CHECK((*pf)->vfs ==
        std::vector<std::string>{"0000:1b:00.2", "0000:1b:00.3", "0000:1b:00.4", "0000:1b:00.5"});
  // A VF has no SR-IOV capability of its own; an unknown address is an error.
  auto vf = ReadSriovPf(Fixture("sriov"), "0000:1b:00.3");
  REQUIRE(vf);
  CHECK_FALSE(*vf);
  CHECK(ReadSriovPf(Fixture("sriov"), "0000:ee:00.0").error().code() == ErrorCode::kNotFound);
  auto hca = ReadHca(Fixture("sriov"), "mlx5_3", HcaDetail::kPorts);
  REQUIRE(hca);
  CHECK(hca->pf_address == "0000:1b:00.0");
  CHECK(hca->vf_index == 2);
  CHECK(ReadHca(Fixture("sriov"), "mlx5_0", HcaDetail::kIdentity)->vf_index == -1);
  // InfiniBand: VFs start with zero GUIDs; the third PF's firmware has SR-IOV off.
  auto ibvf = ReadHca(Fixture("sriov-ib"), "mlx5_1", HcaDetail::kPorts);
  REQUIRE(ibvf);
  CHECK(ibvf->node_guid == "0000:0000:0000:0000");
  CHECK(ibvf->link_layer() == LinkLayer::kInfiniBand);
  auto off = ReadSriovPf(Fixture("sriov-ib"), "0000:5d:00.0");
  REQUIRE(off);
  REQUIRE(*off);
  CHECK((*off)->total_vfs == 0);
}

TEST_CASE("sriov_numvfs goes through 0 to a new count, never past sriov_totalvfs") {
  Copy c("sriov");
  SysfsRoot root(c.dir);
  auto pf = **ReadSriovPf(root, "0000:1b:00.0");
  auto over = WriteNumVfs(root, pf, 17);
  REQUIRE_FALSE(over);
  CHECK(over.error().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(over.error().message(), Catch::Contains("at most 16"));
  CHECK(root.ReadAttrOr("bus/pci/devices/0000:1b:00.0/sriov_numvfs", "") == "4");
  REQUIRE(WriteNumVfs(root, pf, 8));
  // The file keeps the last write; the kernel would have seen "0" first (4 -> 0 -> 8).
  CHECK(root.ReadAttrOr("bus/pci/devices/0000:1b:00.0/sriov_numvfs", "") == "8");
  REQUIRE(WriteNumVfs(root, pf, 4));  // unchanged: nothing written
  CHECK(root.ReadAttrOr("bus/pci/devices/0000:1b:00.0/sriov_numvfs", "") == "8");
  // An attribute the kernel does not have is an error, never a file created.
  CHECK(root.WriteAttr("bus/pci/devices/0000:1b:00.0/no_such", "1").error().code() ==
        ErrorCode::kNotFound);
}

TEST_CASE("A rebind unbinds the function from its driver and probes it again") {
  Copy c("sriov");
  SysfsRoot root(c.dir);
  REQUIRE(RebindDriver(root, "0000:1b:00.3", std::chrono::milliseconds(100)));
  CHECK(root.ReadAttrOr("bus/pci/drivers/mlx5_core/unbind", "") == "0000:1b:00.3");
  CHECK(root.ReadAttrOr("bus/pci/drivers_probe", "") == "0000:1b:00.3");
  std::filesystem::remove(c.dir + "/sys/devices/pci0000:1a/0000:1a:01.0/0000:1b:00.3/driver");
  auto none = RebindDriver(root, "0000:1b:00.3", std::chrono::milliseconds(100));
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kuberdma::sysfs
