// SPDX-License-Identifier: Apache-2.0
// rdma-doctor's views over the sysfs fixtures: topology, pod checks (the common mistakes), node
// records and stranded devices, and both kubelet checkpoint formats.
#include "kuberdma/doctor/doctor.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "doctor_inputs.h"
#include "kuberdma/base/files.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"

namespace kuberdma::doctor {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  Fixture() {
    char tmpl[] = "/tmp/kuberdma-doctor-XXXXXX";
    dir = mkdtemp(tmpl);
    fs::create_directories(dir + "/plugins");
    in.root = sysfs::SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8");
    in.links = &links;
    in.state_dir = dir + "/state";
    in.plugin_dir = dir + "/plugins";
    in.getenv = Env({});
  }
  ~Fixture() { fs::remove_all(dir); }
  const Finding* Find(const View& v, const std::string& check_prefix, Status s) {
    for (const auto& f : v.findings) {
      if (f.check.rfind(check_prefix, 0) == 0 && f.status == s) return &f;
    }
    return nullptr;
  }
  std::string dir;
  link::NetlinkLinkOps links;
  Inputs in;
};

TEST_CASE(
    "The topology matrix uses nvidia-smi's terms and flags GPUs whose nearest HCA is not in the "
    "pod") {
  Fixture f;
  f.in.getenv =
      Env({{"KUBERDMA_HCAS",
            R"([{"name":"mlx5_4"},{"name":"mlx5_5"},{"name":"mlx5_6"},{"name":"mlx5_7"}])"}});
  View v = TopoView(f.in);
  REQUIRE(v.doc["matrix"].size() == 8);
  CHECK(v.doc["matrix"][0]["distances"][0] == "PIX");
  CHECK(v.doc["matrix"][0]["distances"][7] == "SYS");
  CHECK(v.doc["matrix"][0]["nearest"] == nlohmann::json({"mlx5_0", "mlx5_1"}));
  int flagged = 0;
  for (const auto& x : v.findings)
    flagged += x.status == Status::kWarn && x.check == "gpu-nic-pairing" ? 1 : 0;
  CHECK(flagged == 4);  // the four NUMA-0 GPUs
  f.in.getenv = Env({{"NCCL_IB_HCA", "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"}});
  CHECK(f.Find(TopoView(f.in), "gpu-nic-pairing", Status::kOk) != nullptr);
}

TEST_CASE("Pod checks name the common mistakes with their fixes") {
  Fixture f;
  f.in.getenv = Env({{"NCCL_IB_DISABLE", "1"},
                     {"NCCL_IB_HCA", "mlx5_0,mlx5_9"},
                     {"NCCL_SOCKET_IFNAME", "eth-none7"},
                     {"NCCL_MAX_NCHANNELS", "1"},
                     {"KUBERDMA_HCAS", R"([{"name":"mlx5_0"},{"name":"mlx5_3"}])"}});
  View v = PodView(f.in);
  CHECK(v.ExitCode() == 1);
  CHECK(f.Find(v, "devices-injected", Status::kOk) != nullptr);  // the fixture has uverbs0..7
  const Finding* ib = f.Find(v, "nccl-uses-rdma", Status::kFail);
  REQUIRE(ib != nullptr);
  CHECK_THAT(ib->message, Catch::Contains("NCCL_IB_DISABLE=1"));
  CHECK_THAT(ib->fix, Catch::Contains("NCCL_IB_DISABLE=0"));
  const Finding* absent = f.Find(v, "nccl-ib-hca-present", Status::kFail);
  REQUIRE(absent != nullptr);
  CHECK_THAT(absent->message, Catch::Contains("mlx5_9"));
  const Finding* left = f.Find(v, "nccl-ib-hca-every-hca", Status::kFail);
  REQUIRE(left != nullptr);
  CHECK_THAT(left->message, Catch::Contains("mlx5_3"));
  CHECK(f.Find(v, "nccl-channels-per-nic", Status::kWarn) != nullptr);
  CHECK(f.Find(v, "one-nic-per-gpu", Status::kWarn) != nullptr);
  CHECK(f.Find(v, "nccl-socket-ifname", Status::kFail) != nullptr);
  CHECK(f.Find(v, "nccl-version", Status::kWarn) != nullptr);
  auto doc = v.ToJson();
  CHECK(doc["view"] == "pod");
  CHECK(doc["findings"].size() == v.findings.size());
}

TEST_CASE("A pod configured as the device plugin intends passes the NCCL checks") {
  Fixture f;
  f.in.getenv = Env(
      {{"KUBERDMA_NCCL_LIBRARY", KUBERDMA_NCCL_STANDIN},
       {"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"},
       {"NCCL_SOCKET_IFNAME", "lo"},
       {"NCCL_IB_DISABLE", "0"}});
  View v = PodView(f.in);
  for (const auto& x : v.findings) {
    INFO(x.check << ": " << x.message);
    CHECK(x.status != Status::kFail);
  }
  CHECK(f.Find(v, "nccl-version", Status::kOk) != nullptr);
}

