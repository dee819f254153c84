// SPDX-License-Identifier: Apache-2.0
// The VM tier's tests: run only inside a guest of Debian 12's own kernel with Soft-RoCE
// (tests/vm/run.sh boots it; tests/vm/guest.sh runs this), on real RDMA devices the kernel made:
// the sysfs HCA model on rxe (no PCI parent), GID tables as the kernel keeps them (an address on
// the HCA's netdev or on a child in a pod namespace), rdma-doctor's node view, the device
// plugin's discovery and allocation opened from a pod namespace, and the simulated fleet's netem
// loss. Skips (77) on a kernel without Soft-RoCE.
//
//   vm_tests --doctor PATH [Catch2 options]
#define CATCH_CONFIG_RUNNER
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/deviceplugin/resource.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/sim/sim_fleet.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/testing/test_net.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma {
namespace {

std::string g_doctor;

// A shell step of the test's own setup (iproute2); its exit status.
int Sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// `cmd`'s stdout and exit status (-1 when it did not run or exit).
int Status(const std::string& cmd, std::string* out) {
  FILE* p = ::popen(cmd.c_str(), "r");
  out->clear();
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string Out(const std::string& cmd) {
  std::string out;
  (void)Status(cmd, &out);
  return out;
}

// rxe0 on veth kvm0 (its peer kvm1), or another, removed again: a Soft-RoCE HCA for one test.
struct SoftRoce {
  explicit SoftRoce(std::string hca = "rxe0", std::string veth = "kvm0",
                    const std::string& peer = "kvm1")
      : hca_(std::move(hca)), veth_(std::move(veth)) {
    REQUIRE(Sh("ip link add " + veth_ + " type veth peer name " + peer) == 0);
    REQUIRE(Sh("ip link set " + veth_ + " up && ip link set " + peer + " up") == 0);
    REQUIRE(Sh("rdma link add " + hca_ + " type rxe netdev " + veth_) == 0);
  }
  ~SoftRoce() {
    (void)Sh("rdma link delete " + hca_);
    (void)Sh("ip link delete " + veth_);
  }
  SoftRoce(const SoftRoce&) = delete;
  SoftRoce& operator=(const SoftRoce&) = delete;

 private:
  std::string hca_;
  std::string veth_;
};

// Named pod namespaces (/run/netns/NAME), deleted again whatever the test did.
struct Pods {
  explicit Pods(std::vector<std::string> names) : names_(std::move(names)) {
    for (const auto& n : names_) REQUIRE(testing::CreateNamed(n));
  }
  ~Pods() {
    for (const auto& n : names_) (void)testing::DeleteNamed(n);
  }
  Pods(const Pods&) = delete;
  Pods& operator=(const Pods&) = delete;

 private:
  std::vector<std::string> names_;
};

sysfs::Hca Read(const std::string& name) {
  auto h = sysfs::ReadHca(sysfs::SysfsRoot("/"), name, sysfs::HcaDetail::kTables);
  REQUIRE(h);
  return *h;
}

// The entry for `ipv4` in rxe0's port 1 table, or nullptr; the kernel adds entries a little
// after the address, so it is polled for up to 2 s (present) or until gone.
std::optional<sysfs::Gid> GidFor(const std::string& ipv4, bool want_present) {
  for (int i = 0; i < 40; ++i) {
    sysfs::Hca h = Read("rxe0");
    std::optional<sysfs::Gid> found;
    for (const auto& g : h.ports.at(0).gids)
      if (g.Ipv4() == ipv4) found = g;
    if (found.has_value() == want_present) return found;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

TEST_CASE(
    "A Soft-RoCE HCA is a virtual HCA of the sysfs model: no PCI parent, its netdev, uverbs") {
  SoftRoce rxe;
  auto all = sysfs::DiscoverHcas(sysfs::SysfsRoot("/"), sysfs::HcaDetail::kTables);
  REQUIRE(all);
  REQUIRE(all->size() == 1);
  const sysfs::Hca& h = all->front();
  CHECK(h.name == "rxe0");
  CHECK(h.bus == sysfs::BusKind::kVirtual);
  CHECK(h.address.empty());
  CHECK(h.pci_address.empty());
  CHECK(h.netdevs == std::vector<std::string>{"kvm0"});
  REQUIRE_FALSE(h.uverbs.empty());
  CHECK(::access(("/dev/infiniband/" + h.uverbs).c_str(), F_OK) == 0);
  REQUIRE(h.ports.size() == 1);
  CHECK(h.link_layer() == sysfs::LinkLayer::kEthernet);
  CHECK(h.ports[0].state == sysfs::kPortActive);
  // The kernel's own table: link-local entries (RoCE v1 and v2) from the netdev's MAC.
  REQUIRE_FALSE(h.ports[0].gids.empty());
  CHECK(h.ports[0].gids[0].IsLinkLocal());
  CHECK(h.ports[0].gids[0].netdev == "kvm0");
}

TEST_CASE("An address on the HCA's netdev adds an IPv4 RoCE v2 GID, which goes with the address") {
  SoftRoce rxe;
  REQUIRE(Sh("ip addr add 10.9.0.1/24 dev kvm0") == 0);
  auto g = GidFor("10.9.0.1", true);
  REQUIRE(g);
  CHECK(g->IsRoceV2());
  CHECK(g->netdev == "kvm0");
  CHECK(g->Address() == "::ffff:10.9.0.1");
  const sysfs::Gid* first = sysfs::FirstRoutableV2(Read("rxe0").ports.at(0).gids, "kvm0");
  REQUIRE(first != nullptr);
  CHECK(first->index == g->index);
  REQUIRE(Sh("ip addr del 10.9.0.1/24 dev kvm0") == 0);
  CHECK_FALSE(GidFor("10.9.0.1", false));
}

TEST_CASE("A macvlan child in a pod namespace adds the pod's GID, ndevs names it as the pod does") {
  SoftRoce rxe;
  REQUIRE(Sh("ip netns add kvm-pod1") == 0);
  REQUIRE(Sh("ip link add kvmc1 link kvm0 type macvlan mode bridge") == 0);
  REQUIRE(Sh("ip link set kvmc1 netns kvm-pod1") == 0);
  REQUIRE(Sh("ip -n kvm-pod1 link set kvmc1 name net1") == 0);
  REQUIRE(Sh("ip -n kvm-pod1 addr add 10.9.0.11/24 dev net1 && ip -n kvm-pod1 link set net1 up") ==
          0);
  auto g = GidFor("10.9.0.11", true);
  CHECK((g && g->IsRoceV2() && g->netdev == "net1"));
  (void)Sh("ip netns delete kvm-pod1");  // the child dies with its namespace, and its entry
  CHECK_FALSE(GidFor("10.9.0.11", false));
}

// NCCL's INFO line for a QP over the IPv4-mapped GID of `ipv4` at `index` (NCCL prints the
// interface ID as a little-endian hex number).
std::string GidLine(uint32_t index, const std::string& ipv4) {
  in_addr a{};
  ::inet_pton(AF_INET, ipv4.c_str(), &a);
  const auto* b = reinterpret_cast<const uint8_t*>(&a.s_addr);
  uint64_t id = 0xffffULL << 16;
  for (int i = 0; i < 4; ++i) id |= static_cast<uint64_t>(b[i]) << (32 + 8 * i);
  char line[200];
  std::snprintf(line, sizeof line,
                "x NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 9 mtu 3 GID %u (0/%llX) x\n",
                index, static_cast<unsigned long long>(id));
  return line;
}

// The validator's problems in namespace `pod` (address `own`) for a NCCL log whose QPs used
// GID `index` (`ipv4`) of rxe0.
std::vector<std::string> GidProblemsIn(netns::NetNs& pod, const std::string& own, uint32_t index,
                                       const std::string& ipv4) {
  std::vector<std::string> problems;
  REQUIRE(pod.RunIn([&] {
    link::NetlinkLinkOps links;
    validator::Options o;
    o.expect = "rxe0";
    validator::Validator v(o, sysfs::SysfsRoot("/"), links,
                           [](const char*) -> const char* { return nullptr; });
    validator::Report r = v.Inventory();
    validator::NcclLog log;
    log.AddText("x NCCL INFO NET/IB : Using [0]rxe0:1/RoCE ; OOB net1:" + own + "<0>\n" +
                GidLine(index, ipv4));
    v.Judge(r, {}, {}, validator::CollectiveOutcome{}, log);
    problems = r.problems;
  }));
  return problems;
}

TEST_CASE("Two pods on one Soft-RoCE HCA: GIDs are owned by address, another pod's fails") {
  SoftRoce rxe;
  auto a = testing::CreateNamed("kvm-pa");
  auto b = testing::CreateNamed("kvm-pb");
  REQUIRE(a);
  REQUIRE(b);
  for (const auto& [pod, ip] :
       {std::pair{"kvm-pa", "10.9.0.21"}, std::pair{"kvm-pb", "10.9.0.22"}}) {
    std::string child = std::string("kvc") + pod[5];
    REQUIRE(Sh("ip link add " + child + " link kvm0 type macvlan mode bridge") == 0);
    REQUIRE(Sh("ip link set " + child + " netns " + pod) == 0);
    REQUIRE(Sh(std::string("ip -n ") + pod + " link set " + child + " name net1") == 0);
    REQUIRE(Sh(std::string("ip -n ") + pod + " addr add " + ip + "/24 dev net1") == 0);
    REQUIRE(Sh(std::string("ip -n ") + pod + " link set net1 up") == 0);
  }
  auto ga = GidFor("10.9.0.21", true);
  auto gb = GidFor("10.9.0.22", true);
  REQUIRE(ga);
  REQUIRE(gb);
  CHECK(ga->netdev == "net1");  // both pods' entries name net1: names cannot tell them apart
  CHECK(gb->netdev == "net1");
  // Pod A's validator, fed a QP that used pod B's entry: fails naming both indexes.
  std::vector<std::string> problems = GidProblemsIn(*a, "10.9.0.21", gb->index, "10.9.0.22");
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  INFO(all);
  CHECK_THAT(all, Catch::Contains("rxe0: NCCL's queue pairs used GID " + std::to_string(gb->index) +
                                  " (10.9.0.22), which is no address of this pod"));
  CHECK_THAT(all, Catch::Contains("this pod's RoCE v2 GID is index " + std::to_string(ga->index)));
  // Pod A's doctor marks the pod's own entries in the kernel's table, by address.
  std::string out =
      Out("ip netns exec kvm-pa " + g_doctor + " --json --state-dir /nonexistent pod 2>&1");
  INFO(out.substr(0, 2000));
  auto doc = nlohmann::json::parse(out, nullptr, false);
  REQUIRE(doc.is_object());
  std::map<std::string, std::string> owner;
  for (const auto& row : doc["result"].value("gids", nlohmann::json::array()))
    if (row.contains("owner")) owner[row.value("ipv4", "")] = row.value("owner", "");
  CHECK(owner["10.9.0.21"] == "this pod");
  CHECK(owner["10.9.0.22"] == "another pod");
  (void)testing::DeleteNamed("kvm-pa");
  (void)testing::DeleteNamed("kvm-pb");
  CHECK_FALSE(GidFor("10.9.0.21", false));  // gone with the children
  CHECK_FALSE(GidFor("10.9.0.22", false));
}

// ---- Child-interface attachments through the `rdma` CNI (mode macvlan / ipvlan) ----

// A binary of the build this guest runs (the doctor's build: BUILD/tools/doctor/rdma-doctor).
std::string Bin(const std::string& rel) {
  return g_doctor.substr(0, g_doctor.rfind("/tools/doctor/")) + "/" + rel;
}

constexpr const char* kChildState = "/run/kube-rdma/vm-child";
constexpr const char* kChildStore = "/run/kube-rdma/vm-hl";
constexpr const char* kVmNodeConfig = "/run/kube-rdma/vm-node.json";

// A rail's NAD in shared mode: a `mode` child of `hca` per pod, with `ipam`.
std::string ChildConf(const std::string& name, const std::string& mode, const std::string& hca,
                      const std::string& ipam) {
  return R"({"cniVersion":"1.0.0","name":")" + name + R"(","type":"rdma","mode":")" + mode +
         R"(","hca":")" + hca + R"(","linkState":"up","stateDir":")" + kChildState +
         R"(","ipam":)" + ipam + "}";
}

std::string HostLocal(const std::string& subnet) {
  return R"({"type":"host-local","dataDir":")" + std::string(kChildStore) +
         R"(","ranges":[[{"subnet":")" + subnet + R"("}]]})";
}

