// SPDX-License-Identifier: Apache-2.0
// The HCA model over the fixture trees of real node shapes.
#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::sysfs {
namespace {

SysfsRoot Fixture(const std::string& name) {
  return SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + name);
}

TEST_CASE("The 8-GPU RoCE node has eight ConnectX-7 HCAs in natural order across two NUMA nodes") {
  auto hcas = DiscoverHcas(Fixture("roce8"), HcaDetail::kPorts);
  REQUIRE(hcas);
  REQUIRE(hcas->size() == 8);
  for (size_t i = 0; i < 8; ++i) {
    const Hca& h = (*hcas)[i];
    CHECK(h.name == "mlx5_" + std::to_string(i));
    CHECK(h.bus == BusKind::kPci);
    CHECK(h.vendor == "0x15b3");
    CHECK(h.device_id == "0x1021");
    CHECK(h.driver == "mlx5_core");
    CHECK(h.numa_node == (i < 4 ? 0 : 1));
    CHECK(h.netdevs == std::vector<std::string>{"ens" + std::to_string(i + 1) + "f0np0"});
    CHECK(h.uverbs == "uverbs" + std::to_string(i));
    REQUIRE(h.ports.size() == 1);
    CHECK(h.link_layer() == LinkLayer::kEthernet);
    CHECK(h.ports[0].state == kPortActive);
    CHECK(h.ports[0].state_name == "ACTIVE");
    CHECK(h.ports[0].rate_gbps == 400.0);
    CHECK(h.ports[0].netdev == h.netdevs[0]);
    CHECK(h.ports[0].umad == "umad" + std::to_string(i));
    CHECK(h.ports[0].issm.empty());   // RoCE-only nodes have no issm requirement
    CHECK(h.ports[0].pkeys.empty());  // tables are only read with kTables
  }
  CHECK((*hcas)[3].address == "0000:3d:00.0");
}

TEST_CASE("The InfiniBand node has IPoIB netdevs, issm devices and pkey tables") {
  auto h = ReadHca(Fixture("ib8"), "mlx5_1", HcaDetail::kTables);
  REQUIRE(h);
  CHECK(h->link_layer() == LinkLayer::kInfiniBand);
  CHECK(h->netdevs.front().rfind("ibp", 0) == 0);
  CHECK(h->ports[0].issm == "issm1");
  CHECK(h->ports[0].pkeys == std::vector<uint16_t>{0xffff, 0x8001, 0x0002});
  CHECK(h->ports[0].gids.size() == 2);
}

TEST_CASE("SR-IOV VFs know their PF and auxiliary SFs their parent PCI function") {
  auto vf = ReadHca(Fixture("sriov"), "mlx5_1", HcaDetail::kIdentity);
  REQUIRE(vf);
  CHECK(vf->device_id == "0x101e");
  CHECK(vf->pf_address == "0000:1b:00.0");
  auto pf = ReadHca(Fixture("sriov"), "mlx5_0", HcaDetail::kIdentity);
  REQUIRE(pf);
  CHECK(pf->pf_address.empty());

  auto sf = ReadHca(Fixture("sf"), "mlx5_2", HcaDetail::kPorts);
  REQUIRE(sf);
  CHECK(sf->bus == BusKind::kAuxiliary);
  CHECK(sf->address == "mlx5_core.sf.2");
  CHECK(sf->pci_address == "0000:1b:00.0");
  CHECK(sf->numa_node == 0);
  CHECK(sf->netdevs == std::vector<std::string>{"enp27s0f0s88"});
}

TEST_CASE("A Soft-RoCE device is a virtual HCA: no PCI parent, its netdev from `parent`") {
  auto hcas = DiscoverHcas(Fixture("rxe"), HcaDetail::kTables);
  REQUIRE(hcas);
  REQUIRE(hcas->size() == 2);
  CHECK((*hcas)[0].bus == BusKind::kPci);
  const Hca& rxe = (*hcas)[1];
  CHECK(rxe.name == "rxe0");
  CHECK(rxe.bus == BusKind::kVirtual);
  CHECK(rxe.address.empty());
  CHECK(rxe.pci_address.empty());
  CHECK(rxe.numa_node == -1);
  CHECK(rxe.netdevs == std::vector<std::string>{"eth0"});
  CHECK(rxe.uverbs == "uverbs1");
  REQUIRE(rxe.ports.size() == 1);
  CHECK(rxe.ports[0].umad == "umad1");
  CHECK(rxe.link_layer() == LinkLayer::kEthernet);
  const Gid* v2 = FirstRoutableV2(rxe.ports[0].gids, "eth0");
  REQUIRE(v2 != nullptr);
  CHECK(v2->Ipv4() == "10.9.0.1");
}