TEST_CASE(
    "The node view lists HCAs, records, allocations, and names stranded devices and a missing "
    "plugin") {
  Fixture f;
  cni::AttachmentRecord rec{.network = "rdma-net",
                            .container_id = "c0ffee",
                            .ifname = "net1",
                            .netns = "/run/netns/kuberdma-gone-xyz",
                            .done = true,
                            .hca = "mlx5_2",
                            .hca_address = "0000:3c:00.0"};
  REQUIRE(cni::StateStore(f.in.state_dir).Save(rec));
  REQUIRE(WriteFileAtomic(f.dir + "/plugins/kubelet_internal_checkpoint",
                          R"({"Data":{"PodDeviceEntries":[
      {"PodUID":"u1","ContainerName":"trainer","ResourceName":"rdma/shared","DeviceIDs":{"0":["shared-001"],"1":["shared-002"]}},
      {"PodUID":"u2","ContainerName":"old","ResourceName":"rdma/hca","DeviceIDs":["mlx5_3-0"]},
      {"PodUID":"u3","ContainerName":"gpu","ResourceName":"nvidia.com/gpu","DeviceIDs":["GPU-1"]}]},"Checksum":1})"));
  View v = NodeView(f.in);
  REQUIRE(v.doc["hcas"].size() == 8);
  CHECK(v.doc["hcas"][2]["where"].get<std::string>().rfind("pod c0ffee/net1", 0) == 0);
  CHECK(v.doc["allocations"].size() == 2);
  CHECK(v.doc["allocations"][0]["deviceIDs"] == nlohmann::json({"shared-001", "shared-002"}));
  const Finding* stranded = f.Find(v, "stranded-devices", Status::kFail);
  REQUIRE(stranded != nullptr);
  CHECK_THAT(stranded->message, Catch::Contains("mlx5_2") && Catch::Contains("no longer exists"));
  CHECK(f.Find(v, "device-plugin-serving", Status::kFail) != nullptr);
  REQUIRE(WriteFileAtomic(f.dir + "/plugins/kuberdma-rdma-shared.sock", ""));
  CHECK(f.Find(NodeView(f.in), "device-plugin-serving", Status::kOk) != nullptr);
}

TEST_CASE("The node view shows an HCA shared by child attachments as on the host, with them") {
  Fixture f;
  for (const char* cid : {"ca", "cb"}) {
    cni::AttachmentRecord rec{.network = "rail3",
                              .container_id = cid,
                              .ifname = "net1",
                              .netns = "/run/netns/kuberdma-gone-child",
                              .done = true,
                              .hca = "mlx5_2",
                              .hca_address = "0000:3c:00.0",
                              .mode = cni::AttachMode::kMacvlan};
    REQUIRE(cni::StateStore(f.in.state_dir).Save(rec));
  }
  View v = NodeView(f.in);
  std::string where = v.doc["hcas"][2]["where"];
  CHECK_THAT(where, !Catch::StartsWith("pod ") &&
                        Catch::Contains("shared by 2 child attachment(s): ca/net1, cb/net1"));
  CHECK(v.doc["cniRecords"][0]["mode"] == "macvlan");
  const Finding* stranded = f.Find(v, "stranded-devices", Status::kFail);
  REQUIRE(stranded != nullptr);
  CHECK_THAT(stranded->fix, Catch::Contains("deleted the pod's macvlan child"));
}

TEST_CASE(
    "Under --host-root, records' namespaces are looked up in the host's tree, one that cannot be "
    "checked is a warning, never a stranded device") {
  Fixture f;
  f.in.host_root = f.dir + "/host/";
  CHECK(HostPath(f.in, "/var/run/netns/cni-1") == f.dir + "/host/var/run/netns/cni-1");
  CHECK(HostPath(f.in, "/proc/42/ns/net") == "/proc/42/ns/net");  // needs hostPID, not a prefix
  // A live pod: its namespace file exists under the host root (a link to a real namespace).
  fs::create_directories(f.dir + "/host/var/run/netns");
  fs::create_symlink("/proc/self/ns/net", f.dir + "/host/var/run/netns/cni-live");
  // A path this process cannot resolve (a file where a directory should be): not proof of death.
  REQUIRE(WriteFileAtomic(f.dir + "/host/var/run/blocked", ""));
  cni::StateStore store(f.in.state_dir);
  for (auto [id, ns, hca, addr] :
       {std::tuple{"live", "/var/run/netns/cni-live", "mlx5_0", "0000:3a:00.0"},
        std::tuple{"unclear", "/var/run/blocked/cni-x", "mlx5_1", "0000:3b:00.0"}}) {
    REQUIRE(store.Save(cni::AttachmentRecord{.network = "rdma-net",
                                             .container_id = id,
                                             .ifname = "net1",
                                             .netns = ns,
                                             .done = true,
                                             .hca = hca,
                                             .hca_address = addr}));
  }
  View v = NodeView(f.in);
  CHECK(f.Find(v, "stranded-devices", Status::kFail) == nullptr);
  const Finding* unclear = f.Find(v, "stranded-devices", Status::kWarn);
  REQUIRE(unclear != nullptr);
  CHECK_THAT(unclear->message, Catch::Contains("cannot tell") && Catch::Contains("unclear/net1"));
  CHECK_THAT(unclear->fix, Catch::Contains("--host-root"));
  // Without the prefix the live pod's namespace is not where the record says: a stranded device.
  f.in.host_root.clear();
  CHECK(f.Find(NodeView(f.in), "stranded-devices", Status::kFail) != nullptr);
}

std::vector<uint8_t> Hex(const std::string& name) {
  auto text = ReadFile(std::string(KUBERDMA_FIXTURES) + "/netlink/" + name);
  std::vector<uint8_t> out;
  for (size_t i = 0; text && i + 1 < text->size() && (*text)[i] != '\n'; i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(text->substr(i, 2), nullptr, 16)));
  }
  return out;
}

