// SPDX-License-Identifier: Apache-2.0
// GPU end-to-end for rdma-validate, for a machine with one GPU or more (run by hand or by
// tests/gpu/run.sh; needs root and no other tool, not even `ip`). Two pod namespaces are joined by
// two veth pairs that the project's own `rdma` CNI moved into place (net1, net2 in each pod); one
// rank per pod, rank r on GPU r mod GPUs (ranks sharing a GPU keep their own NCCL_HOSTID, so they
// still talk over the network); NCCL's Socket transport stands in for IB. Scenarios:
//   pass       both interfaces in NCCL's list and up: must pass, both carrying traffic
//   left-out   NCCL told to use net1 only: must fail, naming net2
//   down       net2 down in pod A: must fail, naming net2
// plus the validator's busbw against a bare NCCL loop on the same setup, and its wall time.
//
//   gpu_e2e --rdma PATH --validate PATH [--bare PATH] [--out DIR] [--size 256M] [--gpus N]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kuberdma/base/files.h"
#include "kuberdma/sim/sim_node.h"

namespace {

using kuberdma::sim::SimNode;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

int g_gpus = 1;  // rank r runs on GPU r % g_gpus

struct RankRun {
  int exit_code = -1;
  json report;
  std::string out;
};

int Wait(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

pid_t SpawnInPod(const SimNode& node, const std::string& pod, const std::vector<std::string>& argv,
                 int gpu, const std::string& out_file) {
  int fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                  "CUDA_VISIBLE_DEVICES=" + std::to_string(gpu % g_gpus),
                                  "HOME=/tmp"};
  if (const char* ld = std::getenv("LD_LIBRARY_PATH"))
    env.push_back(std::string("LD_LIBRARY_PATH=") + ld);
  auto pid = kuberdma::testing::SpawnIn(node.Pod(pod), argv, env, -1, fd, fd);
  ::close(fd);
  return pid ? *pid : -1;
}

// Runs rdma-validate in both pods at once; rank 0 in pod A.
std::vector<RankRun> Validate(const SimNode& node, const std::vector<std::string>& pods,
                              const std::string& bin, const std::string& out,
                              const std::string& tag, const std::string& size,
                              const std::string& nccl_devices, int timeout,
                              const std::vector<std::string>& extra = {}) {
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> argv = {bin,
                                     "--mode",
                                     "multi-pod",
                                     "--transport",
                                     "socket",
                                     "--expect",
                                     "net1,net2",
                                     "--rank",
                                     std::to_string(r),
                                     "--world-size",
                                     "2",
                                     "--comm-id",
                                     "10.1.0.1:29500",
                                     "--size",
                                     size,
                                     "--iters",
                                     "20",
                                     "--timeout",
                                     std::to_string(timeout),
                                     "--json",
                                     out + "/" + tag + ".rank" + std::to_string(r) + ".json",
                                     "--log-dir",
                                     out + "/" + tag + ".logs" + std::to_string(r)};
    if (!nccl_devices.empty()) {
      argv.push_back("--nccl-devices");
      argv.push_back(nccl_devices);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::filesystem::create_directories(out + "/" + tag + ".logs" + std::to_string(r));
    pids.push_back(SpawnInPod(node, pods[static_cast<size_t>(r)], argv, r,
                              out + "/" + tag + ".rank" + std::to_string(r) + ".txt"));
  }
  std::vector<RankRun> runs(2);
  for (int r = 0; r < 2; ++r) {
    runs[static_cast<size_t>(r)].exit_code = Wait(pids[static_cast<size_t>(r)]);
    auto text = kuberdma::ReadFile(out + "/" + tag + ".rank" + std::to_string(r) + ".json");
    if (text) runs[static_cast<size_t>(r)].report = json::parse(*text, nullptr, false);
    auto log = kuberdma::ReadFile(out + "/" + tag + ".rank" + std::to_string(r) + ".txt");
    if (log) runs[static_cast<size_t>(r)].out = *log;
  }
  return runs;
}

bool Mentions(const RankRun& r, const std::string& what) {
  return r.report.is_object() && r.report.contains("problems") &&
         r.report["problems"].dump().find(what) != std::string::npos;
}

// busbw of the bare loop's rank 0 for `collective` at each of `sizes`, swept on one
// communicator as rdma-validate sweeps them (0 for a size it did not report), run in both pods.
std::vector<double> Bare(const SimNode& node, const std::vector<std::string>& pods,
                         const std::string& bare, const std::string& out,
                         const std::string& collective, const std::vector<size_t>& sizes) {
  std::string list;
  for (size_t b : sizes) list += (list.empty() ? "" : ",") + std::to_string(b);
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pids.push_back(SpawnInPod(
        node, pods[static_cast<size_t>(r)],
        {"/usr/bin/env", "NCCL_COMM_ID=10.1.0.1:29502", "NCCL_NET=Socket",
         "NCCL_SOCKET_IFNAME==net1,net2", "NCCL_IB_DISABLE=1", "NCCL_P2P_DISABLE=1",
         "NCCL_SHM_DISABLE=1", "NCCL_NVLS_ENABLE=0", "NCCL_HOSTID=bare-r" + std::to_string(r), bare,
         std::to_string(r), "2", list, "20", collective},
        r, out + "/bare." + collective + ".rank" + std::to_string(r) + ".txt"));
  }
  for (auto p : pids) Wait(p);
  std::vector<double> busbw(sizes.size(), 0.0);
  auto text = kuberdma::ReadFile(out + "/bare." + collective + ".rank0.txt");
  for (size_t pos = text ? text->find("{\"rank\"") : std::string::npos; pos != std::string::npos;
       pos = text->find("{\"rank\"", pos + 1)) {
    auto j = json::parse(text->substr(pos, text->find('\n', pos) - pos), nullptr, false);
    if (j.is_discarded()) continue;
    auto at = std::find(sizes.begin(), sizes.end(), j.value("bytes", size_t{0}));
    if (at != sizes.end()) busbw[static_cast<size_t>(at - sizes.begin())] = j.value("busbw", 0.0);
  }
  return busbw;
}