// The real `rdma` binary's verb for attachment `cid` in named namespace `pod`; the result's
// first address (without its length) on success.
std::string Cni(const std::string& verb, const std::string& cid, const std::string& pod,
                const std::string& ifname, const std::string& conf, int want = 0) {
  std::string out;
  // No kubelet in the guest: the node config lets rdma attach HCAs outside any allocation.
  int rc = Status("mkdir -p /run/kube-rdma && echo '{\"allowUnallocated\": true}' > " +
                      std::string(kVmNodeConfig) + " && echo '" + conf +
                      "' | KUBERDMA_NODE_CONFIG=" + kVmNodeConfig + " CNI_COMMAND=" + verb +
                      " CNI_CONTAINERID=" + cid + " CNI_NETNS=/run/netns/" + pod +
                      " CNI_IFNAME=" + ifname + " CNI_PATH=/usr/lib/cni " + Bin("cni/kube-rdma") +
                      " 2>>/tmp/vm-cni.err",
                  &out);
  INFO(verb << " " << cid << " " << conf << ": " << out);
  REQUIRE(rc == want);
  if (verb != "ADD") return "";
  auto r = nlohmann::json::parse(out, nullptr, false);
  std::string ip = r.is_object() && r.contains("ips") ? r["ips"][0].value("address", "") : "";
  return ip.substr(0, ip.find('/'));
}

