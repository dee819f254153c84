// SPDX-License-Identifier: Apache-2.0
// rdma-validate's core: NCCL 2.28 log parsing (real Socket lines captured on the GPU machine, and
// IB/RoCE/PXN/merged forms), counter math with wrap, busbw, rank detection, inventory over the
// sysfs fixtures, the verdict, and the report schema.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "kuberdma/base/files.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {
namespace {

namespace fs = std::filesystem;
std::string Fx(const std::string& p) { return std::string(KUBERDMA_FIXTURES) + "/" + p; }

std::function<const char*(const char*)> Env(std::map<std::string, std::string> m) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(m));
  return [shared](const char* k) -> const char* {
    auto it = shared->find(k);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE(
    "Real NCCL 2.28.3 Socket-transport lines give the device list and the channels per device") {
  NcclLog log;
  log.AddText(*ReadFile(Fx("nccl/socket-2.28.3-rank0.log")));
  CHECK(log.version() == "2.28.3");
  CHECK(log.network() == "Socket");
  CHECK(log.device_list() == std::vector<std::string>{"net1", "net2"});
  CHECK(log.channels().at("net1") == 4);
  CHECK(log.channels().at("net2") == 4);
  CHECK(log.transports() == std::set<std::string>{"NET/Socket"});
  CHECK(log.bypasses().empty());
}

TEST_CASE("IB, RoCE, PXN and merged-NIC lines are read, P2P, SHM and NVLS count as bypasses") {
  NcclLog log;
  log.AddText(
      "node-0:12:40 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1+mlx5_2:1/RoCE "
      "[2]mlx5_3:1/IB ; OOB eth0:10.244.1.5<0>\n"
      "node-0:12:40 [0] NCCL INFO Using network IB\n"
      "node-0:12:40 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n"
      "node-0:12:40 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] [receive] via NET/IB/1(0)/GDRDMA\n"
      "node-0:12:40 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] [send] via NET/IB/2/GDRDMA/Shared\n"
      "node-0:12:40 [0] NCCL INFO Channel 03/0 : 0[0] -> 2[2] via P2P/CUMEM/read\n"
      "node-0:12:40 [0] NCCL INFO Channel 04/0 : 0[0] -> 3[3] via SHM/direct/direct\n"
      "node-0:12:40 [0] NCCL INFO Channel 05/0 : 0[0] -> 1[1] [send] via NET/IB/7/GDRDMA\n"
      "node-0:12:40 [0] NCCL WARN NET/IB : Got async event : port error\n");
  CHECK(log.network() == "IB");
  CHECK(log.devices() == std::set<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
  CHECK(log.channels().at("mlx5_1") == 1);
  CHECK(log.channels().at("mlx5_2") == 1);  // merged: both halves carry the channel
  CHECK(log.bypasses() == std::set<std::string>{"P2P", "SHM"});
  CHECK(log.warnings().size() == 2);  // the unlisted NET device 7 and the WARN line
}

TEST_CASE("Counter deltas account for one 32-bit wrap, flag saturation, and never go negative") {
  CHECK(Delta(100, 350).value == 250);
  auto w = Delta(0xfffffff0ULL, 0x10);
  CHECK(w.wrapped);
  CHECK(w.value == 0x20);
  CHECK(Delta(0xffffffffULL, 0xffffffffULL).saturated);
  auto reset = Delta(1ULL << 40, 5);
  CHECK(reset.value == 0);
  CHECK(reset.wrapped);
}

TEST_CASE("busbw follows nccl-tests: AllReduce busbw = algbw * 2(n-1)/n") {
  auto b = AllReduceBandwidth(1000000000ULL, 0.5, 8);
  CHECK(b.algbw_gbps == Approx(2.0));
  CHECK(b.busbw_gbps == Approx(3.5));
  CHECK(AllReduceBandwidth(1000, 0, 2).busbw_gbps == 0);
  CHECK(AllReduceBandwidth(1000000000ULL, 1, 2).busbw_gbps == Approx(1.0));
}

TEST_CASE(
    "Rank and world size come from flags, RANK, MPI, Slurm, an Indexed Job or a StatefulSet "
    "ordinal") {
  CHECK(DetectRank(Env({{"RANK", "3"}, {"WORLD_SIZE", "8"}}), "x", -1, -1)->rank == 3);
  CHECK(DetectRank(Env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}), "x", -1, -1)
            ->world_size == 2);
  CHECK(DetectRank(Env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}}), "x", -1, -1)->rank == 5);
  auto job = DetectRank(Env({{"JOB_COMPLETION_INDEX", "2"}, {"WORLD_SIZE", "4"}}), "x", -1, -1);
  CHECK(job->rank == 2);
  auto sts = DetectRank(Env({{"WORLD_SIZE", "8"}}), "llm-trainer-7", -1, -1);
  REQUIRE(sts);
  CHECK(sts->rank == 7);
  CHECK(sts->source == "hostname ordinal");
  CHECK(DetectRank(Env({{"RANK", "1"}}), "x", -1, 4)->world_size == 4);
  CHECK(DetectRank(Env({}), "x", 0, 2)->rank == 0);
  CHECK_THAT(DetectRank(Env({}), "nohyphen", -1, 2).error().message(), Catch::Contains("rank"));
  CHECK_THAT(DetectRank(Env({{"RANK", "1"}}), "x", -1, -1).error().message(),
             Catch::Contains("world size"));
  CHECK_THAT(DetectRank(Env({{"RANK", "4"}, {"WORLD_SIZE", "4"}}), "x", -1, -1).error().message(),
             Catch::Contains("not below"));
}