TEST_CASE("HCAs are found by netdev and by bus address, short BDFs included") {
  SysfsRoot root = Fixture("roce8");
  auto by_netdev = HcaForNetdev(root, "ens6f0np0", HcaDetail::kIdentity);
  REQUIRE(by_netdev);
  CHECK(by_netdev->name == "mlx5_5");
  auto by_addr = HcaForAddress(root, "3d:00.0", HcaDetail::kIdentity);
  REQUIRE(by_addr);
  CHECK(by_addr->name == "mlx5_3");
  auto aux = HcaForAddress(Fixture("sf"), "mlx5_core.sf.2", HcaDetail::kIdentity);
  REQUIRE(aux);
  CHECK(aux->name == "mlx5_2");
  CHECK(HcaForAddress(root, "0000:ff:00.0", HcaDetail::kIdentity).error().code() ==
        ErrorCode::kNotFound);
  CHECK(HcaForNetdev(root, "eth9", HcaDetail::kIdentity).error().code() == ErrorCode::kNotFound);
}

TEST_CASE("A root without class/infiniband is a node with no HCAs, not an error") {
  auto hcas = DiscoverHcas(SysfsRoot("/nonexistent-kuberdma-root"), HcaDetail::kPorts);
  REQUIRE(hcas);
  CHECK(hcas->empty());
  CHECK(ReadHca(SysfsRoot("/nonexistent"), "mlx5_0", HcaDetail::kIdentity).error().code() ==
        ErrorCode::kNotFound);
}

TEST_CASE("Natural order puts mlx5_2 before mlx5_10") {
  CHECK(NaturalLess("mlx5_2", "mlx5_10"));
  CHECK_FALSE(NaturalLess("mlx5_10", "mlx5_2"));
  CHECK(NaturalLess("mlx5_1", "mlx5_1a"));
  CHECK_FALSE(NaturalLess("a", "a"));
  CHECK(NaturalLess("uverbs02", "uverbs3"));
}

TEST_CASE("Pkeys parse from hex and decimal and reject everything else") {
  CHECK(*ParsePkey("0xffff") == 0xffff);
  CHECK(*ParsePkey("0x8001") == 0x8001);
  CHECK(*ParsePkey("65535") == 0xffff);
  for (const char* bad : {"", "0x10000", "-1", "ffff", "0xffff ", "abc"}) {
    INFO(bad);
    CHECK_FALSE(ParsePkey(bad));
  }
}

TEST_CASE("The boot-time netns mode is read from ib_core's parameter") {
  CHECK(BootNetnsMode(Fixture("roce8")) == rdma::NetnsMode::kShared);
  CHECK(BootNetnsMode(Fixture("sriov")) == rdma::NetnsMode::kExclusive);
  CHECK_FALSE(BootNetnsMode(SysfsRoot("/nonexistent")).has_value());
}

}  // namespace
}  // namespace kuberdma::sysfs

namespace kuberdma::sysfs {
namespace {

TEST_CASE("Fixture trees have no dangling links (git drops empty directories)") {
  namespace fs = std::filesystem;
  int links = 0;
  for (const char* node : {"roce8", "ib8", "sriov", "sf"}) {
    for (const auto& e :
         fs::recursive_directory_iterator(std::string(KUBERDMA_FIXTURES) + "/sysfs/" + node)) {
      if (!e.is_symlink()) continue;
      ++links;
      INFO(e.path().string() << " -> " << fs::read_symlink(e.path()).string());
      CHECK(fs::exists(e.path()));
    }
  }
  CHECK(links > 100);
}

}  // namespace
}  // namespace kuberdma::sysfs