// DCB answers from the fixtures: every port lossless but `lossy`; `unsupported` has no DCB.
class FakeDcb final : public dcb::DcbOps {
 public:
  std::string lossy = "ens4f0np0";
  std::string unsupported;
  Result<dcb::DcbState> Get(const netns::NetNs&, const std::string& ifname) override {
    if (ifname == unsupported) return Fail(ErrorCode::kUnsupported, ifname + " has no DCB");
    return dcb::DecodeIeeeGet(
        Hex(ifname == lossy ? "dcb-ieee-lossy.hex" : "dcb-ieee-lossless.hex"));
  }
};

TEST_CASE(
    "The pod's GID tables are listed, NCCL_IB_GID_INDEX is checked on every HCA and a "
    "sparse table is named") {
  Fixture f;
  f.in.root = sysfs::SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8-pod");
  f.in.getenv = Env({{"KUBERDMA_NCCL_LIBRARY", KUBERDMA_NCCL_STANDIN},
                     {"NCCL_IB_GID_INDEX", "3"},
                     {"NCCL_IB_TIMEOUT", "22"},
                     {"NCCL_IB_RETRY_CNT", "7"}});
  View v = PodView(f.in);
  REQUIRE(v.doc["gids"].size() == 32);
  CHECK(v.doc["gids"][3] == nlohmann::json{{"device", "mlx5_0"},
                                           {"port", 1},
                                           {"index", 3},
                                           {"gid", "0000:0000:0000:0000:0000:ffff:0a0a:0102"},
                                           {"ipv4", "10.10.1.2"},
                                           {"version", "v2"},
                                           {"netdev", "net1"}});
  const Finding* index = f.Find(v, "nccl-ib-gid-index", Status::kFail);
  REQUIRE(index != nullptr);
  CHECK_THAT(index->message,
             Catch::Contains("mlx5_7") && Catch::Contains("index 5") && !Catch::Contains("mlx5_0"));
  CHECK_THAT(index->fix,
             Catch::Contains("NCCL_IB_ADDR_FAMILY") && Catch::Contains("NCCL_IB_ROCE_VERSION_NUM"));
  const Finding* sparse = f.Find(v, "roce-gid-table-sparse", Status::kWarn);
  REQUIRE(sparse != nullptr);
  CHECK_THAT(sparse->message, Catch::Contains("mlx5_7") && Catch::Contains("2.28.3"));
  CHECK(f.Find(v, "roce-routable-gid", Status::kOk) != nullptr);
  CHECK(f.Find(v, "roce-routable-gid", Status::kWarn) == nullptr);
  CHECK(f.Find(v, "nccl-ib-timeout", Status::kOk) != nullptr);
  CHECK_THAT(sparse->fix, Catch::Contains("unset NCCL_IB_GID_INDEX"));
  // Without NCCL_IB_GID_INDEX the advice does not tell the user to unset it.
  f.in.getenv = Env({});
  View without = PodView(f.in);  // kept: the finding points into it
  const Finding* unset = f.Find(without, "roce-gid-table-sparse", Status::kWarn);
  REQUIRE(unset != nullptr);
  CHECK_THAT(unset->fix, !Catch::Contains("unset") && Catch::Contains("NCCL_IB_ADDR_FAMILY"));
  f.in.getenv = Env({{"NCCL_IB_GID_INDEX", "1"}});
  CHECK_THAT(f.Find(PodView(f.in), "nccl-ib-gid-index", Status::kFail)->message,
             Catch::Contains("link-local"));
}

