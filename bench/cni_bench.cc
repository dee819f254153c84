// SPDX-License-Identifier: Apache-2.0
// CNI benchmark: ADD+DEL of `rdma` against the kernel's floor (a bare netlink move in and out, no
// process start) and against Debian's `host-device` plugin doing the same, on identical veths in
// one private node namespace, interleaved so all three see the same machine state. Also VERSION,
// which for `rdma` must start no runtime; and shared mode: `rdma`'s macvlan child against Debian's
// `macvlan` plugin on the same parent. Prints medians and the ratios the targets are set on.
//
//   cni_bench [--iterations N] [--rdma PATH] [--host-device PATH] [--macvlan PATH] [--json FILE]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/kubelet.h"
#include "kuberdma/testing/test_net.h"

namespace {

using kuberdma::sim::CniCall;
using kuberdma::sim::SimNode;
using Clock = std::chrono::steady_clock;

// How long a netns move's deferred kernel work is given before the next timed move.
constexpr auto kSettle = std::chrono::milliseconds(5);

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Stats {
  double median = 0;
  double p90 = 0;
};

Stats Summarise(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)]};
}

// Children's CPU time (user+sys) since the last call: where a plugin's own time goes.
double ChildCpuMs() {
  static double last = 0;
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  double now = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
               static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  double d = now - last;
  last = now;
  return d;
}

// Runs `binary` with CNI_COMMAND=VERSION the way a runtime execs a plugin (posix_spawn from the
// node's namespace, config on stdin, result read from a pipe) and returns the wall time in ms,
// or a negative number when it fails or prints no supportedVersions.
double TimeVersion(const std::string& binary) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::string bin = binary;
  char* argv[] = {bin.data(), nullptr};
  char env0[] = "CNI_COMMAND=VERSION";
  char env1[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env0, env1, nullptr};
  auto t0 = Clock::now();
  pid_t pid = -1;
  int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  static const char kConf[] = R"({"cniVersion":"1.0.0"})";
  if (err == 0) (void)!write(in[1], kConf, sizeof kConf - 1);
  close(in[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  if (err == 0) waitpid(pid, &status, 0);
  double ms = Ms(Clock::now() - t0);
  bool ok = err == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
            text.find("supportedVersions") != std::string::npos;
  return ok ? ms : -1;
}

// Parses the plugin's debug line "timing: V ms in the verb, K ms of it in kernel link changes".
void AddTiming(const std::string& err, double* verb, double* kernel) {
  auto at = err.find("timing: ");
  if (at == std::string::npos) return;
  double v = 0, k = 0;
  if (std::sscanf(err.c_str() + at, "timing: %lf ms in the verb, %lf ms", &v, &k) == 2) {
    *verb += v;
    *kernel += k;
  }
}

bool Ok(const kuberdma::sim::CniRun& r, const char* what) {
  if (r.exit_code == 0) return true;
  std::fprintf(stderr, "%s failed (exit %d): %s %s\n", what, r.exit_code, r.out.c_str(),
               r.err.c_str());
  return false;
}

// Shared mode: rdma's macvlan child against Debian's macvlan plugin, on the same parent, no IPAM
// (both create one child in the pod and delete it), alternating. Prints both and the ratio.
bool ChildBench(SimNode& node, const std::string& pod, const std::string& rdma_bin,
                const std::string& macvlan_bin, int iterations, nlohmann::json* out) {
  const std::string rdma_conf =
      R"({"cniVersion":"1.0.0","name":"bench-child","type":"rdma","mode":"macvlan",)"
      R"("device":"hca0","linkState":"up","stateDir":")" +
      node.state_dir() + "\"}";
  const std::string mv_conf =
      R"({"cniVersion":"1.0.0","name":"bench-mv","type":"macvlan","master":"hca0",)"
      R"("mode":"bridge","ipam":{}})";
  std::vector<double> rdma_ms, mv_ms;
  auto cycle = [&](const std::string& bin, const std::string& conf, std::vector<double>* into) {
    auto t0 = Clock::now();
    if (!Ok(node.Run(bin, {"ADD", "bench", pod, "net1", conf}), "child ADD")) return false;
    if (!Ok(node.Run(bin, {"DEL", "bench", pod, "net1", conf}), "child DEL")) return false;
    into->push_back(Ms(Clock::now() - t0));
    return true;
  };
  for (int i = 0; i < iterations; ++i) {
    bool rdma_first = i % 2 == 0;
    std::this_thread::sleep_for(kSettle);
    if (!cycle(rdma_first ? rdma_bin : macvlan_bin, rdma_first ? rdma_conf : mv_conf,
               rdma_first ? &rdma_ms : &mv_ms)) {
      return false;
    }
    std::this_thread::sleep_for(kSettle);
    if (!cycle(rdma_first ? macvlan_bin : rdma_bin, rdma_first ? mv_conf : rdma_conf,
               rdma_first ? &mv_ms : &rdma_ms)) {
      return false;
    }
  }
  Stats r = Summarise(rdma_ms), m = Summarise(mv_ms);
  std::printf("\n  shared mode (a child of the HCA's netdev per pod, no IPAM):\n");
  std::printf("  %-44s %7.2fms %7.2fms\n", "(d) rdma mode macvlan ADD+DEL", r.median, r.p90);
  std::printf("  %-44s %7.2fms %7.2fms\n", "(e) macvlan ADD+DEL (Debian 1.1.1)", m.median, m.p90);
  std::printf("  rdma macvlan / macvlan = %.3fx  (target <= 1.0x)  %s\n", r.median / m.median,
              r.median <= m.median ? "MET" : "MISSED");
  (*out)["rdma_macvlan_ms"] = r.median;
  (*out)["macvlan_ms"] = m.median;
  (*out)["rdma_macvlan_vs_macvlan"] = r.median / m.median;
  return true;
}