namespace kuberdma::sysfs {
namespace {

TEST_CASE("Netdevs are listed by PCI address and by auxiliary device name") {
  CHECK(*NetdevsAtAddress(Fixture("roce8"), "0000:3d:00.0") ==
        std::vector<std::string>{"ens4f0np0"});
  CHECK(*NetdevsAtAddress(Fixture("sf"), "mlx5_core.sf.2") ==
        std::vector<std::string>{"enp27s0f0s88"});
  CHECK(NetdevsAtAddress(Fixture("roce8"), "0000:ee:00.0").error().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kuberdma::sysfs

namespace kuberdma::sysfs {
namespace {

TEST_CASE("GPUs are found on the PCI bus and their distance to HCAs uses nvidia-smi topo's terms") {
  SysfsRoot root = Fixture("roce8");
  auto gpus = DiscoverGpus(root);
  REQUIRE(gpus);
  REQUIRE(gpus->size() == 8);
  CHECK((*gpus)[0].address == "0000:18:00.0");
  CHECK((*gpus)[7].numa_node == 1);
  auto hcas = *DiscoverHcas(root, HcaDetail::kIdentity);
  const Gpu& g0 = (*gpus)[0];
  auto dist = [&](const Hca& h) {
    return PciDistanceName(Distance(g0.device_path, g0.numa_node, h.device_path, h.numa_node));
  };
  CHECK(dist(hcas[0]) == "PIX");   // same switch
  CHECK(dist(hcas[2]) == "NODE");  // other root, NUMA 0
  CHECK(dist(hcas[7]) == "SYS");   // other socket
  CHECK(Distance("devices/pci0000:15/0000:15:01.0/0000:16:00.0", 0,
                 "devices/pci0000:15/0000:15:01.0/0000:17:00.0", 0) == PciDistance::kPxb);
  CHECK(Distance("devices/pci0000:15/0000:15:01.0/0000:16:00.0", 0,
                 "devices/pci0000:15/0000:15:02.0/0000:17:00.0", 0) == PciDistance::kPhb);
  CHECK(PciDistance::kPix < PciDistance::kSys);
}

}  // namespace
}  // namespace kuberdma::sysfs

namespace kuberdma::sysfs {
namespace {

TEST_CASE("GID tables are read with their types and netdevs, IPv4-mapped entries decoded") {
  auto pod = ReadGidTable(Fixture("roce8-pod"), "mlx5_0", 1);
  REQUIRE(pod);
  REQUIRE(pod->size() == 4);
  const Gid& v2 = (*pod)[3];
  CHECK(v2.index == 3);
  CHECK(v2.IsRoceV2());
  CHECK_FALSE(v2.IsLinkLocal());
  CHECK(v2.Ipv4() == "10.10.1.2");
  CHECK(v2.Address() == "::ffff:10.10.1.2");
  CHECK(v2.netdev == "net1");
  CHECK((*pod)[0].IsLinkLocal());
  CHECK((*pod)[0].IsRoceV1());
  CHECK((*pod)[0].Ipv4().empty());
  auto sparse = ReadGidTable(Fixture("roce8-pod"), "mlx5_7", 1);
  REQUIRE(sparse);
  std::vector<uint32_t> indices;
  for (const auto& g : *sparse) indices.push_back(g.index);
  CHECK(indices == std::vector<uint32_t>{0, 1, 4, 5});
  // The host's view before IPAM: link-local entries only.
  auto host = ReadHca(Fixture("roce8"), "mlx5_0", HcaDetail::kTables);
  REQUIRE(host);
  REQUIRE(host->ports[0].gids.size() == 2);
  CHECK(host->ports[0].gids[1].IsLinkLocal());
  CHECK(host->ports[0].gids[1].netdev == "ens1f0np0");
  // InfiniBand names no type or netdev.
  auto ib = ReadHca(Fixture("ib8"), "mlx5_0", HcaDetail::kTables);
  CHECK(ib->ports[0].gids[0].type.empty());
  CHECK(ReadHca(Fixture("roce8"), "mlx5_0", HcaDetail::kPkeys)->ports[0].gids.empty());
  CHECK(host->fw_version == "28.39.1002");
}

}  // namespace
}  // namespace kuberdma::sysfs