TEST_CASE(
    "On a shared HCA the pod view marks the pod's own GID entries by address, and "
    "NCCL_IB_GID_INDEX naming another pod's fails with the pod's own index") {
  Fixture f;
  // mlx5_0's table with a second pod's child (also net1): 10.10.1.2 at 3, this pod's 10.10.1.9
  // at 6.
  std::string root = f.dir + "/root";
  fs::copy(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8-pod", root,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  std::string port = sysfs::SysfsRoot(root).Sys("class/infiniband/mlx5_0/ports/1/");
  REQUIRE(WriteFileAtomic(port + "gids/6", "0000:0000:0000:0000:0000:ffff:0a0a:0109\n"));
  REQUIRE(WriteFileAtomic(port + "gid_attrs/types/6", "RoCE v2\n"));
  REQUIRE(WriteFileAtomic(port + "gid_attrs/ndevs/6", "net1\n"));
  f.in.root = sysfs::SysfsRoot(root);
  OwnAddrs addrs("10.10.1.9");
  f.in.addrs = &addrs;
  f.in.getenv = Env({{"NCCL_IB_GID_INDEX", "3"}});
  View v = PodView(f.in);
  std::map<int, std::string> owner;
  for (const auto& row : v.doc["gids"])
    if (row["device"] == "mlx5_0" && row.contains("owner")) owner[row["index"]] = row["owner"];
  CHECK(owner ==
        std::map<int, std::string>{{2, "another pod"}, {3, "another pod"}, {6, "this pod"}});
  const Finding* index = f.Find(v, "nccl-ib-gid-index", Status::kFail);
  REQUIRE(index != nullptr);
  CHECK_THAT(index->message, Catch::Contains("mlx5_0: its entry 3 is another pod's (10.10.1.2") &&
                                 Catch::Contains("10.10.1.9 is at index 6"));
  const Finding* ok = f.Find(v, "roce-routable-gid", Status::kOk);
  REQUIRE(ok != nullptr);
  CHECK_THAT(ok->message, Catch::Contains("mlx5_0 6:10.10.1.9"));
  // With no variable set, NCCL's automatic choice would take the other pod's entry at 3.
  CHECK(f.Find(v, "roce-gid-table-shared", Status::kFail) == nullptr);  // the index decides
  f.in.getenv = Env({});
  View unset = PodView(f.in);
  const Finding* shared = f.Find(unset, "roce-gid-table-shared", Status::kFail);
  REQUIRE(shared != nullptr);
  // Only mlx5_0 holds an entry of this pod's: the other HCAs are not its.
  CHECK_THAT(shared->message, Catch::EndsWith("mlx5_0: index 3 (10.10.1.2) before this pod's 6"));
  CHECK_THAT(shared->fix, Catch::Contains("rdma-validate --nccl-env"));
  f.in.getenv = Env({{"NCCL_IB_ADDR_RANGE", "10.10.1.9/32"}});
  View ranged = PodView(f.in);
  CHECK(f.Find(ranged, "roce-gid-table-shared", Status::kFail) == nullptr);
}

TEST_CASE(
    "A RoCE pod without addresses is told it has link-local GIDs only, and NCCL's retries "
    "are checked against the recommended values") {
  Fixture f;  // roce8: the host's view, no IP on any netdev
  f.in.getenv = Env({{"NCCL_IB_TIMEOUT", "14"}});
  View v = PodView(f.in);
  const Finding* none = f.Find(v, "roce-routable-gid", Status::kWarn);
  REQUIRE(none != nullptr);
  CHECK_THAT(none->message, Catch::Contains("link-local only"));
  CHECK_THAT(none->fix, Catch::Contains("ipam"));
  const Finding* timeout = f.Find(v, "nccl-ib-timeout", Status::kWarn);
  REQUIRE(timeout != nullptr);
  CHECK_THAT(timeout->message, Catch::Contains("is 14"));
  CHECK_THAT(timeout->fix,
             Catch::Contains("NCCL_IB_TIMEOUT=22") && Catch::Contains("NCCL_IB_RETRY_CNT=7"));
  CHECK(f.Find(v, "nccl-ib-retry-cnt", Status::kOk) != nullptr);
}

TEST_CASE(
    "The node view checks PFC, trust and ECN on every RoCE port, and says unknown where "
    "the driver cannot tell") {
  Fixture f;
  FakeDcb dcb;
  f.in.dcb = &dcb;
  View v = NodeView(f.in);
  REQUIRE(v.doc["lossless"].size() == 8);
  CHECK(v.doc["lossless"][0]["pfcPriorities"] == nlohmann::json({3}));
  CHECK(v.doc["lossless"][0]["trust"] == "dscp");
  const Finding* pfc = f.Find(v, "lossless-pfc", Status::kFail);
  REQUIRE(pfc != nullptr);
  CHECK_THAT(pfc->message, Catch::Contains("ens4f0np0") && Catch::Contains("priority 3"));
  CHECK_THAT(pfc->fix, Catch::Contains("--pfc 0,0,0,1,0,0,0,0"));
  CHECK_THAT(f.Find(v, "lossless-trust", Status::kWarn)->message, Catch::Contains("ens4f0np0"));
  const Finding* ecn = f.Find(v, "lossless-ecn", Status::kFail);
  REQUIRE(ecn != nullptr);
  CHECK_THAT(ecn->message, Catch::Contains("ens4f0np0") && Catch::Contains("roce_np 0"));
  CHECK_THAT(f.Find(v, "lossless-pfc", Status::kOk)->message, Catch::Contains("ens1f0np0"));
  // A port whose driver has no DCB (a veth) is unknown, not failed.
  dcb.lossy.clear();
  dcb.unsupported = "ens1f0np0";
  View u = NodeView(f.in);
  CHECK(f.Find(u, "lossless-pfc", Status::kFail) == nullptr);
  CHECK_THAT(f.Find(u, "lossless-pfc", Status::kUnknown)->message,
             Catch::Contains("ens1f0np0") && Catch::Contains("no DCB support"));
  CHECK_THAT(Render(u), Catch::Contains("[unknown] lossless-pfc"));
}

TEST_CASE("PFC and trust of a netdev attached to a pod are read in the pod's namespace") {
  Fixture f;
  FakeDcb dcb;
  f.in.dcb = &dcb;
  // The record the CNI keeps while mlx5_3 (ens4f0np0) is a pod's net2; any live namespace stands
  // in for the pod's.
  cni::AttachmentRecord rec{.network = "rdma-net",
                            .container_id = "c0ffee",
                            .ifname = "net2",
                            .netns = "/proc/self/ns/net",
                            .done = true,
                            .hca = "mlx5_3",
                            .hca_address = "0000:3d:00.0"};
  REQUIRE(cni::StateStore(f.in.state_dir).Save(rec));
  View v = NodeView(f.in);
  nlohmann::json port;
  for (const auto& p : v.doc["lossless"]) {
    if (p["hca"] == "mlx5_3") port = p;
  }
  CHECK(port["netdev"] == "net2");  // what the pod calls it, asked where the pod has it
  CHECK(port["netns"] == "/proc/self/ns/net");
  CHECK(port["pfcPriorities"] == nlohmann::json({3}));  // read, not "unknown"
  CHECK(port["ecn"] == "unknown");
  CHECK_THAT(f.Find(v, "lossless-ecn", Status::kUnknown)->message,
             Catch::Contains("net2 is in pod namespace"));
}

TEST_CASE("Both kubelet checkpoint formats are read, a corrupt one is an error") {
  Fixture f;
  REQUIRE(WriteFileAtomic(
      f.dir + "/cp",
      R"({"Data":{"PodDeviceEntries":[{"PodUID":"a","ContainerName":"c","ResourceName":"rdma/x","DeviceIDs":["1","2"]}]}})"));
  auto a = ReadCheckpoint(f.dir + "/cp");
  REQUIRE(a);
  CHECK(a->at(0).device_ids == std::vector<std::string>{"1", "2"});
  REQUIRE(WriteFileAtomic(f.dir + "/bad", "{"));
  CHECK_FALSE(ReadCheckpoint(f.dir + "/bad"));
}

TEST_CASE("The pod view's GPU count is the topology view's: the pod's GPUs when named") {
  Fixture f;
  f.in.getenv = Env({{"KUBERDMA_HCAS", R"([{"name":"mlx5_0"},{"name":"mlx5_1"}])"}});
  CHECK(f.Find(PodView(f.in), "one-nic-per-gpu", Status::kWarn) != nullptr);  // 8 GPUs
  f.in.gpus = {"0000:18:00.0", "0000:19:00.0"};
  CHECK(f.Find(PodView(f.in), "one-nic-per-gpu", Status::kWarn) == nullptr);
  CHECK(TopoView(f.in).doc["matrix"].size() == 2);
}

TEST_CASE("A DRA claim's GPU+NIC pairs: kept on their PCIe root, split ones failed by name") {
  Fixture f;
  // mlx5_0 and mlx5_1 share pci0000:15 with GPUs 0000:18:00.0 and 0000:19:00.0 (roce8).
  f.in.getenv = Env({{"KUBERDMA_HCAS", R"([{"name":"mlx5_0"},{"name":"mlx5_1"}])"},
                     {"KUBERDMA_CLAIM", "team-a/pairs"},
                     {"KUBERDMA_CLAIM_PCIE_ROOTS", "mlx5_0=pci0000:15,mlx5_1=pci0000:15"}});
  f.in.gpus = {"0000:18:00.0", "0000:19:00.0"};
  View aligned = PodView(f.in);
  const Finding* ok = f.Find(aligned, "claim-alignment", Status::kOk);
  REQUIRE(ok != nullptr);
  CHECK_THAT(ok->message,
             Catch::Contains("team-a/pairs: mlx5_0+0000:18:00.0/0000:19:00.0 on pci0000:15"));
  // The pod's GPUs are another switch's: the pairs would cross the CPU.
  f.in.gpus = {"0000:9d:00.0", "0000:9e:00.0"};
  View split = PodView(f.in);
  const Finding* bad = f.Find(split, "claim-alignment", Status::kFail);
  REQUIRE(bad != nullptr);
  CHECK_THAT(bad->message, Catch::Contains("mlx5_0 was paired with a GPU on pci0000:15, but none "
                                           "of the pod's GPUs (0000:9d:00.0 on pci0000:9a"));
  // An HCA that is not where the claim put it.
  f.in.gpus = {"0000:18:00.0"};
  f.in.getenv =
      Env({{"KUBERDMA_CLAIM", "team-a/pairs"}, {"KUBERDMA_CLAIM_PCIE_ROOTS", "mlx5_7=pci0000:15"}});
  View moved = PodView(f.in);
  bad = f.Find(moved, "claim-alignment", Status::kFail);
  REQUIRE(bad != nullptr);
  CHECK_THAT(bad->message, Catch::Contains("mlx5_7 is on pci0000:ba, not the pci0000:15"));
  // No claim: no finding.
  f.in.getenv = Env({});
  View none = PodView(f.in);
  CHECK(f.Find(none, "claim-alignment", Status::kOk) == nullptr);
  CHECK(f.Find(none, "claim-alignment", Status::kFail) == nullptr);
}

TEST_CASE("The node view lists the DRA driver's prepared claims: which pods got which HCAs") {
  Fixture f;
  f.in.allocations_dir = f.dir + "/allocations";
  REQUIRE(contract::RecordClaim(f.in.allocations_dir, {.claim = "team-a/trainer-0-pairs",
                                                       .uid = "u1",
                                                       .pods = {"team-a/trainer-0"},
                                                       .hcas = {"mlx5_0", "mlx5_1"}}));
  REQUIRE(WriteFileAtomic(f.in.allocations_dir + "/claims/u2.json", "{cut"));
  View v = NodeView(f.in);
  REQUIRE(v.doc.contains("draClaims"));
  REQUIRE(v.doc["draClaims"].size() == 1);
  CHECK(v.doc["draClaims"][0]["claim"] == "team-a/trainer-0-pairs");
  CHECK(v.doc["draClaims"][0]["hcas"] == nlohmann::json({"mlx5_0", "mlx5_1"}));
  const Finding* bad = f.Find(v, "dra-claims", Status::kWarn);
  REQUIRE(bad != nullptr);
  CHECK_THAT(bad->message, Catch::Contains("claims/u2.json"));
  CHECK_THAT(Render(v), Catch::Contains("team-a/trainer-0"));
}

TEST_CASE("The node view shows the DRA driver's tainted devices, and a bad record as such") {
  Fixture f;
  f.in.allocations_dir = f.dir + "/allocations";
  View none = NodeView(f.in);  // DRA off: no record, nothing said
  CHECK_FALSE(none.doc.contains("draTaints"));
  CHECK(f.Find(none, "dra-taints", Status::kWarn) == nullptr);
  REQUIRE(contract::RecordTaints(f.in.allocations_dir, {{.device = "mlx5-3",
                                                         .hca = "mlx5_3",
                                                         .key = "rdma.kube-rdma.io/link-down",
                                                         .value = "port-1-DOWN",
                                                         .effect = "NoSchedule"},
                                                        {.device = "mlx5-2",
                                                         .hca = "mlx5_2",
                                                         .key = "rdma.kube-rdma.io/degraded",
                                                         .value = "rate-200-of-400gbps",
                                                         .effect = "None"}}));
  View v = NodeView(f.in);
  REQUIRE(v.doc["draTaints"].size() == 2);
  const Finding* down = f.Find(v, "dra-taints", Status::kWarn);
  REQUIRE(down != nullptr);
  CHECK_THAT(down->message, Catch::Contains("mlx5_3 is tainted rdma.kube-rdma.io/link-down="
                                            "port-1-DOWN:NoSchedule: no new claim gets it"));
  CHECK(f.Find(v, "dra-taints", Status::kOk) != nullptr);  // degraded: shown, not acted on
  REQUIRE(WriteFileAtomic(f.in.allocations_dir + "/dra-taints.json", R"({"taints": "x"})"));
  View bad = NodeView(f.in);
  const Finding* unreadable = f.Find(bad, "dra-taints", Status::kWarn);
  REQUIRE(unreadable != nullptr);
  CHECK_THAT(unreadable->message, Catch::Contains("'taints' must be an array"));
}

TEST_CASE("The node view names each SR-IOV VF's PF") {
  Fixture f;
  f.in.root = sysfs::SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/sriov");
  View v = NodeView(f.in);
  REQUIRE(v.doc["hcas"].size() == 10);
  CHECK_FALSE(v.doc["hcas"][0].contains("pf"));
  CHECK(v.doc["hcas"][1]["pf"] == "0000:1b:00.0");
  CHECK(v.doc["hcas"][9]["pf"] == "0000:3c:00.0");
}

TEST_CASE(
    "The node view shows the node config's VF counts and the firmware fix where they cannot") {
  Fixture f;
  link::NetlinkAddrOps addrs;
  f.in.addrs = &addrs;
  f.in.root = sysfs::SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/sriov-ib");
  f.in.node_config = f.dir + "/node.json";
  REQUIRE(WriteFileAtomic(f.in.node_config, R"({"sriov":[{"rail":1,"numVfs":4},
      {"pf":"ibp60s0","numVfs":32},{"pf":"0000:5d:00.0","numVfs":8}]})"));
  View v = NodeView(f.in);
  REQUIRE(v.doc["sriov"].size() == 3);
  CHECK(v.doc["sriov"][0]["pf"] == "0000:1b:00.0");
  CHECK(v.doc["sriov"][0]["numVfs"] == 4);
  const Finding* ok = f.Find(v, "sriov-vfs", Status::kOk);
  REQUIRE(ok);
  CHECK_THAT(ok->message, Catch::Contains("rail 1 (mlx5_0): 4 VFs"));
  int firmware = 0;
  for (const auto& fd : v.findings) {
    if (fd.check != "sriov-vfs" || fd.status != Status::kFail) continue;
    ++firmware;
    CHECK_THAT(fd.fix, Catch::Contains("mlxconfig -d 0000:") && Catch::Contains("SRIOV_EN=1") &&
                           Catch::Contains("never does for you"));
  }
  CHECK(firmware == 2);  // 32 over the 16 the firmware offers; SR-IOV off on the third PF
  const Finding* off = nullptr;
  for (const auto& fd : v.findings) {
    if (fd.message.find("SR-IOV is off") != std::string::npos) off = &fd;
  }
  REQUIRE(off);
  CHECK_THAT(off->fix, Catch::Contains("NUM_OF_VFS=8"));
}

