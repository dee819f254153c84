// SPDX-License-Identifier: Apache-2.0
// The communication libraries' plan: every library's variables in its own format for RoCE and
// InfiniBand pods, GIDs that agree or differ (shared mode), names that are not mlx5, one process
// per GPU or one for all; the plan of every fixture node; bad input refused naming it; and a pod's
// environment read back.
#include "kuberdma/contract/comm_env.h"

#include <catch2/catch.hpp>
#include <map>

#include "kuberdma/sysfs/hca.h"

namespace kuberdma::contract {
namespace {

std::map<std::string, std::string> Vars(Library l, const CommTopology& t) {
  auto e = PlanFor(l, t);
  REQUIRE(e);
  return {e->vars.begin(), e->vars.end()};
}

std::string Notes(Library l, const CommTopology& t) {
  auto e = PlanFor(l, t);
  REQUIRE(e);
  std::string out;
  for (const auto& n : e->notes) out += n + "\n";
  return out;
}

CommTopology Roce(uint32_t gid3, uint32_t gid4) {
  return {.hcas = {{.name = "mlx5_3",
                    .link_layer = "Ethernet",
                    .gid_index = gid3,
                    .address = "10.1.0.5",
                    .nearest_gpu = 2},
                   {.name = "mlx5_4",
                    .link_layer = "Ethernet",
                    .gid_index = gid4,
                    .address = "10.2.0.5",
                    .nearest_gpu = 3}},
          .control_netdev = "eth0",
          .control_address = "192.168.7.5"};
}

TEST_CASE("Each library is told the pod's HCAs, GID and control interface in its own format") {
  const CommTopology t = Roce(3, 3);
  CHECK(Vars(Library::kNccl, t) ==
        std::map<std::string, std::string>{{"NCCL_IB_HCA", "=mlx5_3:1,mlx5_4:1"},
                                           {"NCCL_SOCKET_IFNAME", "=eth0"},
                                           {"NCCL_IB_GID_INDEX", "3"}});
  CHECK(Vars(Library::kUcx, t) ==
        std::map<std::string, std::string>{{"UCX_NET_DEVICES", "mlx5_3:1,mlx5_4:1"},
                                           {"UCX_MAX_RNDV_RAILS", "1"},
                                           {"UCX_MAX_RMA_RAILS", "1"},
                                           {"UCX_IB_GID_INDEX", "3"}});
  auto mpi = Vars(Library::kOpenMpi, t);
  CHECK(mpi["OMPI_MCA_pml"] == "ucx");
  CHECK(mpi["OMPI_MCA_osc"] == "ucx");
  CHECK_FALSE(mpi.contains("OMPI_MCA_pml_ucx_devices"));  // mlx5 names pass Open MPI's gate
  CHECK(mpi["OMPI_MCA_btl_tcp_if_include"] == "eth0");
  CHECK(mpi["OMPI_MCA_oob_tcp_if_include"] == "eth0");
  CHECK(mpi["UCX_NET_DEVICES"] == "mlx5_3:1,mlx5_4:1");
  CHECK(Vars(Library::kNvshmem, t) ==
        std::map<std::string, std::string>{{"NVSHMEM_HCA_LIST", "mlx5_3:1,mlx5_4:1"},
                                           {"NVSHMEM_IB_GID_INDEX", "3"},
                                           {"NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "eth0"}});
  CHECK(Vars(Library::kMooncake, t) ==
        std::map<std::string, std::string>{
            {"MC_TE_FILTERS", "mlx5_3,mlx5_4"}, {"MC_FORCE_HCA", "1"}, {"MC_GID_INDEX", "3"}});
  auto nixl = Vars(Library::kNixl, t);
  CHECK(nixl["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "192.168.7.5");
  CHECK(nixl["UCX_NET_DEVICES"] == "mlx5_3:1,mlx5_4:1");
  CHECK(Vars(Library::kGloo, t) ==
        std::map<std::string, std::string>{{"GLOO_SOCKET_IFNAME", "eth0"},
                                           {"TP_SOCKET_IFNAME", "eth0"}});
  CHECK(Vars(Library::kRccl, t) == Vars(Library::kNccl, t));
  CHECK_THAT(Notes(Library::kRccl, t), Catch::Contains("RCCL reads NCCL's variable names"));
  CHECK(Vars(Library::kOneCcl, t) ==
        std::map<std::string, std::string>{
            {"CCL_MNIC", "local"}, {"CCL_MNIC_NAME", "mlx5_3,mlx5_4"}, {"CCL_MNIC_COUNT", "2"}});
}

TEST_CASE(
    "GIDs that differ per HCA: UCX's per-HCA subnets, one range, or a note, never a wrong "
    "index") {
  CommTopology t = Roce(3, 5);
  auto ucx = Vars(Library::kUcx, t);
  CHECK(ucx["UCX_IB_ROCE_SUBNETS"] == "10.1.0.5/32,10.2.0.5/32");
  CHECK_FALSE(ucx.contains("UCX_IB_GID_INDEX"));  // "must not be used together" (ib_iface.c)
  CHECK_THAT(Notes(Library::kUcx, t), Catch::Contains("UCX 1.18 or later"));
  CHECK_FALSE(Vars(Library::kNccl, t).contains("NCCL_IB_GID_INDEX"));
  CHECK_THAT(Notes(Library::kNccl, t), Catch::Contains("cannot be told"));
  CHECK_FALSE(Vars(Library::kMooncake, t).contains("MC_GID_INDEX"));
  CHECK_FALSE(Vars(Library::kNvshmem, t).contains("NVSHMEM_IB_GID_INDEX"));
  t.roce_range = "10.0.0.0/14";
  CHECK(Vars(Library::kNccl, t)["NCCL_IB_ADDR_RANGE"] == "10.0.0.0/14");
  CHECK(Vars(Library::kNvshmem, t)["NVSHMEM_IB_ADDR_RANGE"] == "10.0.0.0/14");
  SECTION("at Allocate, before the pod has addresses: no GID variable, a note saying where") {
    for (auto& h : t.hcas) h.gid_index.reset();
    for (Library l : AllLibraries()) {
      auto v = Vars(l, t);
      for (const auto& [k, _] : v) CHECK(k.find("GID") == std::string::npos);
      CHECK(v.count("NCCL_IB_ADDR_RANGE") == 0);
    }
    CHECK_THAT(Notes(Library::kUcx, t), Catch::Contains("rdma-validate --env ucx"));
  }
}

TEST_CASE("InfiniBand: devices and ports, no GID variable") {
  CommTopology t{.hcas = {{.name = "mlx5_0", .link_layer = "InfiniBand"},
                          {.name = "mlx5_1", .port = 2, .link_layer = "InfiniBand"}}};
  for (Library l : AllLibraries()) {
    for (const auto& [k, v] : Vars(l, t)) CHECK(k.find("GID") == std::string::npos);
  }
  CHECK(Vars(Library::kUcx, t)["UCX_NET_DEVICES"] == "mlx5_0:1,mlx5_1:2");
  CHECK(Vars(Library::kNccl, t)["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:2");
  CHECK_THAT(Notes(Library::kMooncake, t), Catch::Contains("MC_IB_PORT is one port for all"));
}

TEST_CASE("Names that are not mlx5: Open MPI's device gate opened, NVSHMEM's prefix set") {
  CommTopology t{.hcas = {{.name = "rxe0", .link_layer = "Ethernet", .gid_index = 1},
                          {.name = "rxe1", .link_layer = "Ethernet", .gid_index = 1}}};
  CHECK(Vars(Library::kOpenMpi, t)["OMPI_MCA_pml_ucx_devices"] == "any");
  CHECK(Vars(Library::kNvshmem, t)["NVSHMEM_HCA_PREFIX"] == "rxe");
  // UCX before 1.19 drops a non-mlx5 device's IPv4 UD packets unless its dgid check is off.
  CHECK(Vars(Library::kUcx, t)["UCX_UD_ETH_DGID_CHECK"] == "n");
  CHECK(Vars(Library::kUcx, Roce(3, 3)).count("UCX_UD_ETH_DGID_CHECK") == 0);
  t.hcas[1].name = "ibp28s0";
  CHECK(Vars(Library::kNvshmem, t).count("NVSHMEM_HCA_PREFIX") == 0);
  CHECK_THAT(Notes(Library::kNvshmem, t), Catch::Contains("share no prefix"));
  t.hcas[0].name = "ibp27s0";
  CHECK(Vars(Library::kNvshmem, t)["NVSHMEM_HCA_PREFIX"] == "ibp");
}

TEST_CASE("One process per GPU gets its GPU's NIC and one rail, one for all stripes over all") {
  CommTopology t = Roce(3, 3);
  t.local_rank = 3;
  CHECK(Vars(Library::kUcx, t)["UCX_NET_DEVICES"] == "mlx5_4:1");
  t.local_rank = 0;  // no HCA near GPU 0: every HCA, said
  CHECK(Vars(Library::kUcx, t)["UCX_NET_DEVICES"] == "mlx5_3:1,mlx5_4:1");
  CHECK_THAT(Notes(Library::kUcx, t), Catch::Contains("GPU 0"));
  t.local_rank.reset();
  t.layout = ProcessLayout::kOneForAll;
  auto ucx = Vars(Library::kUcx, t);
  CHECK(ucx["UCX_MAX_RNDV_RAILS"] == "2");
  CHECK(ucx["UCX_MAX_RMA_RAILS"] == "2");
  CHECK_THAT(Notes(Library::kUcx, t), Catch::Contains("UCX_MAX_RMA_RAILS needs UCX 1.14"));
  CHECK(Vars(Library::kOneCcl, t)["CCL_MNIC"] == "global");
}

TEST_CASE("Bad input is refused naming what is wrong") {
  auto refused = [](const CommTopology& t, const std::string& why) {
    auto e = PlanFor(Library::kUcx, t);
    REQUIRE_FALSE(e);
    CHECK(e.error().code() == ErrorCode::kInvalidArgument);
    CHECK_THAT(e.error().message(), Catch::Contains(why));
  };
  refused({}, "no HCA");
  refused({.hcas = {{.name = "mlx5_0,mlx5_1", .link_layer = "Ethernet"}}}, "cannot go into");
  refused({.hcas = {{.name = "mlx5:0", .link_layer = "Ethernet"}}}, "cannot go into");
  refused({.hcas = {{.name = "", .link_layer = "Ethernet"}}}, "cannot go into");
  refused({.hcas = {{.name = "mlx5_0", .port = 0, .link_layer = "Ethernet"}}}, "port 0");
  refused({.hcas = {{.name = "mlx5_0", .link_layer = "Ethernet"},
                    {.name = "mlx5_1", .link_layer = "InfiniBand"}}},
          "two fabrics");
  refused({.hcas = {{.name = "mlx5_0", .link_layer = "Ethernet"}}, .control_netdev = "eth0,eth1"},
          "not one interface");
  // Gloo needs no HCA; its interfaces are still one name each.
  auto gloo = PlanFor(Library::kGloo, {.tcp_interfaces = {"net1", "net2"}});
  REQUIRE(gloo);
  CHECK(gloo->vars.front() ==
        std::pair<std::string, std::string>{"GLOO_SOCKET_IFNAME", "net1,net2"});
  CHECK_FALSE(PlanFor(Library::kGloo, {.tcp_interfaces = {"net1,net2"}}));
  auto libs = ParseLibraries("ucx,nope");
  REQUIRE_FALSE(libs);
  CHECK_THAT(libs.error().message(), Catch::Contains("unknown library 'nope'"));
  CHECK(ParseLibraries("all")->size() == AllLibraries().size());
  CHECK(*ParseLibraries("mpi, ucx,mpi") == std::vector<Library>{Library::kOpenMpi, Library::kUcx});
}

TEST_CASE("Several libraries: a variable they share (UCX's under Open MPI and NIXL) is said once") {
  auto all = PlanForAll({Library::kUcx, Library::kOpenMpi, Library::kNixl}, Roce(3, 3));
  REQUIRE(all);
  std::map<std::string, int> count;
  for (const auto& e : *all) {
    for (const auto& [k, v] : e.vars) ++count[k];
  }
  for (const auto& [k, n] : count) CHECK(n == 1);
  CHECK(count.contains("OMPI_MCA_pml"));
  CHECK(count.contains("VLLM_NIXL_SIDE_CHANNEL_HOST"));
}

TEST_CASE("Every fixture node's HCAs make a plan for every library that names each of them") {
  for (const char* fixture : {"roce8", "ib8", "sriov", "sriov-ib", "roce8-pod", "rxe"}) {
    INFO(fixture);
    sysfs::SysfsRoot root(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + fixture);
    auto hcas = sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts);
    REQUIRE(hcas);
    std::vector<HcaInfo> described;
    for (const auto& h : *hcas) described.push_back(Describe(h, true));
    CommTopology t{.hcas = CommHcasOf(described)};
    REQUIRE_FALSE(t.hcas.empty());
    auto all = PlanForAll(AllLibraries(), t);
    REQUIRE(all);
    std::map<std::string, std::string> vars;
    for (const auto& e : *all) vars.insert(e.vars.begin(), e.vars.end());
    for (const auto& h : t.hcas) {
      CHECK_THAT(vars["UCX_NET_DEVICES"], Catch::Contains(h.name + ":" + std::to_string(h.port)));
      CHECK_THAT(vars["MC_TE_FILTERS"], Catch::Contains(h.name));
    }
  }
}

TEST_CASE("A pod's environment read back: lists, indices, and what does not parse") {
  std::map<std::string, std::string> env = {{"UCX_NET_DEVICES", "mlx5_0:1, mlx5_9:1"},
                                            {"UCX_TLS", "tcp"},
                                            {"UCX_IB_GID_INDEX", "3"},
                                            {"NVSHMEM_HCA_LIST", "mlx5_0:1:2"},
                                            {"NVSHMEM_IB_GID_INDEX", "-1"},
                                            {"MC_GID_INDEX", "three"},
                                            {"NCCL_IB_GID_INDEX", "5"},
                                            {"GLOO_SOCKET_IFNAME", "eth0,net1"}};
  std::vector<std::string> unparsed;
  CommSaid s = ReadCommEnv(
      [&](const char* k) { return env.contains(k) ? env[k].c_str() : nullptr; }, &unparsed);
  REQUIRE(s.ucx_devices);
  CHECK(*s.ucx_devices == std::vector<CommDevice>{{"mlx5_0", 1}, {"mlx5_9", 1}});
  CHECK(*s.ucx_tls == "tcp");
  CHECK(*s.nvshmem_hcas == std::vector<CommDevice>{{"mlx5_0", 1}});
  CHECK_FALSE(s.nvshmem_gid_index);  // -1: NVSHMEM's own choice
  CHECK(s.GidIndices() ==
        std::map<std::string, uint32_t>{{"UCX_IB_GID_INDEX", 3}, {"NCCL_IB_GID_INDEX", 5}});
  CHECK(unparsed == std::vector<std::string>{"MC_GID_INDEX=three is not a GID index"});
  CHECK(*s.gloo_ifnames == std::vector<std::string>{"eth0", "net1"});
  bool exclude = false;
  CHECK(ParseDeviceList("^mlx5_2", &exclude) == std::vector<CommDevice>{{"mlx5_2", 0}});
  CHECK(exclude);
}

}  // namespace
}  // namespace kuberdma::contract