// The median; of an even count, the mean of the middle two (the upper one alone biases up).
double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// A place's `wrong`: the count of wrong elements, where the report has one. rdma-validate writes
// null (nccl-tests' `N/A`) where a result cannot be checked, in place alltoall and sendrecv, and
// a place without the field checked nothing. Anything else in the field is a broken report and
// counts as one wrong element, so the check fails rather than the program.
uint64_t WrongOf(const json& place) {
  if (!place.is_object() || !place.contains("wrong") || place["wrong"].is_null()) return 0;
  const json& w = place["wrong"];
  return w.is_number_unsigned() ? w.get<uint64_t>() : 1;
}

int g_repeats = 5;   // rounds of (rdma-validate, then the bare loop) per collective
int g_missed = 0;    // ratio targets missed, said in the summary
int g_unjudged = 0;  // ratios the bare loop's own spread cannot resolve

// The verdict on rdma-validate's busbw against the bare loop's, both measured `ratios.size()`
// times, alternating: the median ratio against `target`, unless the bare loop's own spread
// between rounds (max - min over the median) is wider than the margin being judged, when no
// verdict is honest. Returns the words printed after the figures.
std::string JudgeRatio(const std::vector<double>& mine, const std::vector<double>& theirs,
                       double target) {
  std::vector<double> ratios;
  for (size_t i = 0; i < mine.size() && i < theirs.size(); ++i) {
    if (theirs[i] > 0) ratios.push_back(mine[i] / theirs[i]);
  }
  if (ratios.empty()) {
    ++g_missed;
    return "no bare figure: MISSED";
  }
  auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  double bare_mid = MedianOf(theirs);
  auto [blo, bhi] = std::minmax_element(theirs.begin(), theirs.end());
  double spread = bare_mid > 0 ? (*bhi - *blo) / bare_mid : 1;
  double median = MedianOf(ratios);
  char b[200];
  std::snprintf(b, sizeof b,
                "ratio median %.3f (%.3f..%.3f over %zu rounds), bare spread %.0f%%: ", median, *lo,
                *hi, ratios.size(), 100 * spread);
  std::string words = b;
  if (median >= target) return words + "target >= " + std::to_string(target).substr(0, 4) + " met";
  if (spread > 2 * (1 - target)) {
    ++g_unjudged;
    return words + "not judged (the bare loop alone varies more than the " +
           std::to_string(static_cast<int>(100 * (1 - target))) + "% being judged)";
  }
  ++g_missed;
  return words + "target >= " + std::to_string(target).substr(0, 4) + " MISSED";
}