TEST_CASE("One corrupt CNI record is a named finding and the good records beside it are shown") {
  Fixture f;
  cni::AttachmentRecord rec{.network = "rdma-net",
                            .container_id = "good1",
                            .ifname = "net1",
                            .done = true,
                            .hca = "mlx5_2",
                            .hca_address = "0000:3c:00.0"};
  REQUIRE(cni::StateStore(f.in.state_dir).Save(rec));
  REQUIRE(WriteFileAtomic(f.in.state_dir + "/rdma-net/bad1:net2.json", "{\"version\":1,"));
  REQUIRE(WriteFileAtomic(f.in.state_dir + "/rdma-net/bad2:net3.json",
                          std::string(100000, '[') + std::string(100000, ']')));
  View v = NodeView(f.in);
  REQUIRE(v.doc["cniRecords"].size() == 1);
  CHECK(v.doc["cniRecords"][0]["containerID"] == "good1");
  int named = 0;
  for (const auto& x : v.findings) {
    if (x.check == "cni-records" && x.status == Status::kFail) {
      CHECK((x.message.find("bad1:net2.json") != std::string::npos ||
             x.message.find("bad2:net3.json") != std::string::npos));
      ++named;
    }
  }
  CHECK(named == 2);
  // The text view shows the records as a table, not a raw JSON line.
  std::string text = Render(v);
  CHECK_THAT(text,
             Catch::Contains("  cniRecords:\n    containerID ") && Catch::Contains(" good1 "));
  CHECK_THAT(text, !Catch::Contains("[{\"") && !Catch::Contains("{\""));
}

