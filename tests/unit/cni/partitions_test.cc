// SPDX-License-Identifier: Apache-2.0
// What the node hands the subnet manager: members from the CNI's records, every GUID a node can
// hand out on a pkey, their partitions.conf form (opensm's grammar), and the hook run as a real
// process (its stdin, its exit status, its timeout).
#include "kuberdma/cni/partitions.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "kuberdma/cni/ipam.h"
#include "kuberdma/cni/partition_hook.h"
#include "kuberdma/doctor/doctor.h"
#include "kuberdma/link/vf_ops.h"

namespace kuberdma::cni {
namespace {

const std::string kFixtures = KUBERDMA_FIXTURES;

AttachmentRecord IbRecord(const std::string& cid, uint16_t pkey) {
  return AttachmentRecord{.network = "tenant-ib",
                          .container_id = cid,
                          .ifname = "net1",
                          .hca = "mlx5_0",
                          .hca_address = "0000:1a:00.0",
                          .link_layer = "InfiniBand",
                          .mode = AttachMode::kIpoib,
                          .pkey = pkey};
}

TEST_CASE("Partition members: a VF's given GUID, a shared HCA's port GUID, never the default") {
  sysfs::SysfsRoot root(kFixtures + "/sysfs/ib8");
  AttachmentRecord vf = IbRecord("c-vf", 0x8005);
  vf.mode = AttachMode::kVf;
  vf.vf = VfRecord{
      .pf_address = "0000:1b:00.0",
      .index = 2,
      .set = {{"nodeGuid", "02:aa:00:00:00:00:00:07"}, {"portGuid", "02:aa:00:00:00:00:00:07"}}};
  AttachmentRecord roce = IbRecord("c-roce", 0x8001);
  roce.link_layer = "Ethernet";
  auto members = PartitionMembers(
      {IbRecord("c-child", 0x8001), IbRecord("c-default", 0xffff), vf, roce}, root);
  REQUIRE(members.size() == 2);
  CHECK(members[0].pkey == 0x8001);
  // ib8's mlx5_0: GID 0 fe80::b83f:d203:0:1000.
  CHECK(members[0].guid == 0xb83fd20300001000ULL);
  CHECK_THAT(members[0].why, Catch::Contains("c-child") && Catch::Contains("mlx5_0 port 1"));
  CHECK(members[1].pkey == 0x8005);
  CHECK(members[1].guid == 0x02aa000000000007ULL);
  CHECK(VfPartitionMember(vf)->guid == 0x02aa000000000007ULL);
  CHECK_FALSE(VfPartitionMember(IbRecord("c", 0x8001)));
}

TEST_CASE("Every GUID a node can hand out on a pkey: each IB PF's port and its VFs' derived ones") {
  sysfs::SysfsRoot root(kFixtures + "/sysfs/sriov-ib");
  auto members = NodePartitionMembers(root, 0x8001);
  REQUIRE(members);
  // Two PFs with sriov_totalvfs 16, one with SR-IOV off: 2 + 2 * 16 + 1.
  CHECK(members->size() == 35);
  std::set<uint64_t> guids;
  for (const auto& m : *members) {
    CHECK(m.pkey == 0x8001);
    CHECK(m.guid != 0);
    guids.insert(m.guid);
  }
  CHECK(guids.size() == members->size());
  uint64_t vf2 = *GeneratedVfGuid(*link::ParseGuid("b83f:d203:0030:0000"), 2);
  CHECK(guids.contains(vf2));
  CHECK(NodePartitionMembers(sysfs::SysfsRoot(kFixtures + "/sysfs/roce8"), 0x8001)->empty());
}

TEST_CASE("partitions.conf: one definition per pkey, explicit, each GUID full, comments after") {
  std::string conf = RenderPartitionsConf(
      "gpu-17", {{0x8001, 0xb83fd20300001000ULL, "pod a net1 (mlx5_0 port 1)"},
                 {0x8001, 0x02aa000000000007ULL, "pod b net1 (VF 2 of 0000:1b:00.0)"},
                 {0x8005, 0x0201550300300000ULL, "VF 0 of mlx5_0 (derived)"}});
  CHECK_THAT(conf, Catch::Contains("kube-rdma-8001=0x8001, ipoib, defmember=full :\n"
                                   "    0xb83fd20300001000=full,  # pod a net1 (mlx5_0 port 1)\n"
                                   "    0x02aa000000000007=full  # pod b net1 (VF 2 of "
                                   "0000:1b:00.0)\n    ;\n"));
  CHECK_THAT(conf, Catch::Contains("kube-rdma-8005=0x8005, ipoib, defmember=full :\n"
                                   "    0x0201550300300000=full  # VF 0 of mlx5_0 (derived)\n"
                                   "    ;\n"));
  CHECK_THAT(conf, Catch::StartsWith("# kube-rdma: the port GUIDs node gpu-17"));
  // No partition, no definition: an empty partitions.conf is opensm's default.
  CHECK(RenderPartitionsConf("n", {}).find('=') == std::string::npos);
}

TEST_CASE("rdma-doctor partitions lists a pkey ahead and refuses pkeys that are no partition") {
  doctor::Inputs in{.root = sysfs::SysfsRoot(kFixtures + "/sysfs/sriov-ib"),
                    .state_dir = "/nonexistent/kube-rdma/cni"};
  auto conf = doctor::PartitionsConf(in, {"0x0001"}, "gpu-17");
  REQUIRE(conf);
  // Asked as limited (0x0001): partitions.conf grants full membership, 0x8001.
  CHECK_THAT(*conf, Catch::Contains("kube-rdma-8001=0x8001"));
  CHECK_THAT(*conf, Catch::Contains("(derived)"));
  for (const char* bad : {"0x7fff", "0x8000", "0xffff", "banana"}) {
    auto r = doctor::PartitionsConf(in, {bad}, "gpu-17");
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == ErrorCode::kInvalidArgument);
  }
}

// A hook script in a temporary directory, removed with it.
struct HookDir {
  HookDir() {
    char tmpl[] = "/tmp/kuberdma-hook-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  ~HookDir() { std::filesystem::remove_all(dir); }
  std::string Script(const std::string& body) const {
    std::string path = dir + "/hook";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string dir;
};

TEST_CASE("The partition hook runs as a process: JSON on stdin, exit 0 is done, else error 11") {
  HookDir d;
  const PartitionChange change{.add = true,
                               .pkey = 0x8005,
                               .guid = 0x02aa000000000007ULL,
                               .network = "tenant-ib",
                               .container_id = "c1",
                               .ifname = "net1"};
  ExecPartitionHook ok(d.Script("cat > " + d.dir + "/got"), "gpu-17");
  REQUIRE(ok.Apply(change));
  std::ifstream got(d.dir + "/got");
  auto j = nlohmann::json::parse(got);
  CHECK(j["action"] == "add");
  CHECK(j["pkey"] == "0x8005");
  CHECK(j["guid"] == "0x02aa000000000007");
  CHECK(j["node"] == "gpu-17");
  CHECK(j["containerId"] == "c1");

  ExecPartitionHook refuses(d.Script("echo 'UFM: 401 Unauthorized' >&2; exit 3"), "gpu-17");
  auto r = refuses.Apply(change);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == kTryAgainLater);
  CHECK_THAT(r.error().msg, Catch::Contains("exited 3") && Catch::Contains("401 Unauthorized"));

  ExecPartitionHook slow(d.Script("sleep 5"), "gpu-17", 200);
  auto late = slow.Apply(change);
  REQUIRE_FALSE(late);
  CHECK_THAT(late.error().msg, Catch::Contains("did not finish"));

  ExecPartitionHook missing(d.dir + "/absent", "gpu-17");
  REQUIRE_FALSE(missing.Apply(change));
}

TEST_CASE("A hook that exits without reading its stdin kills no caller: SIGPIPE never arrives") {
  // More than a pipe holds, so the write must meet the closed pipe; the test process keeps
  // SIGPIPE's default (fatal) disposition, unlike the rdma binary.
  PluginRun run = RunPlugin("/bin/true", {}, std::string(1 << 20, 'x'), 5000);
  CHECK(run.start_error.empty());
  CHECK(run.exit_code == 0);
}

}  // namespace
}  // namespace kuberdma::cni