// Every collective through rdma-validate (a 64M..256M sweep, out of place and in place, every
// result checked) and through the bare loop at the same sizes, alternating g_repeats times: each
// size's median ratio judged against 0.95, and the wall time of a sweep.

template <typename Check>
void Collectives(const SimNode& node, const std::vector<std::string>& pods,
                 const std::string& validate, const std::string& bare, const std::string& out,
                 Check& check) {
  std::printf(
      "\nscenario collectives: each swept 64M..256M, checked, against the bare loop (x%d, "
      "alternating)\n",
      g_repeats);
  const std::vector<size_t> sizes = {size_t{64} << 20, size_t{256} << 20};
  for (const char* c : {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
                        "reduce", "sendrecv"}) {
    std::vector<double> mine[2], theirs[2], walls;
    uint64_t wrong = 0;
    bool passed = true;
    for (int round = 0; round < g_repeats; ++round) {
      auto t0 = Clock::now();
      auto runs = Validate(node, pods, validate, out, std::string("coll-") + c, "64M", "", 90,
                           {"--collective", c, "-b", "64M", "-e", "256M", "-f", "4"});
      walls.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      passed = passed && runs[0].exit_code == 0 && runs[1].exit_code == 0;
      const json& rep = runs[0].report;
      for (size_t k = 0; rep.is_object() && k < rep["collectives"][0]["sizes"].size() && k < 2;
           ++k) {
        const json& sz = rep["collectives"][0]["sizes"][k];
        mine[k].push_back(sz["outOfPlace"].value("busbwGBps", 0.0));
        wrong += WrongOf(sz["outOfPlace"]);
        if (sz.contains("inPlace")) wrong += WrongOf(sz["inPlace"]);
      }
      auto bare_bw = Bare(node, pods, bare, out, c, sizes);
      for (int k = 0; k < 2; ++k) theirs[k].push_back(bare_bw[static_cast<size_t>(k)]);
      if (round == 0 && c == std::string("alltoall")) std::fputs(runs[0].out.c_str(), stdout);
    }
    char wall[64];
    std::snprintf(wall, sizeof wall, "; sweep %.1f s", MedianOf(walls));
    check(passed && wrong == 0, std::string(c) + ": pass, 0 wrong" + wall);
    for (int k = 0; k < 2; ++k) {
      std::printf("        %s %s: %.3f vs bare %.3f GB/s (medians); %s\n", c,
                  k == 0 ? "64M" : "256M", MedianOf(mine[k]), MedianOf(theirs[k]),
                  JudgeRatio(mine[k], theirs[k], 0.95).c_str());
    }
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--collective", "all_reduce", "-d", "bfloat16", "-o", "max"},
        {"--collective", "all_reduce", "-d", "int8", "-o", "sum"},
        {"--collective", "reduce_scatter", "-d", "half", "-o", "avg"},
        {"--collective", "broadcast", "-d", "double", "-r", "1"}}) {
    std::string tag = "coll";
    for (const auto& a : args) tag += "-" + (a[0] == '-' ? a.substr(a.find_first_not_of('-')) : a);
    auto runs = Validate(node, pods, validate, out, tag, "16M", "", 60, args);
    check(runs[0].exit_code == 0 && runs[1].exit_code == 0, tag + ": both ranks pass, checked");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rdma-validate GPU end-to-end"};
  std::string rdma, validate, bare, out = "/tmp/kuberdma-gpu-e2e", size = "256M";
  app.add_option("--rdma", rdma, "the rdma CNI binary")->required();
  app.add_option("--validate", validate, "the rdma-validate binary")->required();
  app.add_option("--bare", bare, "the bare NCCL AllReduce loop (bench/nccl_bare)");
  app.add_option("--out", out, "where reports and logs go");
  app.add_option("--size", size, "AllReduce size");
  app.add_option("--repeats", g_repeats, "alternating rounds per collective (median and spread)")
      ->check(CLI::Range(1, 50));
  app.add_option("--gpus", g_gpus, "GPUs to spread the two ranks over (1: both share GPU 0)")
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  if (geteuid() != 0) {
    std::fprintf(stderr, "gpu_e2e needs root (namespaces)\n");
    return 77;
  }
  std::filesystem::create_directories(out);
  kuberdma::sim::RemoveStaleNamespaces();
  std::string fixture = out + "/sysfs";
  std::filesystem::remove_all(fixture);
  kuberdma::sim::WriteMiniNode(fixture, 4, "hca");
  SimNode node(fixture, {});
  auto& links = node.links();
  // Two cables: hca0 <-> hca1 and hca2 <-> hca3; pod A gets hca0, hca2 and pod B hca1, hca3.
  if (!node.net().CreateVeth(node.node(), "hca0", node.node(), "hca1") ||
      !node.net().CreateVeth(node.node(), "hca2", node.node(), "hca3")) {
    std::fprintf(stderr, "cannot create veth pairs\n");
    return 2;
  }
  std::vector<std::string> pods = {node.AddPod("pod-a"), node.AddPod("pod-b")};
  const char* hcas[2][2] = {{"hca0", "hca2"}, {"hca1", "hca3"}};
  int failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    std::printf("  %s  %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++failures;
  };
  std::printf("setup: two pods joined by two veth pairs, attached by the rdma CNI; %s\n",
              g_gpus == 1 ? "both ranks share GPU 0" : "one GPU per rank");
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 2; ++i) {
      std::string conf =
          R"({"cniVersion":"1.0.0","name":"rdma-net","type":"rdma","mtu":9000,"linkState":"up","device":")" +
          std::string(hcas[p][i]) + R"(","stateDir":")" + node.state_dir() + R"("})";
      auto r = node.Run(rdma, {"ADD", "pod" + std::to_string(p), pods[static_cast<size_t>(p)],
                               "net" + std::to_string(i + 1), conf});
      check(r.exit_code == 0, "CNI ADD pod " + std::string(p == 0 ? "A" : "B") + " net" +
                                  std::to_string(i + 1) + " <- " + hcas[p][i] +
                                  (r.exit_code == 0 ? "" : ": " + r.out));
    }
    auto pod = node.Pod(pods[static_cast<size_t>(p)]);
    auto lo = links.GetByName(pod, "lo");
    if (lo) (void)links.Change(pod, lo->ifindex, {.up = true});
    for (int i = 0; i < 2; ++i) {
      auto l = links.GetByName(pod, "net" + std::to_string(i + 1));
      if (!l) continue;
      auto a = node.addrs().AddAddress(
          pod, l->ifindex,
          *kuberdma::link::ParsePrefix("10." + std::to_string(i + 1) + ".0." +
                                       std::to_string(p + 1) + "/24"));
      check(a.has_value(), "address 10." + std::to_string(i + 1) + ".0." + std::to_string(p + 1) +
                               " on net" + std::to_string(i + 1));
    }
  }

  std::printf("\nscenario pass: both interfaces in NCCL's list and up\n");
  auto t0 = Clock::now();
  auto pass = Validate(node, pods, validate, out, "pass", size, "", 60);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int r = 0; r < 2; ++r) {
    const auto& rr = pass[static_cast<size_t>(r)];
    check(rr.exit_code == 0,
          "rank " + std::to_string(r) + " exit 0 (got " + std::to_string(rr.exit_code) + ")");
    if (rr.report.is_object()) {
      for (const auto& d : rr.report["devices"]) {
        check(d["carriedTraffic"].get<bool>() && d["chosenByNccl"].get<bool>(),
              "rank " + std::to_string(r) + " " + d["name"].get<std::string>() +
                  ": chosen by NCCL, " +
                  std::to_string(d["bytesSent"].get<uint64_t>() +
                                 d["bytesReceived"].get<uint64_t>()) +
                  " bytes, share " + std::to_string(d["share"].get<double>()));
      }
    }
    std::fputs(rr.out.c_str(), stdout);
  }
  double busbw =
      pass[0].report.is_object() ? pass[0].report["collective"]["busbwGBps"].get<double>() : 0;
  std::printf("  validation wall time (both ranks): %.1f s (target < 15 s)\n", wall);

  if (!bare.empty()) {
    std::printf("\nbench: bare NCCL AllReduce loop on the same setup\n");
    double bare_bw = Bare(node, pods, bare, out, "all_reduce", {size_t{256} << 20}).front();
    std::printf("  busbw: rdma-validate %.3f GB/s, bare NCCL loop %.3f GB/s, one round each: %s\n",
                busbw, bare_bw, JudgeRatio({busbw}, {bare_bw}, 0.95).c_str());
  }

  if (!bare.empty()) Collectives(node, pods, validate, bare, out, check);

  std::printf("\nscenario left-out: NCCL told to use net1 only\n");
  auto left = Validate(node, pods, validate, out, "leftout", "64M", "net1", 30);
  for (int r = 0; r < 2; ++r) {
    const auto& rr = left[static_cast<size_t>(r)];
    check(rr.exit_code == 1,
          "rank " + std::to_string(r) + " exit 1 (got " + std::to_string(rr.exit_code) + ")");
    check(Mentions(rr, "net2: NCCL did not use it"),
          "rank " + std::to_string(r) + " names net2 as unused by NCCL");
  }
  std::fputs(left[0].out.c_str(), stdout);

  std::printf("\nscenario down: net2 down in pod A\n");
  {
    auto pod = node.Pod(pods[0]);
    auto l = links.GetByName(pod, "net2");
    if (l) (void)links.Change(pod, l->ifindex, {.up = false});
  }
  auto down = Validate(node, pods, validate, out, "down", "64M", "", 15);
  check(down[0].exit_code == 1, "rank 0 exit 1 (got " + std::to_string(down[0].exit_code) + ")");
  check(Mentions(down[0], "net2: link is"), "rank 0 names net2 as down");
  check(down[1].exit_code == 3 || down[1].exit_code == 1,
        "rank 1 fails or times out (got " + std::to_string(down[1].exit_code) + ")");
  std::fputs(down[0].out.c_str(), stdout);
  std::fputs(down[1].out.c_str(), stdout);

  for (int p = 0; p < 2; ++p) {
    for (int i = 2; i >= 1; --i) {
      std::string conf = R"({"cniVersion":"1.0.0","name":"rdma-net","type":"rdma","stateDir":")" +
                         node.state_dir() + R"("})";
      auto r = node.Run(rdma, {"DEL", "pod" + std::to_string(p), pods[static_cast<size_t>(p)],
                               "net" + std::to_string(i), conf});
      check(r.exit_code == 0,
            "CNI DEL pod " + std::string(p == 0 ? "A" : "B") + " net" + std::to_string(i));
    }
  }
  std::printf("\n%s: %d failure(s); benchmark ratios: %d target(s) missed, %d not judged\n",
              failures == 0 ? "PASS" : "FAIL", failures, g_missed, g_unjudged);
  return failures == 0 ? 0 : 1;
}