TEST_CASE("A kubelet checkpoint with wrong types is a finding, its good entries still show") {
  Fixture f;
  for (const char* text : {R"({"Data":5})", R"({"Data":{"PodDeviceEntries":7}})",
                           R"({"Data":{"PodDeviceEntries":[5,{"ResourceName":3}]}})"}) {
    REQUIRE(WriteFileAtomic(f.dir + "/plugins/kubelet_internal_checkpoint", text));
    INFO(text);
    View v = NodeView(f.in);
    CHECK(v.doc["allocations"].empty());
    CHECK(v.doc.contains("hcas"));
  }
  REQUIRE(WriteFileAtomic(f.dir + "/plugins/kubelet_internal_checkpoint",
                          R"({"Data":{"PodDeviceEntries":[
      {"PodUID":"u1","ContainerName":"c","ResourceName":"rdma/shared","DeviceIDs":[5]},
      {"PodUID":"u2","ContainerName":"c","ResourceName":"rdma/shared","DeviceIDs":{"0":[true]}},
      {"PodUID":"u3","ContainerName":"c","ResourceName":"rdma/shared","DeviceIDs":["shared-003"]}]}})"));
  View v = NodeView(f.in);
  REQUIRE(v.doc["allocations"].size() == 1);
  CHECK(v.doc["allocations"][0]["podUID"] == "u3");
  const Finding* skipped = f.Find(v, "kubelet-checkpoint", Status::kWarn);
  REQUIRE(skipped != nullptr);
  CHECK_THAT(skipped->message, Catch::Contains("u1") || Catch::Contains("u2"));
  std::vector<std::string> problems;
  auto a = ReadCheckpoint(f.dir + "/plugins/kubelet_internal_checkpoint", &problems);
  REQUIRE(a);
  CHECK(problems.size() == 2);
}