// The addresses host-local still holds (one file per address in its store).
int HeldAddresses() {
  std::string out;
  (void)Status(std::string("ls ") + kChildStore + "/*/ 2>/dev/null | grep -c '^[0-9]'", &out);
  return std::atoi(out.c_str());
}

// Pod `pod`'s `rdma-validate --nccl-env`: its stdout, and its exit status.
int NcclEnv(const std::string& pod, std::string* out) {
  return Status("ip netns exec " + pod + " " + Bin("tools/validator/rdma-validate") +
                    " --nccl-env 2>/dev/null",
                out);
}

TEST_CASE("Two pods on one Soft-RoCE HCA through the CNI's child modes: GIDs, NCCL, DEL") {
  for (const std::string mode : {"macvlan", "ipvlan"}) {
    INFO("mode " << mode);
    (void)Sh(std::string("rm -rf ") + kChildState + " " + kChildStore);
    SoftRoce rxe;
    Pods pods({"kvm-ca", "kvm-cb"});
    std::string conf = ChildConf("rail1", mode, "rxe0", HostLocal("10.9.1.0/24"));
    std::string ip_a = Cni("ADD", "ca", "kvm-ca", "net1", conf);
    std::string ip_b = Cni("ADD", "cb", "kvm-cb", "net1", conf);
    std::string link;
    REQUIRE(Status("ip -n kvm-ca -d link show net1", &link) == 0);
    CHECK_THAT(link, Catch::Contains(mode));
    CHECK(Read("rxe0").netdevs == std::vector<std::string>{"kvm0"});  // the parent stays home
    auto ga = GidFor(ip_a, true);
    auto gb = GidFor(ip_b, true);
    REQUIRE(ga);
    REQUIRE(gb);
    CHECK(ga->netdev == "net1");
    CHECK(gb->netdev == "net1");
    // Each pod's --nccl-env names its own index, read from the kernel's table in its namespace.
    std::string env;
    CHECK(NcclEnv("kvm-cb", &env) == 0);
    CHECK_THAT(env,
               Catch::Contains("export NCCL_IB_GID_INDEX='" + std::to_string(gb->index) + "'") &&
                   Catch::Contains("export NCCL_IB_HCA='=rxe0:1'"));
    CHECK(NcclEnv("kvm-ca", &env) == 0);
    CHECK_THAT(env, Catch::Contains("NCCL_IB_GID_INDEX='" + std::to_string(ga->index) + "'"));
    // Every library is told the same index, each by its own variable (contract/comm_env.h).
    CHECK(Status("ip netns exec kvm-cb " + Bin("tools/validator/rdma-validate") +
                     " --env ucx,nvshmem,mooncake,mpi 2>/dev/null",
                 &env) == 0);
    const std::string gb_index = "='" + std::to_string(gb->index) + "'";
    CHECK_THAT(env, Catch::Contains("export UCX_NET_DEVICES='rxe0:1'") &&
                        Catch::Contains("export UCX_IB_GID_INDEX" + gb_index) &&
                        Catch::Contains("export NVSHMEM_IB_GID_INDEX" + gb_index) &&
                        Catch::Contains("export MC_GID_INDEX" + gb_index) &&
                        Catch::Contains("export NVSHMEM_HCA_PREFIX='rxe'") &&
                        Catch::Contains("export OMPI_MCA_pml_ucx_devices='any'"));
    // --own-gids (the chart's init container in shared mode): the plan applied, its HCAs expected.
    std::string report;
    CHECK(Status("ip netns exec kvm-ca " + Bin("tools/validator/rdma-validate") +
                     " --own-gids --inventory-only --json - 2>/dev/null",
                 &report) == 0);
    auto rep = nlohmann::json::parse(report, nullptr, false);
    REQUIRE(rep.is_object());
    CHECK(rep.value("expectedFrom", "") == "--expect");
    CHECK(rep["devices"].size() == 1);
    // Pod B's validator, fed a QP that used pod A's entry: fails, naming the index to use.
    auto pod_b = netns::NetNs::Open("/run/netns/kvm-cb");
    REQUIRE(pod_b);
    std::string all;
    for (const auto& p : GidProblemsIn(*pod_b, ip_b, ga->index, ip_a)) all += p + "\n";
    INFO(all);
    CHECK_THAT(all,
               Catch::Contains("used GID " + std::to_string(ga->index) + " (" + ip_a +
                               "), which is no address of this pod") &&
                   Catch::Contains("this pod's RoCE v2 GID is index " + std::to_string(gb->index)));
    // Pod B's doctor marks its entry and pod A's, by address.
    std::string out =
        Out("ip netns exec kvm-cb " + g_doctor + " --json --state-dir /nonexistent pod 2>&1");
    auto doc = nlohmann::json::parse(out, nullptr, false);
    REQUIRE(doc.is_object());
    std::map<std::string, std::string> owner;
    for (const auto& row : doc["result"].value("gids", nlohmann::json::array()))
      if (row.contains("owner")) owner[row.value("ipv4", "")] = row.value("owner", "");
    CHECK(owner[ip_b] == "this pod");
    CHECK(owner[ip_a] == "another pod");
    // Pod A's entry came first: NCCL's automatic choice in pod B would be pod A's.
    std::string shared_status;
    for (const auto& f : doc.value("findings", nlohmann::json::array()))
      if (f.value("check", "") == "roce-gid-table-shared") shared_status = f.value("status", "");
    CHECK(shared_status == "FAIL");
    for (const auto& [cid, pod] : {std::pair{"ca", "kvm-ca"}, std::pair{"cb", "kvm-cb"}}) {
      Cni("DEL", cid, pod, "net1", conf);
      std::string gone;
      CHECK(Status(std::string("ip -n ") + pod + " link show net1 2>/dev/null", &gone) != 0);
    }
    CHECK_FALSE(GidFor(ip_a, false));  // the entries went with the children
    CHECK_FALSE(GidFor(ip_b, false));
    CHECK(HeldAddresses() == 0);
    CHECK(Out(std::string("find ") + kChildState + " -name '*.json'").empty());
  }
}

