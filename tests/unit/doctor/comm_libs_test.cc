// SPDX-License-Identifier: Apache-2.0
// rdma-doctor pod on the communication libraries other than NCCL: what each one's variables tell
// it, against the pod's HCAs, GIDs and interfaces, and what IBGDA needs of the node.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "doctor_inputs.h"
#include "kuberdma/base/files.h"
#include "kuberdma/doctor/doctor.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/sysfs/hca.h"
#include "temp_dir.h"

namespace kuberdma::doctor {
namespace {

namespace fs = std::filesystem;

struct Pod {
  explicit Pod(const std::string& fixture) {
    root = dir.path + "/root";
    fs::copy(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + fixture, root,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    in.root = sysfs::SysfsRoot(root);
    in.links = &links;
    in.state_dir = dir.path + "/state";
    in.plugin_dir = dir.path + "/plugins";
    in.proc_status = dir.path + "/status";
    Status("CapEff:\t00000000a80425fb\n");  // a container's default: no CAP_SYS_ADMIN
  }
  void Status(const std::string& text) const { REQUIRE(WriteFileAtomic(in.proc_status, text)); }
  void Put(const std::string& path, const std::string& text) const {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  // Every finding of `check`, in order.
  std::vector<Finding> Of(const View& v, const std::string& check) const {
    std::vector<Finding> out;
    for (const auto& f : v.findings) {
      if (f.check == check) out.push_back(f);
    }
    return out;
  }
  testing::TempDir dir{"kuberdma-doctor-comm"};
  std::string root;
  link::NetlinkLinkOps links;
  Inputs in;
};

const char* kTwoHcas = R"([{"name":"mlx5_0"},{"name":"mlx5_1"}])";

TEST_CASE("comm-devices: a library's list naming an HCA the pod lacks fails, one left out warns") {
  Pod p("roce8");
  p.in.getenv = Env({{"KUBERDMA_HCAS", kTwoHcas}, {"UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1"}});
  auto ok = p.Of(PodView(p.in), "comm-devices");
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].status == Status::kOk);
  p.in.getenv = Env({{"KUBERDMA_HCAS", kTwoHcas},
                     {"UCX_NET_DEVICES", "mlx5_0:1,mlx5_7:1"},
                     {"NVSHMEM_HCA_LIST", "mlx5_0:1"},
                     {"MC_TE_FILTERS", "mlx5_0,mlx5_1"}});
  auto found = p.Of(PodView(p.in), "comm-devices");
  REQUIRE(found.size() == 2);
  CHECK(found[0].status == Status::kFail);
  CHECK_THAT(found[0].message,
             Catch::StartsWith("UCX_NET_DEVICES names mlx5_7, which this pod was not given"));
  CHECK_THAT(found[0].fix, Catch::Contains("rdma-validate --env"));
  CHECK(found[1].status == Status::kWarn);
  CHECK_THAT(found[1].message, Catch::StartsWith("NVSHMEM_HCA_LIST leaves out mlx5_1"));
  // UCX's "all" and a deny list name nothing to hold the pod to.
  p.in.getenv = Env({{"KUBERDMA_HCAS", kTwoHcas}, {"UCX_NET_DEVICES", "all"}});
  CHECK(p.Of(PodView(p.in), "comm-devices").empty());
  p.in.getenv = Env({{"KUBERDMA_HCAS", kTwoHcas}, {"UCX_NET_DEVICES", "^mlx5_7:1"}});
  CHECK(p.Of(PodView(p.in), "comm-devices").empty());
}

TEST_CASE("comm-transport: UCX, Open MPI or Mooncake told TCP fails, naming the variable") {
  Pod p("roce8");
  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{{"UCX_TLS", "tcp,sm,self"},
                                                                      {"UCX_TLS", "^rc,ud,dc"},
                                                                      {"OMPI_MCA_pml", "ob1"},
                                                                      {"MC_FORCE_TCP", "1"}}) {
    p.in.getenv = Env({{k, v}});
    auto f = p.Of(PodView(p.in), "comm-transport");
    REQUIRE(f.size() == 1);
    CHECK(f[0].status == Status::kFail);
    CHECK_THAT(f[0].message, Catch::StartsWith(k + "=" + v + ": ") && Catch::Contains("TCP"));
  }
  for (const char* tls : {"rc,sm,self", "^tcp", "all", "rc_x,dc_x,cuda_copy"}) {
    p.in.getenv = Env({{"UCX_TLS", tls}, {"OMPI_MCA_pml", "ucx"}});
    auto f = p.Of(PodView(p.in), "comm-transport");
    REQUIRE(f.size() == 1);
    CHECK(f[0].status == Status::kOk);
  }
}

TEST_CASE("comm-gid-index: an index not the pod's own RoCE v2 GID fails with the pod's index") {
  Pod p("roce8-pod");
  // mlx5_0's table as a shared HCA's: another pod's 10.10.1.2 at 3, this pod's 10.10.1.9 at 6.
  std::string port = p.in.root.Sys("class/infiniband/mlx5_0/ports/1/");
  REQUIRE(WriteFileAtomic(port + "gids/6", "0000:0000:0000:0000:0000:ffff:0a0a:0109\n"));
  REQUIRE(WriteFileAtomic(port + "gid_attrs/types/6", "RoCE v2\n"));
  REQUIRE(WriteFileAtomic(port + "gid_attrs/ndevs/6", "net1\n"));
  OwnAddrs addrs("10.10.1.9");
  p.in.addrs = &addrs;
  const std::string one = R"([{"name":"mlx5_0"}])";
  p.in.getenv = Env({{"KUBERDMA_HCAS", one}, {"UCX_IB_GID_INDEX", "3"}, {"MC_GID_INDEX", "6"}});
  auto f = p.Of(PodView(p.in), "comm-gid-index");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kFail);
  CHECK(f[0].message ==
        "UCX_IB_GID_INDEX=3 on mlx5_0 (not this pod's RoCE v2 GID; this pod's is index 6)");
  p.in.getenv = Env({{"KUBERDMA_HCAS", one}, {"NVSHMEM_IB_GID_INDEX", "12"}});
  CHECK_THAT(p.Of(PodView(p.in), "comm-gid-index").at(0).message, Catch::Contains("no such entry"));
  p.in.getenv = Env({{"KUBERDMA_HCAS", one}, {"UCX_IB_GID_INDEX", "6"}, {"MC_GID_INDEX", "6"}});
  f = p.Of(PodView(p.in), "comm-gid-index");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kOk);
  // UCX's own "auto" is no index to hold; garbage is named.
  p.in.getenv = Env({{"KUBERDMA_HCAS", one}, {"UCX_IB_GID_INDEX", "auto"}});
  CHECK(p.Of(PodView(p.in), "comm-gid-index").empty());
  p.in.getenv = Env({{"KUBERDMA_HCAS", one}, {"UCX_IB_GID_INDEX", "3x"}});
  f = p.Of(PodView(p.in), "comm-gid-index");
  REQUIRE(f.size() == 1);
  CHECK(f[0].message == "UCX_IB_GID_INDEX=3x is not a GID index");
}