TEST_CASE("A garbage KUBERDMA_HCAS in the pod view is a finding, not an empty list") {
  Fixture f;
  f.in.getenv = Env({{"KUBERDMA_HCAS", "[{\"name\":5}"}});
  View v = PodView(f.in);
  const Finding* bad = f.Find(v, "pod-environment", Status::kFail);
  REQUIRE(bad != nullptr);
  CHECK_THAT(bad->message, Catch::Contains("KUBERDMA_HCAS"));
  CHECK_THAT(Render(v), Catch::Contains("malformed") && !Catch::Contains("KUBERDMA_HCAS\":\"[]"));
}

}  // namespace
}  // namespace kuberdma::doctor

namespace kuberdma::doctor {
namespace {

void Put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// The 8-GPU fixture copied, with the NVIDIA modules and the switch ports' PCIe config space
// (an ACS capability at 0x100 whose control register is `acs_control`) written into it.
struct GpuNode : Fixture {
  GpuNode(const std::string& taint, bool peermem, uint16_t acs_control) {
    std::string copy = dir + "/node";
    fs::copy(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8", copy,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    sysfs::SysfsRoot root(copy);
    Put(root.Sys("module/nvidia/taint"), taint + "\n");
    if (!peermem) fs::remove_all(root.Sys("module/nvidia_peermem"));
    std::string config(4096, '\0');
    config[0x100] = 0x0d;  // extended capability 0x000d (ACS), version 1, last in the list
    config[0x102] = 0x01;
    config[0x104] = 0x7f;
    config[0x106] = static_cast<char>(acs_control & 0xff);
    for (const auto& e : fs::recursive_directory_iterator(root.Sys("devices"))) {
      // The Broadcom switch ports (vendor 0x1000) are the bridges between GPUs and HCAs.
      if (e.path().filename() == "vendor" && ReadFile(e.path().string()).value_or("") == "0x1000\n")
        Put(e.path().parent_path().string() + "/config", config);
    }
    in.root = root;
    in.kernel_version = 610;
  }
};

const Finding* Check(const View& v, const std::string& id) {
  for (const auto& f : v.findings) {
    if (f.check == id) return &f;
  }
  return nullptr;
}

TEST_CASE("GPUDirect RDMA: nvidia-peermem, DMA-BUF and ACS between GPUs and their HCAs") {
  SECTION("the proprietary driver without peermem: no way to GPU memory, a failure with fixes") {
    GpuNode n("PO", false, 0);
    View v = NodeView(n.in);
    REQUIRE(Check(v, "gdr-peermem") != nullptr);
    CHECK(Check(v, "gdr-peermem")->status == Status::kWarn);
    CHECK_THAT(Check(v, "gdr-dmabuf")->message, Catch::Contains("proprietary kernel module"));
    REQUIRE(Check(v, "gpudirect-rdma") != nullptr);
    CHECK(Check(v, "gpudirect-rdma")->status == Status::kFail);
    CHECK_THAT(Check(v, "gpudirect-rdma")->fix, Catch::Contains("nvidia-peermem"));
    CHECK(Check(v, "pcie-acs")->status == Status::kOk);
  }
  SECTION("the open module on 6.10 has DMA-BUF; peermem alone is enough too") {
    GpuNode open("O", false, 0);
    View v = NodeView(open.in);
    CHECK(Check(v, "gdr-dmabuf")->status == Status::kOk);
    CHECK(Check(v, "gpudirect-rdma") == nullptr);
    GpuNode peer("PO", true, 0);
    View w = NodeView(peer.in);
    CHECK(Check(w, "gdr-peermem")->status == Status::kOk);
    CHECK_THAT(Check(w, "gdr-peermem")->message, Catch::Contains("nvidia_peermem 550.54.15"));
    CHECK(Check(w, "gpudirect-rdma") == nullptr);
    open.in.kernel_version = 510;
    View old = NodeView(open.in);
    CHECK_THAT(Check(old, "gdr-dmabuf")->message, Catch::Contains("Linux 5.10 is older than 5.12"));
  }
  SECTION("ACS request/completion redirect on the switch ports fails, naming a port and a pair") {
    GpuNode n("O", true, 0x1d);  // source validation, request and completion redirect, upstream
    View v = NodeView(n.in);
    const Finding* acs = Check(v, "pcie-acs");
    REQUIRE(acs != nullptr);
    CHECK(acs->status == Status::kFail);
    CHECK_THAT(acs->message, Catch::Contains("0000:17:00.0"));
    CHECK_THAT(acs->message, Catch::Contains("(between GPU 0000:18:00.0 and mlx5_"));
    CHECK_THAT(acs->fix, Catch::Contains("ECAP_ACS+0x6.w=0000"));
  }
  SECTION("GPUs but no NVIDIA driver loaded: not judged") {
    GpuNode n("O", false, 0);
    fs::remove_all(n.in.root.Sys("module/nvidia"));
    View v = NodeView(n.in);
    REQUIRE(Check(v, "gpudirect-rdma") != nullptr);
    CHECK(Check(v, "gpudirect-rdma")->status == Status::kUnknown);
    CHECK(Check(v, "gdr-dmabuf") == nullptr);
  }
  SECTION("config space not readable (not root): unknown, never a failure") {
    Fixture f;  // the plain fixture has no config files
    f.in.kernel_version = 610;
    View v = NodeView(f.in);
    const Finding* acs = Check(v, "pcie-acs");
    REQUIRE(acs != nullptr);
    CHECK(acs->status == Status::kUnknown);
  }
}

}  // namespace
}  // namespace kuberdma::doctor

namespace kuberdma::doctor {
namespace {

// What is one hop out of each IB rail: leaf-<rail>, but for the two crossed ones.
class CrossedIbFabric final : public smp::HopProbe {
 public:
  Result<lldp::Neighbor> Neighbor(const std::string& hca, int port,
                                  std::chrono::milliseconds) override {
    int rail = std::stoi(hca.substr(hca.find('_') + 1)) + 1;
    if (rail == 2 || rail == 3) rail = 5 - rail;
    if (hca == "mlx5_7") return Fail(ErrorCode::kTimeout, "no SMP answer within 1000 ms");
    std::string leaf = "MF0;ib-leaf-" + std::to_string(rail) + ":MQM9700/U1";
    return lldp::Neighbor{.chassis_id = "0x0c42a1030000000" + std::to_string(rail),
                          .port_id = std::to_string(port + 16),
                          .system_name = leaf};
  }
};

TEST_CASE("InfiniBand rails' switches from an SMP one hop out: a crossed pair fails the node") {
  Fixture f;
  f.in.root = sysfs::SysfsRoot(std::string(KUBERDMA_FIXTURES) + "/sysfs/ib8");
  std::vector<std::string> leaves;
  for (int r = 1; r <= 8; ++r) leaves.push_back("MF0;ib-leaf-" + std::to_string(r) + ":MQM9700/U1");
  f.in.node_config = f.dir + "/node.json";
  std::ofstream(f.in.node_config) << nlohmann::json{{"railSwitches", leaves}}.dump();
  link::NetlinkAddrOps addrs;  // the host's own NICs are read, as the CNI reads them
  f.in.addrs = &addrs;
  CrossedIbFabric fabric;
  f.in.ib_probe = &fabric;
  f.in.lldp_wait_ms = 1000;
  View v = NodeView(f.in);
  INFO(v.ToJson().dump(2));
  REQUIRE(v.doc.contains("cabling"));
  CHECK(v.doc["cabling"].size() == 8);
  CHECK(v.doc["cabling"][0]["switch"] == leaves[0]);
  CHECK(v.doc["cabling"][0]["port"] == "17");
  CHECK_THAT(v.doc["cablingSource"].get<std::string>(), Catch::Contains("SMP"));
  int crossed = 0;
  for (const auto& x : v.findings) {
    if (x.check == "rail-cabling" && x.status == Status::kFail) {
      ++crossed;
      CHECK_THAT(x.message, Catch::Contains("rail 2 (mlx5_1") || Catch::Contains("rail 3 (mlx5_2"));
    }
  }
  CHECK(crossed == 2);
  const Finding* silent = f.Find(v, "rail-smp", Status::kUnknown);
  REQUIRE(silent != nullptr);
  CHECK_THAT(silent->message, Catch::Contains("mlx5_7 port 1: no SMP answer"));
}

}  // namespace
}  // namespace kuberdma::doctor