// Pod `pod`'s child on each of two HCAs, through the CNI.
void AttachTwoRails(const std::string& cid, const std::string& pod, const std::string& ipam1,
                    const std::string& ipam2) {
  Cni("ADD", cid, pod, "net1", ChildConf("rail1", "macvlan", "rxe0", ipam1));
  Cni("ADD", cid, pod, "net2", ChildConf("rail2", "macvlan", "rxe1", ipam2));
}

std::string Static(const std::string& cidr) {
  return R"({"type":"static","addresses":[{"address":")" + cidr + R"("}]})";
}

TEST_CASE("Two HCAs whose tables differ: NCCL_IB_ADDR_RANGE with a block per pod, else refused") {
  (void)Sh(std::string("rm -rf ") + kChildState + " " + kChildStore);
  SoftRoce rxe0;
  SoftRoce rxe1("rxe1", "kvm2", "kvm3");
  // Addresses of the node's own on rail 2 push every later entry there two indices up each.
  REQUIRE(Sh("ip addr add 10.9.99.1/24 dev kvm2 && ip addr add 10.9.98.1/24 dev kvm2") == 0);
  Pods pods({"kvm-ra", "kvm-rb"});
  std::string env;
  SECTION("one subnet per rail (host-local): the pods' addresses share no prefix of their own") {
    AttachTwoRails("ra", "kvm-ra", HostLocal("10.9.1.0/24"), HostLocal("10.9.2.0/24"));
    AttachTwoRails("rb", "kvm-rb", HostLocal("10.9.1.0/24"), HostLocal("10.9.2.0/24"));
    std::string err;
    int rc = Status("ip netns exec kvm-ra " + Bin("tools/validator/rdma-validate") +
                        " --nccl-env 2>&1 >/dev/null",
                    &err);
    INFO(err);
    CHECK(rc == 1);
    CHECK_THAT(err, Catch::Contains("different indices") &&
                        Catch::Contains("NCCL_IB_ADDR_RANGE cannot single them out"));
    // UCX alone can be told each HCA's own GID: one /32 per HCA (UCX_IB_ROCE_SUBNETS).
    std::string ucx;
    CHECK(Status("ip netns exec kvm-ra " + Bin("tools/validator/rdma-validate") +
                     " --env ucx 2>/dev/null",
                 &ucx) == 0);
    CHECK_THAT(ucx, Catch::Contains("export UCX_IB_ROCE_SUBNETS='10.9.1.") &&
                        Catch::Contains("/32,10.9.2.") && !Catch::Contains("UCX_IB_GID_INDEX"));
    CHECK(Status("ip netns exec kvm-ra " + Bin("tools/validator/rdma-validate") +
                     " --env ucx,nccl 2>&1 >/dev/null",
                 &err) == 1);  // NCCL among them: it cannot, and the pod is told why
    CHECK(Status("ip netns exec kvm-ra " + Bin("tools/validator/rdma-validate") +
                     " --own-gids --inventory-only --json - 2>/dev/null",
                 &env) == 1);  // the init container stops the pod: it could not train right
  }
  SECTION("an address block per pod across rails (static): NCCL_IB_ADDR_RANGE holds") {
    AttachTwoRails("ra", "kvm-ra", Static("10.9.16.5/24"), Static("10.9.17.5/24"));
    AttachTwoRails("rb", "kvm-rb", Static("10.9.32.5/24"), Static("10.9.33.5/24"));
    auto a1 = GidFor("10.9.16.5", true);
    REQUIRE(a1);
    CHECK(NcclEnv("kvm-ra", &env) == 0);
    INFO(env);
    CHECK_THAT(env, Catch::Contains("NCCL_IB_ADDR_RANGE='10.9.16.0/23'") &&
                        Catch::Contains("NCCL_IB_HCA='=rxe0:1,rxe1:1'"));
    CHECK_THAT(env, !Catch::Contains("NCCL_IB_GID_INDEX"));
    CHECK(NcclEnv("kvm-rb", &env) == 0);
    CHECK_THAT(env, Catch::Contains("NCCL_IB_ADDR_RANGE='10.9.32.0/23'"));
  }
  for (const auto& [cid, pod] : {std::pair{"ra", "kvm-ra"}, std::pair{"rb", "kvm-rb"}}) {
    Cni("DEL", cid, pod, "net1", ChildConf("rail1", "macvlan", "rxe0", HostLocal("10.9.1.0/24")));
    Cni("DEL", cid, pod, "net2", ChildConf("rail2", "macvlan", "rxe1", HostLocal("10.9.2.0/24")));
  }
  CHECK(HeldAddresses() == 0);
}