TEST_CASE("gloo-interfaces: Gloo or TensorPipe told an interface the pod lacks fails") {
  Pod p("roce8");
  p.in.getenv =
      Env({{"GLOO_SOCKET_IFNAME", "kuberdma-none0"}, {"TP_SOCKET_IFNAME", "kuberdma-none1"}});
  auto f = p.Of(PodView(p.in), "gloo-interfaces");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kFail);
  CHECK_THAT(f[0].message, Catch::StartsWith("Gloo is told kuberdma-none0, kuberdma-none1 "
                                             "(TensorPipe), which this pod does not have"));
  CHECK_THAT(f[0].fix, Catch::Contains("rdma-validate --env gloo"));
}

TEST_CASE("ompi-device-gate: Open MPI on HCAs not named mlx* needs pml_ucx_devices=any") {
  Pod p("rxe");
  const std::string rxe = R"([{"name":"rxe0"}])";
  p.in.getenv = Env({{"KUBERDMA_HCAS", rxe}, {"OMPI_MCA_pml", "ucx"}});
  auto f = p.Of(PodView(p.in), "ompi-device-gate");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kFail);
  CHECK_THAT(f[0].message, Catch::StartsWith("rxe0 are not named mlx*"));
  CHECK_THAT(f[0].fix, Catch::Contains("OMPI_MCA_pml_ucx_devices=any"));
  p.in.getenv =
      Env({{"KUBERDMA_HCAS", rxe}, {"OMPI_MCA_pml", "ucx"}, {"OMPI_MCA_pml_ucx_devices", "any"}});
  CHECK(p.Of(PodView(p.in), "ompi-device-gate").at(0).status == Status::kOk);
  // A pod that runs no MPI is not told about it.
  p.in.getenv = Env({{"KUBERDMA_HCAS", rxe}});
  CHECK(p.Of(PodView(p.in), "ompi-device-gate").empty());
}

