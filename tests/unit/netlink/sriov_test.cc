// SPDX-License-Identifier: Apache-2.0
// SR-IOV in the sysfs model: PFs and their VFs (sriov and sriov-ib fixtures), a VF's number on
// its PF, sriov_numvfs written through 0 and never past sriov_totalvfs, and a driver rebind (on
// a copy of a fixture, whose attribute files record what was written).
#include "kuberdma/sysfs/sriov.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/rails/rails.h"
#include "kuberdma/sriov/vfs.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::sysfs {

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

namespace {

SysfsRoot Fixture(const std::string& name) {
  return SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + name);
}

TEST_CASE("A PF reports its VF capacity and VFs, and a VF knows its PF and its number on it") {
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
  std::filesystem::remove(root.Sys("devices/pci0000:1a/0000:1a:01.0/0000:1b:00.3/driver"));
  auto none = RebindDriver(root, "0000:1b:00.3", std::chrono::milliseconds(100));
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kuberdma::sysfs

namespace kuberdma::sriov {
namespace {

// The sriov fixture's HCAs judged with no host network: rails by PCI order (rail 1 1b:00.0).
struct Planned {
  explicit Planned(const std::string& root_dir) : root(root_dir) {
    hcas = *sysfs::DiscoverHcas(root, sysfs::HcaDetail::kIdentity);
    roles = rails::JudgeHcas(hcas, rails::HostNet{}, rails::NodeConfig{});
  }
  std::vector<VfCountPlan> Plan(const std::string& json) {
    auto config = rails::ParseNodeConfig(json, "");
    REQUIRE(config);
    return PlanVfCounts(root, *config, roles, hcas);
  }
  sysfs::SysfsRoot root;
  std::vector<sysfs::Hca> hcas;
  rails::NodeRoles roles;
};

TEST_CASE("VF counts: applied by rail or name, blocked by firmware, a pod, or a missing PF") {
  sysfs::Copy c("sriov");
  Planned n(c.dir);
  auto plan = n.Plan(R"({"sriov":[{"rail":1,"numVfs":8},{"pf":"ens2f0np0","numVfs":4},
      {"pf":"mlx5_0x","numVfs":1}]})");
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].pf_address == "0000:1b:00.0");
  CHECK(plan[0].blocked == Blocked::kNone);
  CHECK(plan[1].Done());  // already has its 4
  CHECK(plan[2].blocked == Blocked::kNoSuchPf);
  auto line = ApplyVfCount(n.root, plan[0]);
  REQUIRE(line);
  CHECK_THAT(*line, Catch::Contains("4 -> 8 VFs"));
  CHECK(n.root.ReadAttrOr("bus/pci/devices/0000:1b:00.0/sriov_numvfs", "") == "8");
  auto kept = ApplyVfCount(n.root, plan[1]);
  CHECK_THAT(*kept, Catch::Contains("has its 4 VFs"));
  CHECK(n.root.ReadAttrOr("bus/pci/devices/0000:3c:00.0/sriov_numvfs", "") == "4");
  // More than the firmware offers: the mlxconfig fix, nothing written.
  auto over = n.Plan(R"({"sriov":[{"pf":"0000:3c:00.0","numVfs":17}]})");
  CHECK(over[0].blocked == Blocked::kFirmware);
  CHECK_THAT(over[0].fix,
             Catch::Contains("mlxconfig -d 0000:3c:00.0 set SRIOV_EN=1 NUM_OF_VFS=17"));
  CHECK_THAT(*ApplyVfCount(n.root, over[0]), Catch::Contains("not changed"));
  CHECK(n.root.ReadAttrOr("bus/pci/devices/0000:3c:00.0/sriov_numvfs", "") == "4");
  // A VF whose netdev left the host is in a pod: its PF's VFs are never re-created.
  std::filesystem::remove_all(n.root.Sys("devices/pci0000:3b/0000:3b:01.0/0000:3c:00.3/net"));
  auto busy = n.Plan(R"({"sriov":[{"rail":2,"numVfs":2}]})");
  REQUIRE(busy[0].blocked == Blocked::kInUse);
  CHECK_THAT(busy[0].why, Catch::Contains("VF 0000:3c:00.3") && Catch::Contains("in a pod"));
  CHECK_THAT(*ApplyVfCount(n.root, busy[0]), Catch::Contains("not changed"));
  CHECK(n.root.ReadAttrOr("bus/pci/devices/0000:3c:00.0/sriov_numvfs", "") == "4");
}

}  // namespace
}  // namespace kuberdma::sriov