// The CNI's allocation check (ADD asks the device plugin, which asks the kubelet's pod-resources
// API, which HCAs the pod has): rdma ADD+DEL with it against without it, alternating, with the
// real rdma-device-plugin and the kubelet stand-in's pod-resources in the node's namespace.
bool CheckBench(SimNode& node, const std::string& pod, const std::string& rdma_bin,
                const std::string& dp_bin, const std::string& fixture, int iterations,
                double floor_ms, nlohmann::json* out) {
  std::string dir = node.state_dir() + "/kubelet";
  (void)kuberdma::MakeDirs(dir);
  kuberdma::standins::KubeletStandIn kubelet(dir);
  (void)kuberdma::WriteFileAtomic(dir + "/dp.json", R"({"configList":[{"resourceName":"hca",)"
                                                    R"("rdmaHcaMax":1,"policy":"per-hca"}]})");
  kuberdma::UniqueFd log(::open((dir + "/dp.log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  auto dp = kuberdma::testing::SpawnIn(
      node.node(),
      {dp_bin, "--config", dir + "/dp.json", "--device-plugin-dir", dir, "--sysfs-root", fixture,
       "--metrics-port", "-1", "--node-config", dir + "/none.json", "--allocations-dir",
       node.allocations_dir(), "--pod-resources", kubelet.pod_resources_socket()},
      {"PATH=/usr/bin:/bin"}, -1, log.get(), log.get());
  if (!dp) return false;
  struct Stop {
    pid_t pid;
    ~Stop() {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  } stop{*dp};
  if (!kubelet.WaitFor([&] { return !kubelet.Lists("rdma/hca").empty(); },
                       std::chrono::seconds(10))) {
    return false;
  }
  std::vector<std::string> ids;
  for (const auto& d : kubelet.Lists("rdma/hca").back().devices()) ids.push_back(d.id());
  kubelet.AssignPod("default", "bench-pod", "rdma/hca", ids);
  const std::string conf =
      R"({"cniVersion":"1.0.0","name":"bench-check","type":"rdma","device":"hca0","stateDir":")" +
      node.state_dir() + "\"}";
  std::vector<double> with_ms, without_ms;
  auto cycle = [&](bool check) {
    (void)kuberdma::WriteFileAtomic(node.node_config_path(),
                                    check ? "{}" : R"({"allowUnallocated": true})");
    kuberdma::sim::CniCall add{"ADD", "bench", pod, "net1", conf};
    add.args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=bench-pod";
    kuberdma::sim::CniCall del = add;
    del.command = "DEL";
    auto t0 = Clock::now();
    if (!Ok(node.Run(rdma_bin, add), "checked ADD") || !Ok(node.Run(rdma_bin, del), "DEL")) {
      return false;
    }
    (check ? with_ms : without_ms).push_back(Ms(Clock::now() - t0));
    return true;
  };
  for (int i = 0; i < iterations; ++i) {
    for (bool check : {i % 2 == 0, i % 2 != 0}) {
      std::this_thread::sleep_for(kSettle);
      if (!cycle(check)) return false;
    }
  }
  (void)kuberdma::WriteFileAtomic(node.node_config_path(), R"({"allowUnallocated": true})");
  Stats w = Summarise(with_ms), wo = Summarise(without_ms);
  std::printf(
      "\n  the allocation check (ADD asks rdma-device-plugin, which asks pod-resources):\n");
  std::printf("  %-44s %7.2fms %7.2fms\n", "(f) rdma ADD+DEL with the check", w.median, w.p90);
  std::printf("  %-44s %7.2fms %7.2fms\n", "(g) rdma ADD+DEL without it", wo.median, wo.p90);
  double off_floor = (w.median - wo.median) / floor_ms;
  std::printf(
      "  with / without = %.3fx; its cost as a share of the floor = %.1f%%  "
      "(target <= 5%%)  %s\n",
      w.median / wo.median, 100.0 * off_floor, off_floor <= 0.05 ? "MET" : "MISSED");
  (*out)["check_ms"] = w.median;
  (*out)["no_check_ms"] = wo.median;
  (*out)["check_share_of_floor"] = off_floor;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kube-rdma CNI benchmark: rdma vs the kernel floor vs host-device"};
  int iterations = 40;
  std::string rdma_bin = KUBERDMA_RDMA_BIN;
  std::string hd_bin = "/usr/lib/cni/host-device";
  std::string mv_bin = "/usr/lib/cni/macvlan";
  std::string dp_bin = KUBERDMA_DP_BIN;
  std::string json_out;
  app.add_option("--iterations", iterations, "ADD+DEL cycles per contender")
      ->check(CLI::Range(3, 100000));
  app.add_option("--rdma", rdma_bin, "the rdma binary");
  app.add_option("--host-device", hd_bin, "Debian's host-device plugin");
  app.add_option("--macvlan", mv_bin, "Debian's macvlan plugin (the shared-mode peer)");
  app.add_option("--device-plugin", dp_bin, "rdma-device-plugin (the allocation check's peer)");
  app.add_option("--json", json_out, "also write the figures as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  if (geteuid() != 0) {
    std::fprintf(stderr, "cni_bench needs root (it creates network namespaces)\n");
    return 2;
  }
  if (access(hd_bin.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "%s not found: apt-get install containernetworking-plugins\n",
                 hd_bin.c_str());
    return 2;
  }
  kuberdma::sim::RemoveStaleNamespaces();
  std::string fixture =
      std::filesystem::temp_directory_path() / ("krt-bench-" + std::to_string(getpid()));
  kuberdma::sim::WriteMiniNode(fixture, 1, "hca");
  struct Cleanup {
    std::string d;
    ~Cleanup() { std::filesystem::remove_all(d); }
  } cleanup{fixture};
  SimNode node(fixture, {"hca0", "hd0", "fl0"});
  std::string pod = node.AddPod("bench-pod");
  auto pod_ns = node.Pod(pod);
  auto& links = node.links();

  const std::string rdma_conf =
      R"({"cniVersion":"1.0.0","name":"bench","type":"rdma","stateDir":")" + node.state_dir() +
      R"(","logLevel":"debug"})";
  const std::string hd_conf =
      R"({"cniVersion":"0.3.1","name":"bench-hd","type":"host-device","device":"hd0"})";

  std::vector<double> floor_ms, rdma_ms, hd_ms, rdma_ver, hd_ver;
  double rdma_cpu = 0, hd_cpu = 0;
  double verb_ms = 0, kernel_ms = 0;  // summed over rdma's ADD and DEL, from its debug log
  ChildCpuMs();
  // Each contender as one step. A netns move leaves work to the kernel (RCU grace periods, the
  // netdev todo list) that the next move pays for if it comes at once: every step starts kSettle
  // after the last, untimed, and the order still rotates every iteration so that no contender
  // is always the one after another.
  auto floor_step = [&]() -> bool {
    // (a) The floor: one RTM_NEWLINK in (renamed), one out, no process, and nothing else timed:
    // each lookup happens before its move, outside the clock. A floor is a lower bound. The
    // moves are kSettle apart, as rdma's ADD and DEL are a process exec apart: back to back,
    // the second move waits for the first's deferred work (measured: 42-43 ms instead of 36).
    auto fl = links.GetByName(node.node(), "fl0");
    auto t0 = Clock::now();
    if (!links.MoveTo(node.node(), fl->ifindex, pod_ns, {.name = "net1"})) return false;
    double floor = Ms(Clock::now() - t0);
    auto in_pod = links.GetByName(pod_ns, "net1");
    std::this_thread::sleep_for(kSettle);
    t0 = Clock::now();
    if (!links.MoveTo(pod_ns, in_pod->ifindex, node.node(), {.name = "fl0"})) return false;
    floor_ms.push_back(floor + Ms(Clock::now() - t0));
    return true;
  };
  auto rdma_step = [&]() -> bool {
    // (b) rdma ADD + DEL through the CNI protocol.
    auto t0 = Clock::now();
    auto add = node.Run(rdma_bin, {"ADD", "bench", pod, "net1", rdma_conf});
    if (!Ok(add, "rdma ADD")) return false;
    auto del = node.Run(rdma_bin, {"DEL", "bench", pod, "net1", rdma_conf});
    if (!Ok(del, "rdma DEL")) return false;
    rdma_ms.push_back(Ms(Clock::now() - t0));
    AddTiming(add.err, &verb_ms, &kernel_ms);
    AddTiming(del.err, &verb_ms, &kernel_ms);
    rdma_cpu += ChildCpuMs();
    return true;
  };
  auto hd_step = [&]() -> bool {
    // (c) host-device ADD + DEL.
    auto t0 = Clock::now();
    if (!Ok(node.Run(hd_bin, {"ADD", "bench", pod, "net1", hd_conf}), "host-device ADD")) {
      return false;
    }
    if (!Ok(node.Run(hd_bin, {"DEL", "bench", pod, "net1", hd_conf}), "host-device DEL")) {
      return false;
    }
    hd_ms.push_back(Ms(Clock::now() - t0));
    hd_cpu += ChildCpuMs();
    return true;
  };
  std::function<bool()> steps[] = {floor_step, rdma_step, hd_step};
  for (int i = 0; i < iterations; ++i) {
    ChildCpuMs();  // the previous step's children are not the next step's
    for (int k = 0; k < 3; ++k) {
      std::this_thread::sleep_for(kSettle);
      if (!steps[(i + k) % 3]()) return 1;
    }

    double rv = TimeVersion(rdma_bin);
    double hv = TimeVersion(hd_bin);
    if (rv < 0 || hv < 0) {
      std::fprintf(stderr, "VERSION failed (rdma %.2f, host-device %.2f)\n", rv, hv);
      return 1;
    }
    rdma_ver.push_back(rv);
    hd_ver.push_back(hv);
    ChildCpuMs();
  }
  Stats f = Summarise(floor_ms), r = Summarise(rdma_ms), h = Summarise(hd_ms);
  Stats rv = Summarise(rdma_ver), hv = Summarise(hd_ver);
  double vs_floor = r.median / f.median;
  double vs_hd = r.median / h.median;
  double ver_ratio = rv.median / hv.median;
  std::printf(
      "kube-rdma CNI benchmark: %d ADD+DEL cycles each, veths in a private node namespace\n\n",
      iterations);
  std::printf("  %-44s %9s %9s %12s\n", "contender", "median", "p90", "child CPU");
  std::printf("  %-44s %7.2fms %7.2fms %12s\n", "(a) floor: bare netlink move in + out", f.median,
              f.p90, "-");
  std::printf("  %-44s %7.2fms %7.2fms %10.2fms\n", "(b) rdma ADD+DEL (CNI protocol)", r.median,
              r.p90, rdma_cpu / iterations);
  std::printf("  %-44s %7.2fms %7.2fms %10.2fms\n", "(c) host-device ADD+DEL (Debian 1.1.1)",
              h.median, h.p90, hd_cpu / iterations);
  std::printf("  %-44s %7.2fms %7.2fms\n", "rdma VERSION", rv.median, rv.p90);
  std::printf("  %-44s %7.2fms %7.2fms\n\n", "host-device VERSION", hv.median, hv.p90);
  std::printf("  rdma / floor        = %.3fx  (target <= 1.15x)  %s\n", vs_floor,
              vs_floor <= 1.15 ? "MET" : "MISSED");
  std::vector<double> paired;
  for (size_t i = 0; i < rdma_ms.size(); ++i) paired.push_back(rdma_ms[i] / floor_ms[i]);
  std::printf("  rdma / floor, paired per iteration (median) = %.3fx\n", Summarise(paired).median);
  std::printf("  rdma / host-device  = %.3fx  (target ~0.6x)\n", vs_hd);
  std::printf("  VERSION rdma / host-device = %.3fx  (target <= 0.25x)  %s\n", ver_ratio,
              ver_ratio <= 0.25 ? "MET" : "MISSED");
  std::printf("  user-space share of an rdma cycle: %.2f ms of %.2f ms (%.1f%%)\n",
              r.median - f.median, r.median, 100.0 * (r.median - f.median) / r.median);
  double per_cycle_verb = verb_ms / iterations, per_cycle_kernel = kernel_ms / iterations;
  double mean_rdma = 0, mean_floor = 0;
  for (double v : rdma_ms) mean_rdma += v / iterations;
  for (double v : floor_ms) mean_floor += v / iterations;
  std::printf("\n  where an rdma cycle's time goes (means, from the plugin's own debug timing):\n");
  std::printf("    kernel link moves inside the verbs  %7.2f ms   (the floor's mean: %.2f ms)\n",
              per_cycle_kernel, mean_floor);
  std::printf("    kube-rdma code inside the verbs     %7.2f ms\n",
              per_cycle_verb - per_cycle_kernel);
  std::printf("    process spawn, exec, exit, pipes    %7.2f ms (2 processes)\n",
              mean_rdma - per_cycle_verb);
  nlohmann::json child;
  if (!ChildBench(node, pod, rdma_bin, mv_bin, iterations, &child)) return 1;
  if (!CheckBench(node, pod, rdma_bin, dp_bin, fixture, iterations, f.median, &child)) return 1;
  if (!json_out.empty()) {
    nlohmann::json j = {{"iterations", iterations},     {"floor_ms", f.median},
                        {"rdma_ms", r.median},          {"host_device_ms", h.median},
                        {"rdma_version_ms", rv.median}, {"host_device_version_ms", hv.median},
                        {"rdma_vs_floor", vs_floor},    {"rdma_vs_host_device", vs_hd},
                        {"version_ratio", ver_ratio}};
    j.update(child);
    std::ofstream(json_out) << j.dump(2) << "\n";
  }
  // A floor is a lower bound: rdma does these two moves and more, so it can never be faster. If
  // it measures below, the floor times something it should not, and every ratio above is wrong.
  if (r.median < f.median) {
    std::fprintf(
        stderr,
        "\nINVALID: rdma ADD+DEL (%.2f ms) measured below the kernel floor (%.2f ms): the "
        "floor times more than the two moves; fix the benchmark before reading any ratio\n",
        r.median, f.median);
    return 3;
  }
  return 0;
}