TEST_CASE("rdma-doctor node reads the kernel's netns mode and names the Soft-RoCE HCA as virtual") {
  SoftRoce rxe;
  std::string out = Out(g_doctor + " --json --state-dir /nonexistent node 2>&1");
  INFO(out);
  auto doc = nlohmann::json::parse(out, nullptr, false);
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("result"));
  const auto& r = doc["result"];
  CHECK(r.value("netnsMode", "") == "shared");
  REQUIRE(r["hcas"].is_array());
  REQUIRE(r["hcas"].size() == 1);
  CHECK(r["hcas"][0]["name"] == "rxe0");
  CHECK(r["hcas"][0]["bus"] == "virtual");
  CHECK(r["hcas"][0]["address"] == "virtual");
  CHECK(r["hcas"][0]["netdev"] == "kvm0");
  CHECK(r["hcas"][0]["where"] == "host");
}

TEST_CASE("The device plugin allocates rxe0's device nodes, and a pod namespace opens them") {
  SoftRoce rxe;
  deviceplugin::ResourceConfig cfg;
  cfg.resource_name = "hca";
  cfg.policy = deviceplugin::Policy::kPerHca;
  cfg.rdma_hca_max = 1;
  deviceplugin::Resource r(cfg, sysfs::SysfsRoot("/"));
  auto all = sysfs::DiscoverHcas(sysfs::SysfsRoot("/"), sysfs::HcaDetail::kPorts);
  REQUIRE(all);
  REQUIRE(r.Refresh(*all));
  auto devices = r.Devices();
  REQUIRE(devices.size() == 1);
  CHECK(devices[0].healthy);
  auto alloc = r.Allocate({devices[0].id});
  REQUIRE(alloc);
  REQUIRE_FALSE(alloc->devices.empty());
  auto pod = testing::CreateNamed("kvm-pod2");
  REQUIRE(pod);
  bool opened = true;
  REQUIRE(pod->RunIn([&] {
    for (const auto& d : alloc->devices) {
      UniqueFd fd(::open(d.host_path.c_str(), O_RDWR | O_CLOEXEC));
      if (!fd.valid()) {
        std::fprintf(stderr, "cannot open %s: %s\n", d.host_path.c_str(), std::strerror(errno));
        opened = false;
      }
    }
  }));
  (void)testing::DeleteNamed("kvm-pod2");
  CHECK(opened);
  CHECK(alloc->envs.at("NCCL_IB_HCA").find("rxe0") != std::string::npos);
}