// A PCI function's config space whose PCIe capability (at 0x40) has AtomicOp Requester Enable
// set or not.
std::string Config(bool atomics) {
  std::string c(256, '\0');
  c[0x34] = 0x40;
  c[0x40] = 0x10;  // PCI Express, last in the list
  c[0x40 + 0x28] = atomics ? 0x40 : 0x00;
  return c;
}

TEST_CASE("ibgda: what GPU-initiated RDMA lacks, each named, and asked for it fails") {
  Pod p("roce8");
  p.in.kernel_version = 610;
  auto hca = sysfs::ReadHca(p.in.root, "mlx5_0", sysfs::HcaDetail::kPorts);
  REQUIRE(hca);
  p.Put(p.in.root.Sys(hca->device_path + "/config"), Config(false));
  p.Put(p.root + "/proc/driver/nvidia/params", "RegistryDwords: \"\"\n");
  const std::string one = R"([{"name":"mlx5_0"}])";
  p.in.getenv = Env({{"KUBERDMA_HCAS", one}});
  auto f = p.Of(PodView(p.in), "ibgda");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kWarn);  // not asked for: said, not failed
  CHECK_THAT(f[0].message, Catch::Contains("PeerMappingOverride=1") &&
                               Catch::Contains("PCIe AtomicOps on mlx5_0") &&
                               Catch::Contains("CAP_SYS_ADMIN"));
  p.in.getenv = Env({{"KUBERDMA_HCAS", one}, {"NVSHMEM_IB_ENABLE_IBGDA", "1"}});
  f = p.Of(PodView(p.in), "ibgda");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kFail);
  CHECK_THAT(f[0].fix, Catch::Contains("NVreg_RegistryDwords"));
  // Everything in place.
  p.Put(p.in.root.Sys(hca->device_path + "/config"), Config(true));
  p.Put(p.root + "/proc/driver/nvidia/params",
        "ResmanDebugLevel: 4294967295\nRegistryDwords: \"PeerMappingOverride=1;\"\n");
  p.Status("Name:\tnvshmem\nCapEff:\t000001ffffffffff\n");
  f = p.Of(PodView(p.in), "ibgda");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kOk);
}

TEST_CASE("vf-libraries: a pod on SR-IOV VFs is told the libraries' limits there") {
  Pod p("sriov");
  p.in.getenv = Env({{"KUBERDMA_HCAS", R"([{"name":"mlx5_1"},{"name":"mlx5_6"}])"}});
  auto f = p.Of(PodView(p.in), "vf-libraries");
  REQUIRE(f.size() == 1);
  CHECK(f[0].status == Status::kWarn);
  CHECK_THAT(f[0].message, Catch::StartsWith("mlx5_1, mlx5_6 are SR-IOV VFs"));
  // A pod on the PFs is not.
  p.in.getenv = Env({{"KUBERDMA_HCAS", R"([{"name":"mlx5_0"},{"name":"mlx5_5"}])"}});
  CHECK(p.Of(PodView(p.in), "vf-libraries").empty());
}

}  // namespace
}  // namespace kuberdma::doctor