TEST_CASE("The expected HCAs come from --expect, KUBERDMA_HCAS or NCCL_IB_HCA, with ports") {
  auto e = ExpectedHcas(Env({{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_3:1"}}), "");
  REQUIRE(e);
  CHECK(e->names == std::vector<std::string>{"mlx5_0", "mlx5_3"});
  CHECK(e->ports.at("mlx5_3") == std::vector<uint32_t>{1});
  auto k = ExpectedHcas(Env({{"KUBERDMA_HCAS", R"([{"name":"mlx5_5"},{"name":"mlx5_6"}])"},
                             {"NCCL_IB_HCA", "=mlx5_5:1"}}),
                        "");
  CHECK(k->names == std::vector<std::string>{"mlx5_5", "mlx5_6"});
  CHECK(k->source == "KUBERDMA_HCAS");
  CHECK(ExpectedHcas(Env({{"NCCL_IB_HCA", "mlx5_0"}}), "mlx5_2,mlx5_4")->names.size() == 2);
  CHECK_FALSE(ExpectedHcas(Env({{"NCCL_IB_HCA", "^mlx5_0"}}), ""));
  CHECK_FALSE(ExpectedHcas(Env({{"KUBERDMA_HCAS", "{"}}), ""));
  CHECK_FALSE(ExpectedHcas(Env({}), ""));
  CHECK(ExpectedNetdevs(Env({{"NCCL_SOCKET_IFNAME", "=net1,net2"}}), "")->names ==
        std::vector<std::string>{"net1", "net2"});
}

struct FixtureCopy {
  FixtureCopy() {
    char tmpl[] = "/tmp/kuberdma-val-XXXXXX";
    dir = mkdtemp(tmpl);
    fs::copy(Fx("sysfs/roce8"), dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  ~FixtureCopy() { fs::remove_all(dir); }
  std::string dir;
};

Options Ib(const std::string& expect) {
  Options o;
  o.expect = expect;
  return o;
}

TEST_CASE(
    "With nothing to validate the report says so, and exits 2 naming where devices come from") {
  link::NetlinkLinkOps links;
  Validator v(Options{}, sysfs::SysfsRoot(Fx("sysfs/roce8")), links, Env({}));
  Report r = v.Inventory();
  CHECK(r.exit_code == 2);
  std::string table = r.Table();
  CHECK_THAT(table, Catch::Contains("no expected devices") && Catch::Contains("--expect"));
  CHECK_THAT(table, !Catch::Contains("expected from )"));
}

TEST_CASE(
    "Inventory names every mismatch: missing, port down, uverbs unopenable, visible but not ours") {
  FixtureCopy fx;
  sysfs::SysfsRoot root(fx.dir);
  link::NetlinkLinkOps links;
  REQUIRE(WriteFileAtomic(root.Sys("class/infiniband/mlx5_1/ports/1/state"), "1: DOWN\n"));
  fs::remove(root.Dev("infiniband/uverbs2"));
  Validator v(Ib("mlx5_0,mlx5_1,mlx5_2,mlx5_9"), root, links, Env({}));
  Report r = v.Inventory();
  CHECK(r.exit_code == 1);
  std::string all;
  for (const auto& p : r.problems) all += p + "\n";
  CHECK_THAT(all, Catch::Contains("mlx5_9: expected (--expect) but missing"));
  CHECK_THAT(all, Catch::Contains("mlx5_1: port 1 is DOWN, not ACTIVE"));
  CHECK_THAT(all,
             Catch::Contains("mlx5_2: /dev/infiniband/uverbs2 is missing or cannot be opened"));
  REQUIRE(r.warnings.size() == 1);
  CHECK_THAT(r.warnings[0],
             Catch::Contains("visible but not ours: mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"));
  CHECK(r.devices[0].usable);
  CHECK_FALSE(r.devices[1].usable);
  CHECK(r.devices[0].uverbs == "/dev/infiniband/uverbs0");
}

TEST_CASE(
    "An inventory of exactly the pod's HCAs passes, no expected set is a usage error (exit 2)") {
  link::NetlinkLinkOps links;
  sysfs::SysfsRoot root(Fx("sysfs/roce8"));
  std::string all8 = "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7";
  Report ok = Validator(Ib(all8), root, links, Env({})).Inventory();
  CHECK(ok.problems.empty());
  CHECK(ok.exit_code == 0);
  Report none = Validator(Ib(""), root, links, Env({})).Inventory();
  CHECK(none.exit_code == 2);
  Options sock;
  sock.transport = Transport::kSocket;
  sock.expect = "lo,kuberdma-none0";
  Report s = Validator(sock, root, links, Env({})).Inventory();
  REQUIRE(s.devices.size() == 2);
  CHECK(s.devices[0].present);
  CHECK_FALSE(s.devices[1].present);
}

// A judged run over two RoCE HCAs (400 Gb/s ports): counters, NCCL's log and the collective's
// outcome. 256 MiB in 5 ms between two ranks is 53.7 GB/s busbw, 0.54 of line rate per HCA.
struct Judged {
  explicit Judged(uint64_t mlx5_1_words = 500000000, const std::string& extra_log = "",
                  bool init_ok = true, double seconds = 0.005,
                  std::map<std::string, std::string> env = {},
                  const std::function<void(Options&)>& tune = nullptr, int local_ranks = 1) {
    root = std::make_unique<sysfs::SysfsRoot>(Fx("sysfs/roce8"));
    Options o = Ib("mlx5_0,mlx5_1");
    o.bytes = 256u << 20;
    o.min_busbw_gbps = 1;
    if (tune) tune(o);
    v = std::make_unique<Validator>(o, *root, links, Env(std::move(env)));
    r = v->Inventory();
    r.world_size = 2;
    r.local_ranks = local_ranks;
    Snapshot before, after;
    before.bytes = {{"mlx5_0", {0xfffffff0ULL, 1000}}, {"mlx5_1", {0, 0}}};
    after.bytes = {{"mlx5_0", {0x1dcd6500ULL, 500001000}},
                   {"mlx5_1", {mlx5_1_words, mlx5_1_words}}};
    before.word_counters = after.word_counters = {{"mlx5_0", true}, {"mlx5_1", true}};
    before.errors["mlx5_0"] = {{"symbol_error", 0}};
    after.errors["mlx5_0"] = {{"symbol_error", 3}};
    CollectiveOutcome run;
    run.ranks = {{.rank = 0,
                  .reported = true,
                  .init_ok = init_ok,
                  .ok = init_ok,
                  .verified = init_ok,
                  .seconds_per_iter = seconds}};
    NcclLog log;
    log.AddText(
        "x NCCL INFO NCCL version 2.28.3+cuda13.0\n"
        "x NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
        "x NCCL INFO Using network IB\n"
        "x NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n"
        "x NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/IB/1(0)/GDRDMA\n" +
        extra_log);
    v->Judge(r, before, after, run, log);
  }
  std::string Problems() const {
    std::string all;
    for (const auto& p : r.problems) all += p + "\n";
    return all;
  }
  link::NetlinkLinkOps links;
  std::unique_ptr<sysfs::SysfsRoot> root;
  std::unique_ptr<Validator> v;
  Report r;
};

TEST_CASE(
    "A run where NCCL chose both HCAs and both carried their share passes, wrap and errors "
    "reported") {
  Judged j;
  INFO(j.Problems());
  CHECK(j.r.verdict == "pass");
  CHECK(j.r.exit_code == 0);
  CHECK(j.r.devices[0].bytes_sent == (0x1dcd6500ULL + 0x10) * 4);  // wrapped once, 4-byte words
  CHECK(j.r.devices[0].notes.size() == 2);                         // the wrap and symbol_error +3
  CHECK(j.r.devices[0].error_deltas.at("symbol_error") == 3);
  CHECK(j.r.warnings.size() == 2);  // the leaked HCAs and symbol_error
  CHECK(j.r.devices[1].nccl_channels == 1);
  CHECK(j.r.bandwidth.busbw_gbps == Approx(static_cast<double>(256u << 20) / 0.005 / 1e9));
  CHECK(j.r.devices[0].line_rate_gbps == 400);
  CHECK(j.r.devices[0].line_rate_fraction ==
        Approx(j.r.bandwidth.busbw_gbps * j.r.devices[0].share / 50));
  CHECK(j.r.devices[0].gpu_direct == "yes");
  auto doc = j.r.ToJson();
  for (const char* k : {"version", "verdict", "exitCode", "mode", "transport", "rank", "worldSize",
                        "devices", "unexpected", "nccl", "collective", "problems", "warnings"}) {
    CHECK(doc.contains(k));
  }
  CHECK(doc["devices"][1]["chosenByNccl"] == true);
  CHECK(doc["collective"]["busbwGBps"].get<double>() > 1);
  CHECK_THAT(j.r.Summary(), Catch::StartsWith("rdma-validate: pass, busbw"));
}

TEST_CASE("GPUDirect RDMA as NCCL 2.18, 2.21 and 2.28 print it: per HCA and per channel") {
  NcclLog old;
  old.AddText(*ReadFile(Fx("nccl/gdr-2.18.5.log")));
  CHECK(old.gdr().at("mlx5_0").direct_channels == 2);
  CHECK(old.gdr().at("mlx5_0").supported == 1);
  CHECK(old.gdr().at("mlx5_0").too_far.empty());
  CHECK(old.gdr().at("mlx5_1").staged_channels == 2);
  CHECK(old.gdr().at("mlx5_1").direct_channels == 0);
  CHECK(old.gdr().at("mlx5_1").too_far == "distance 6 > 4");  // "HCA 1": the index in decimal

  NcclLog mid;  // from 2.21 the HCA is a hex topology id: "HCA 11" is index 17
  mid.AddText(*ReadFile(Fx("nccl/gdr-2.21.5.log")));
  CHECK(mid.gdr().at("mlx5_17").too_far == "distance 7 > 5");
  CHECK(mid.gdr().at("mlx5_17").staged_channels == 1);
  CHECK(mid.gdr().at("mlx5_16").direct_channels == 1);
  CHECK_FALSE(mid.gdr().contains("mlx5_11"));

  NcclLog now;
  now.AddText(*ReadFile(Fx("nccl/gdr-2.28.3.log")));
  CHECK(now.gdr().at("mlx5_1").supported == 0);  // no nvidia-peermem, no DMA-BUF
  CHECK(now.gdr().at("mlx5_1").staged_channels == 2);
  CHECK(now.gdr().at("mlx5_0").direct_channels == 1);
  // A merged device's halves, and 2.26's "/GDRDMA(PCI)" behind PXN's "(1)".
  CHECK(now.gdr().at("mlx5_3").supported == 1);
  CHECK(now.gdr().at("mlx5_3").direct_channels == 1);
  CHECK(now.gdr().at("mlx5_2").direct_channels == 1);
  CHECK(now.channels().at("mlx5_3") == 1);
}

// A two-HCA run on the 8-GPU fixture (every HCA shares a PCIe switch with two GPUs) judged with
// `log` as NCCL's account.
Report JudgeWithLog(const std::string& log_text, bool allow_no_gdr = false,
                    std::map<std::string, std::string> env = {}) {
  link::NetlinkLinkOps links;
  Options o = Ib("mlx5_0,mlx5_1");
  o.allow_no_gdr = allow_no_gdr;
  o.min_line_rate = 0;
  Validator v(o, sysfs::SysfsRoot(Fx("sysfs/roce8")), links, Env(std::move(env)));
  Report r = v.Inventory();
  r.world_size = 2;
  Snapshot before, after;
  before.bytes = {{"mlx5_0", {0, 0}}, {"mlx5_1", {0, 0}}};
  after.bytes = {{"mlx5_0", {1u << 28, 1u << 28}}, {"mlx5_1", {1u << 28, 1u << 28}}};
  CollectiveOutcome run;
  run.ranks = {{.rank = 0,
                .reported = true,
                .init_ok = true,
                .ok = true,
                .verified = true,
                .seconds_per_iter = 0.005}};
  NcclLog log;
  log.AddText(
      "x NCCL INFO NCCL version 2.28.3+cuda13.0\n"
      "x NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
      "x NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
      "x NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1\n" +
      log_text);
  v.Judge(r, before, after, run, log);
  return r;
}

std::string All(const std::vector<std::string>& v) {
  std::string all;
  for (const auto& p : v) all += p + "\n";
  return all;
}

TEST_CASE("An HCA NCCL staged through host memory beside a GPU fails, naming the likely cause") {
  SECTION("no nvidia-peermem and no DMA-BUF: NCCL said the HCA cannot") {
    Report r = JudgeWithLog("x NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'\n");
    CHECK(r.verdict == "fail");
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0],
               Catch::StartsWith("mlx5_1: NCCL staged 1 of its 1 channel(s) through host memory "
                                 "(no GPUDirect RDMA) although a GPU shares its PCIe switch (P"));
    CHECK_THAT(r.problems[0], Catch::Contains("nvidia-peermem is not loaded and DMA-BUF"));
    CHECK_THAT(r.problems[0], Catch::Contains("--allow-no-gdr"));
    CHECK(r.devices[0].gpu_direct == "yes");
    CHECK(r.devices[1].gpu_direct == "no");
    CHECK(r.ToJson()["devices"][1]["gpuDirect"]["used"] == "no");
    CHECK_THAT(r.Table(), Catch::Contains("GPUDirect RDMA: no (nearest GPU: P"));
  }
  SECTION("the GPU too far in NCCL's eyes: pairing or ACS, and a GDR level the user set") {
    Report r =
        JudgeWithLog("x NCCL INFO GPU Direct RDMA Disabled for GPU 0 / HCA 1 (distance 9 > 5)\n",
                     false, {{"NCCL_NET_GDR_LEVEL", "LOC"}});
    REQUIRE(r.problems.size() == 1);
    CHECK_THAT(r.problems[0], Catch::Contains("too far from it (distance 9 > 5"));
    CHECK_THAT(r.problems[0], Catch::Contains("pcie-acs"));
    CHECK_THAT(r.problems[0], Catch::Contains("NCCL_NET_GDR_LEVEL=LOC is set"));
  }
  SECTION("--allow-no-gdr makes it a warning") {
    Report r = JudgeWithLog("", true);
    CHECK(r.verdict == "pass");
    CHECK_THAT(All(r.warnings), Catch::Contains("mlx5_1: NCCL staged 1 of its 1 channel(s)"));
    CHECK_THAT(All(r.warnings), Catch::Contains("NCCL's log does not say why"));
  }
  SECTION("an HCA with some channels direct is noted, not failed (far ranks' channels)") {
    Report r = JudgeWithLog("x NCCL INFO Channel 02/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA\n");
    CHECK(r.verdict == "pass");
    CHECK(r.devices[1].gpu_direct == "partly");
    CHECK_THAT(All(r.devices[1].notes), Catch::Contains("staged 1 of its 2 channel(s)"));
  }
}

TEST_CASE("A DRA claim's pairs: each HCA on the PCIe root it was allocated for, a GPU under it") {
  link::NetlinkLinkOps links;
  auto inventory = [&](std::map<std::string, std::string> env) {
    env.emplace("KUBERDMA_CLAIM", "team-a/pairs");
    Validator v(Ib("mlx5_0,mlx5_1"), sysfs::SysfsRoot(Fx("sysfs/roce8")), links,
                Env(std::move(env)));
    return v.Inventory();
  };
  Report ok = inventory({{"KUBERDMA_CLAIM_PCIE_ROOTS", "mlx5_0=pci0000:15,mlx5_1=pci0000:15"}});
  CHECK(ok.problems.empty());
  CHECK_THAT(All(ok.devices[0].notes),
             Catch::Contains("claim team-a/pairs: paired with a GPU on pci0000:15 "
                             "(0000:18:00.0,0000:19:00.0)"));
  Report moved = inventory({{"KUBERDMA_CLAIM_PCIE_ROOTS", "mlx5_0=pci0000:37"}});
  REQUIRE(moved.problems.size() == 1);
  CHECK_THAT(moved.problems[0],
             Catch::Contains("mlx5_0 is on PCIe root pci0000:15, not the pci0000:37"));
  Report absent = inventory({{"KUBERDMA_CLAIM_PCIE_ROOTS", "mlx5_7=pci0000:ba"}});
  REQUIRE(absent.problems.size() == 1);
  CHECK_THAT(absent.problems[0], Catch::Contains("gave mlx5_7 (paired on pci0000:ba), which this "
                                                 "pod does not have"));
  Report none = inventory({});
  CHECK(none.problems.empty());
}

TEST_CASE("Each HCA's part of the bandwidth is held to a fraction of its line rate") {
  SECTION("a slow run fails naming the HCA, its fraction and the floor") {
    Judged j(500000000, "", true, 0.05);  // 5.4 GB/s busbw: 0.05 of 400 Gb/s
    CHECK(j.r.verdict == "fail");
    CHECK_THAT(j.Problems(), Catch::Matches("(.|\\n)*mlx5_0: 2\\.[0-9]+ GB/s is 0\\.05 of its 400 "
                                            "Gb/s line rate \\(50\\.0 GB/s\\); the floor is 0\\.50 "
                                            "\\(--min-line-rate\\)(.|\\n)*"));
    CHECK(j.r.ToJson()["devices"][0]["lineRate"]["fraction"].get<double>() < 0.06);
  }
  SECTION("--min-line-rate 0 turns it off; a lower floor passes the same run") {
    Judged off(500000000, "", true, 0.05, {}, [](Options& o) { o.min_line_rate = 0; });
    CHECK(off.r.verdict == "pass");
    Judged low(500000000, "", true, 0.05, {}, [](Options& o) { o.min_line_rate = 0.02; });
    CHECK(low.r.verdict == "pass");
  }
  SECTION("several local ranks: the pod's NICs moved busbw for each of them") {
    Judged one(500000000, "", true, 0.02);  // 13.4 GB/s busbw a rank: 0.13 of line rate
    CHECK(one.r.verdict == "fail");
    Judged four(500000000, "", true, 0.02, {}, nullptr, 4);  // four ranks' worth: 0.54
    INFO(four.Problems());
    CHECK(four.r.verdict == "pass");
    const auto& d = four.r.devices[0];
    CHECK(d.line_rate_fraction == Approx(4 * four.r.bandwidth.busbw_gbps * d.share / 50));
  }
  SECTION("the Socket transport's netdevs skip it, saying so") {
    link::NetlinkLinkOps links;
    Options o;
    o.transport = Transport::kSocket;
    o.expect = "lo";
    Validator v(o, sysfs::SysfsRoot(Fx("sysfs/roce8")), links, Env({}));
    Report r = v.Inventory();
    r.world_size = 2;
    CollectiveOutcome run;
    run.ranks = {{.rank = 0,
                  .reported = true,
                  .init_ok = true,
                  .ok = true,
                  .verified = true,
                  .seconds_per_iter = 0.05}};
    v.Judge(r, Snapshot{}, Snapshot{}, run, NcclLog{});
    REQUIRE(r.bandwidth.busbw_gbps > 0);
    CHECK_THAT(All(r.warnings), Catch::Contains("line-rate floor not applied: the Socket "
                                                "transport's netdevs report no port rate"));
  }
}

TEST_CASE("An HCA that carried almost nothing fails the run, by name") {
  Judged j(1000);
  CHECK(j.r.exit_code == 1);
  CHECK_THAT(j.Problems(), Catch::Contains("mlx5_1: carried"));
}

TEST_CASE("A channel through P2P or SHM fails the run: the collective bypassed the NICs") {
  Judged j(500000000, "x NCCL INFO Channel 02/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n");
  CHECK(j.r.exit_code == 1);
  CHECK_THAT(j.Problems(), Catch::Contains("channels went through P2P"));
}

TEST_CASE("A communicator that never came up is a timeout (exit 3) naming the ranks") {
  Judged j(0, "", false);
  CHECK(j.r.verdict == "timeout");
  CHECK(j.r.exit_code == 3);
  CHECK_THAT(j.Problems(), Catch::Contains("local rank(s) 0"));
}

TEST_CASE("The NCCL log parser is total: cut lines, huge logs and warning floods") {
  NcclLog log;
  // A log cut right after "NCCL WARN" when the watchdog killed the rank (threw out_of_range).
  for (std::string_view cut :
       {"host:1:2 [0] NCCL WARN", "NCCL WARN", "NCCL version ", "NCCL INFO Using network ",
        "NCCL INFO NET/IB : Using", "NCCL INFO Channel 00 via ", "NET/IB: GID "}) {
    log.Add(cut);
  }
  CHECK(log.warnings().size() == 2);
  for (int i = 0; i < 10000; ++i) log.Add("h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed");
  CHECK(log.warnings().size() == kMaxWarnings);
  CHECK(log.dropped_warnings() == 10002 - kMaxWarnings);
  char tmpl[] = "/tmp/krt-nccl-log-XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  struct Cleanup {
    std::string p;
    ~Cleanup() { ::unlink(p.c_str()); }
  } cleanup{tmpl};
  std::string head = "h:1:2 [0] NCCL INFO NCCL version 2.28.3+cuda13.0\n";
  std::string filler(1 << 20, 'x');
  filler.back() = '\n';
  REQUIRE(::write(fd, head.data(), head.size()) == static_cast<ssize_t>(head.size()));
  for (int i = 0; i < 20; ++i) {
    REQUIRE(::write(fd, filler.data(), filler.size()) == static_cast<ssize_t>(filler.size()));
  }
  std::string tail = "h:1:2 [0] NCCL WARN last words\n";
  REQUIRE(::write(fd, tail.data(), tail.size()) == static_cast<ssize_t>(tail.size()));
  ::close(fd);
  NcclLog big;
  REQUIRE(big.AddFile(tmpl));
  CHECK(big.version() == "2.28.3");
  REQUIRE_FALSE(big.warnings().empty());
  CHECK(big.warnings().back() == "last words");
  CHECK(big.skipped_bytes() ==
        head.size() + 20 * filler.size() + tail.size() - kMaxLogHeadBytes - kMaxLogTailBytes);
  CHECK_FALSE(big.AddFile(std::string(tmpl) + "-missing"));
}

TEST_CASE("NCCL falling back to sockets when IB was asked for is a failure") {
  Judged j(500000000, "x NCCL INFO Using network Socket\n");
  CHECK_THAT(j.Problems(), Catch::Contains("NCCL used network Socket, not IB"));
}

TEST_CASE("The GID each RoCE device's queue pairs used is read from 2.28's and older QP lines") {
  NcclLog log;
  log.AddText(
      "x NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n"
      "x NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1063 mtu 5 GID 3 (0/2010A0AFFFF0000) "
      "ctsFifoRkey=0x11 ctsFifoLkey=0x12\n"
      "x NCCL INFO NET/IB: Dev 1 Port 1 qpn 1064 mtu 5 GID 1 (80FE/3100D2FFFF3FB8BA) "
      "fifoRkey=0x1\n");
  REQUIRE(log.gids().size() == 2);
  const GidUse& g = log.gids().at("mlx5_0");
  CHECK(g.index == 3);
  CHECK(g.Ipv4() == "10.10.1.2");
  CHECK_FALSE(g.IsLinkLocal());
  CHECK(g.Address() == "::ffff:10.10.1.2");
  const GidUse& ll = log.gids().at("mlx5_1");
  CHECK(ll.index == 1);
  CHECK(ll.IsLinkLocal());
  CHECK(ll.Address() == "fe80::bab8:3fff:ffd2:31");
}

// A RoCE run in a pod with IPAM addresses (roce8-pod) whose QPs used `gid_line`'s GID on mlx5_0.
Report RoceRun(const std::string& gid_line, std::vector<std::string> own = {"10.10.1.2"},
               const std::string& fixture = Fx("sysfs/roce8-pod")) {
  link::NetlinkLinkOps links;
  sysfs::SysfsRoot root(fixture);
  Options o = Ib("mlx5_0");
  Validator v(o, root, links, Env({}));
  v.SetOwnAddresses(std::move(own));  // the pod's own addresses (roce8-pod: 10.10.<rail>.2)
  Report r = v.Inventory();
  Snapshot before, after;
  before.bytes = {{"mlx5_0", {0, 0}}};
  after.bytes = {{"mlx5_0", {1000000, 1000000}}};
  CollectiveOutcome run;
  run.ranks = {{.rank = 0,
                .reported = true,
                .init_ok = true,
                .ok = true,
                .verified = true,
                .seconds_per_iter = 0.01}};
  NcclLog log;
  log.AddText(
      "x NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB net1:10.10.1.2<0>\n"
      "x NCCL INFO Using network IB\n"
      "x NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n" +
      gid_line);
  v.Judge(r, before, after, run, log);
  return r;
}

TEST_CASE(
    "A RoCE run passes on a routable v2 GID and fails on link-local or v1, naming the HCA "
    "and the fix") {
  Report v2 = RoceRun(
      "x NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 9 mtu 5 GID 3 "
      "(0/2010A0AFFFF0000) x\n");
  INFO(v2.Table());
  CHECK(v2.verdict == "pass");
  CHECK(v2.devices[0].gid_index == 3);
  CHECK(v2.devices[0].gid_address == "10.10.1.2");
  CHECK(v2.devices[0].gid_type == "RoCE v2");
  CHECK(v2.ToJson()["devices"][0]["gid"]["index"] == 3);
  CHECK_THAT(v2.Table(), Catch::Contains("gid: index 3 10.10.1.2 (RoCE v2)"));
  Report ll = RoceRun(
      "x NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 9 mtu 5 GID 1 "
      "(80FE/3D2FFFF3FB8BA) x\n");
  CHECK(ll.exit_code == 1);
  std::string why = ll.problems.empty() ? "" : ll.problems.back();
  CHECK_THAT(why, Catch::Contains("mlx5_0") && Catch::Contains("link-local") &&
                      Catch::Contains("index 3") && Catch::Contains("ipam"));
  Report v1 = RoceRun(
      "x NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 9 mtu 5 GID 2 "
      "(0/2010A0AFFFF0000) x\n");
  CHECK(v1.exit_code == 1);
  CHECK_THAT(v1.problems.back(),
             Catch::Contains("RoCE v1") && Catch::Contains("NCCL_IB_ROCE_VERSION_NUM=2"));
}

TEST_CASE(
    "On a shared HCA a GID that is another pod's fails, naming the pod, the index used and the "
    "pod's own") {
  // Two pods' entries in mlx5_0's table, as the kernel keeps them for two macvlan children named
  // net1 (measured in the VM tier): 10.10.1.2 at index 3 (another pod), 10.10.1.9 at 6 (this one).
  char tmpl[] = "/tmp/kuberdma-gid-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  fs::copy(Fx("sysfs/roce8-pod"), dir,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  std::string port = sysfs::SysfsRoot(dir).Sys("class/infiniband/mlx5_0/ports/1/");
  REQUIRE(WriteFileAtomic(port + "gids/6", "0000:0000:0000:0000:0000:ffff:0a0a:0109\n"));
  REQUIRE(WriteFileAtomic(port + "gid_attrs/types/6", "RoCE v2\n"));
  REQUIRE(WriteFileAtomic(port + "gid_attrs/ndevs/6", "net1\n"));
  const std::string gid3 =
      "x NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 9 mtu 5 GID 3 (0/2010A0AFFFF0000) x\n";
  Report other = RoceRun(gid3, {"10.10.1.9"}, dir);
  CHECK(other.exit_code == 1);
  std::string why = other.problems.empty() ? "" : other.problems.back();
  CHECK_THAT(why, Catch::Contains("mlx5_0: NCCL's queue pairs used GID 3 (10.10.1.2), which is no "
                                  "address of this pod") &&
                      Catch::Contains("10.10.1.9") && Catch::Contains("another pod's entry") &&
                      Catch::Contains("index 6") && Catch::Contains("NCCL_IB_GID_INDEX=6"));
  Report own = RoceRun(gid3, {"10.10.1.2"}, dir);
  CHECK(own.verdict == "pass");
  Report none = RoceRun(gid3, {"192.168.0.5"}, dir);
  CHECK_THAT(none.problems.back(), Catch::Contains("this pod has no RoCE v2 entry on mlx5_0"));
  fs::remove_all(dir);
}

TEST_CASE("The NCCL environment forces the network, exact HCA list, no NVLS and no P2P/SHM") {
  link::NetlinkLinkOps links;
  sysfs::SysfsRoot root(Fx("sysfs/roce8"));
  Validator v(Ib("mlx5_0,mlx5_3"), root, links, Env({}));
  auto env = v.NcclEnv(v.Inventory());
  CHECK(env.at("NCCL_NET") == "IB");
  CHECK(env.at("NCCL_IB_HCA") == "=mlx5_0:1,mlx5_3:1");
  CHECK(env.at("NCCL_NVLS_ENABLE") == "0");
  CHECK(env.at("NCCL_P2P_DISABLE") == "1");
  CHECK(env.at("NCCL_SHM_DISABLE") == "1");
  CHECK(env.at("NCCL_RUNTIME_CONNECT") == "0");
  CHECK(env.at("NCCL_DEBUG") == "INFO");
}

}  // namespace
}  // namespace kuberdma::validator

namespace kuberdma::validator {
namespace {

TEST_CASE("The verbs probe is judged per rail: its result, the port counters, --min-busbw") {
  link::NetlinkLinkOps links;
  Options o = Ib("mlx5_0,mlx5_1,mlx5_2");
  o.transport = Transport::kVerbs;
  o.min_busbw_gbps = 10;
  Validator v(o, sysfs::SysfsRoot(Fx("sysfs/roce8")), links, Env({}));
  Report r = v.Inventory();
  REQUIRE(r.devices.size() == 3);
  Snapshot before;
  Snapshot after;
  for (const char* n : {"mlx5_0", "mlx5_1", "mlx5_2"}) {
    before.bytes[n] = {0, 0};
    before.word_counters[n] = after.word_counters[n] = true;
    after.bytes[n] = {1 << 20, 1 << 20};  // 4-byte words: 8 MiB, the probe wrote 4 MiB each way
  }
  after.bytes["mlx5_1"] = {0, 0};  // its probe completed, but not through this HCA
  const uint64_t written = 4u << 20;
  nlohmann::json rails = {{{"hca", "mlx5_0"},
                           {"ok", true},
                           {"bytes", written},
                           {"writeGBps", 45.0},
                           {"latencyUs", 2.5},
                           {"gidIndex", 3}},
                          {{"hca", "mlx5_1"},
                           {"ok", true},
                           {"bytes", written},
                           {"writeGBps", 45.0},
                           {"latencyUs", 2.5}},
                          {{"hca", "mlx5_2"},
                           {"ok", false},
                           {"error", "work request failed: transport retry counter exceeded"}}};
  v.JudgeVerbs(r, rails, before, after);
  CHECK(r.verdict == "fail");
  CHECK(r.exit_code == 1);
  std::string all;
  for (const auto& p : r.problems) all += p + "\n";
  CHECK_THAT(all,
             Catch::Contains("mlx5_1: its port counters moved 0 bytes, less than the 4194304"));
  CHECK_THAT(
      all, Catch::Contains("mlx5_2: the verbs probe failed: work request failed: transport retry"));
  CHECK_THAT(all, !Catch::Contains("mlx5_0"));
  CHECK(r.devices[0].carried_traffic);
  CHECK_FALSE(r.devices[1].carried_traffic);
  CHECK_THAT(r.devices[0].notes.back(), Catch::Contains("GID index 3, RDMA write 45.0000 GB/s"));
  CHECK(r.devices[0].line_rate_fraction == Approx(0.9));
  auto doc = r.ToJson();
  CHECK(doc["transport"] == "verbs");
  CHECK(doc["verbs"] == rails);

  Report slow = v.Inventory();
  rails[0]["writeGBps"] = 5.0;
  v.JudgeVerbs(slow, nlohmann::json::array({rails[0]}), before, after);
  CHECK_THAT(slow.problems.front(),
             Catch::Contains("mlx5_0: RDMA write 5.0000 GB/s is below --min-busbw 10.0000 GB/s"));
  CHECK_THAT(All(slow.problems),
             Catch::Contains("mlx5_0: RDMA write 5.00 GB/s is 0.10 of its 400 Gb/s line rate; "
                             "the floor is 0.50 (--min-line-rate)"));
}

}  // namespace
}  // namespace kuberdma::validator