std::string qdiscs;  // node 2's, after the last Delivered()

// Datagrams from node 2 to node 1 over `rail`, and how many arrived.
int Delivered(sim::SimFleet& f, int rail, int count) {
  UniqueFd rx;
  REQUIRE(f.Node(1).RunIn([&] {
    rx = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(29700);
    ::inet_pton(AF_INET, sim::SimFleet::Address(1, rail).c_str(), &a.sin_addr);
    REQUIRE(::bind(rx.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    int big = 16 << 20;  // every datagram of the burst fits: a full buffer is not loss
    ::setsockopt(rx.get(), SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    timeval tv{0, 300000};
    ::setsockopt(rx.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }));
  auto send = [&](int from, int n) {
    REQUIRE(f.Node(2).RunIn([&] {
      UniqueFd tx(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(29700);
      ::inet_pton(AF_INET, sim::SimFleet::Address(1, rail).c_str(), &a.sin_addr);
      for (int i = from; i < from + n; ++i) {
        ::sendto(tx.get(), &i, sizeof i, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
        if (i % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }));
  };
  // The neighbour first: until one warm-up datagram arrives (ARP retries once a second, and
  // netem drops ARP too), or a burst would wait in the neighbour queue and be counted lost.
  int v = 0;
  for (int i = 0; i < 50; ++i) {
    send(-1000, 1);
    if (::recv(rx.get(), &v, sizeof v, 0) == static_cast<ssize_t>(sizeof v)) break;
  }
  send(0, count);
  REQUIRE(f.Node(2).RunIn([&] { qdiscs = Out("tc -s qdisc show 2>&1"); }));
  int got = 0;
  while (::recv(rx.get(), &v, sizeof v, 0) == static_cast<ssize_t>(sizeof v))
    if (v >= 0) ++got;
  return got;
}

TEST_CASE("The simulated fleet's netem loss drops that rail's packets, and only that rail's") {
  auto fleet = sim::SimFleet::Create(2, 2);
  INFO((fleet ? std::string() : fleet.error().message()));
  REQUIRE(fleet);
  auto& f = **fleet;
  REQUIRE(f.Lose(2, 1, 20));  // 20%: far from 0 and from the healthy rail in 2000 packets
  int lossy = Delivered(f, 1, 2000);
  int healthy = Delivered(f, 2, 2000);
  INFO("rail 1 delivered " << lossy << ", rail 2 " << healthy << " of 2000; node 2: " << qdiscs);
  CHECK(healthy >= 1990);
  CHECK(lossy > 1400);
  CHECK(lossy < 1800);
}

}  // namespace
}  // namespace kuberdma

int main(int argc, char** argv) {
  if (!kuberdma::sysfs::SysfsRoot("/").Exists("module/rdma_rxe")) {
    std::printf("SKIP: no Soft-RoCE (rdma_rxe) in this kernel: run through tests/vm/run.sh\n");
    return 77;
  }
  Catch::Session session;
  using namespace Catch::clara;  // NOLINT(google-build-using-namespace): Catch2's CLI builder
  session.cli(session.cli() | Opt(kuberdma::g_doctor, "path")["--doctor"]("rdma-doctor binary"));
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  return session.run();
}
