// SPDX-License-Identifier: Apache-2.0
// Fleet acceptance's exchange at the size of a real cluster: K pods (64, 256, 1024), each with 8
// rails, join rank 0 over real TCP on loopback and run what they are told (the ring, then pair
// rounds), answering with synthetic measurements in which one node's rail is planted slow. No
// NCCL: this measures the coordinator and the localisation, not the network. For each K: whether
// the verdict names exactly the planted node and rail, the rounds it took, rank 0's wall and CPU
// time and its peak memory (rank 0 runs in this process, the K - 1 others in a child process),
// and rank 0's CPU against the first size's (linear growth would be K / K0). The wall time is
// mostly the pods' joining (each retries its connection until rank 0 listens), not rank 0's work.
//
//   acceptance_bench [--sizes 64,256,1024] [--rails 8]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "kuberdma/sock/stream.h"
#include "kuberdma/validator/coordinator.h"

namespace {

using namespace kuberdma::validator::acceptance;  // NOLINT(google-build-using-namespace): a bench

int g_rails = 8;

// A node whose rail `slow_rail` of node `slow_node` carries a tenth of a healthy rail.
class SyntheticNode final : public NodeAgent {
 public:
  SyntheticNode(int rank, int slow_node, int slow_rail)
      : rank_(rank), slow_node_(slow_node), slow_rail_(slow_rail) {}
  NodeInfo Describe() override {
    NodeInfo n{.rank = rank_, .name = "node-" + std::to_string(rank_ + 1), .address = "127.0.0.1"};
    for (int r = 0; r < g_rails; ++r) n.hcas.push_back({"mlx5_" + std::to_string(r), 0, ""});
    return n;
  }
  TaskResult Execute(const Task& task) override {
    TaskResult out;
    for (const auto& j : task.jobs) {
      bool slow = j.tag != "ring" && (j.pair.a == slow_node_ || j.pair.b == slow_node_) &&
                  j.rail == slow_rail_;
      out.jobs.push_back(
          {.tag = j.tag, .ok = true, .busbw_gbps = slow ? 4.5 : 45.0, .algbw_gbps = 40.0});
    }
    for (int r = 0; r < g_rails; ++r) {
      out.traffic["mlx5_" + std::to_string(r)] = {1u << 30, 1.0 / g_rails};
    }
    return out;
  }

 private:
  int rank_, slow_node_, slow_rail_;
};

int FreePort() {
  auto l = kuberdma::sock::ListenTcp("127.0.0.1", 0);
  return l ? kuberdma::sock::LocalPort(l->get()).value_or(0) : 0;
}

// The K - 1 other pods, each a thread with its own connection, in a child process.
pid_t StartOthers(const Config& cfg, int slow_node, int slow_rail) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  std::vector<std::thread> pods;
  pods.reserve(static_cast<size_t>(cfg.world));
  int failed = 0;
  for (int r = 1; r < cfg.world; ++r) {
    pods.emplace_back([&, r] {
      SyntheticNode node(r, slow_node, slow_rail);
      if (!Participate(cfg, r, node)) __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED);
    });
  }
  for (auto& t : pods) t.join();
  ::_exit(failed == 0 ? 0 : 1);
}

struct Figures {
  bool named = false;
  size_t rounds = 0;
  double wall_s = 0, cpu_s = 0, rss_mib = 0;
};

double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

Figures Run(int k) {
  Config cfg{.world = k,
             .local_ranks = 1,
             .comm_host = "127.0.0.1",
             .nccl_port = 29500,
             .coord_port = FreePort(),
             .timeout_s = 30,
             .join_timeout_s = 60,
             .transport = "socket"};
  const int slow_node = k / 3, slow_rail = g_rails - 2;
  pid_t others = StartOthers(cfg, slow_node, slow_rail);
  SyntheticNode me(0, slow_node, slow_rail);
  double cpu0 = CpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  auto rep = Coordinate(cfg, me);
  Figures f;
  f.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  f.cpu_s = CpuSeconds() - cpu0;
  int status = 0;
  ::waitpid(others, &status, 0);
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  f.rss_mib = static_cast<double>(u.ru_maxrss) / 1024;
  if (rep) {
    f.rounds = rep->in.rounds.size();
    const auto& c = rep->localisation.culprits;
    f.named = rep->verdict == "fail" && c.size() == 1 && c[0].node == slow_node &&
              c[0].hca == "mlx5_" + std::to_string(slow_rail);
  } else {
    std::fprintf(stderr, "K=%d: %s\n", k, rep.error().message().c_str());
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fleet acceptance exchange at scale"};
  std::vector<int> sizes = {64, 256, 1024};
  app.add_option("--sizes", sizes, "fleet sizes (pods)")->delimiter(',');
  app.add_option("--rails", g_rails, "rails per node")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;  // two ends of a connection per pod in this machine
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  std::printf(
      "fleet acceptance exchange, %d rails a node, one slow rail planted, real TCP on "
      "loopback, synthetic NCCL\n\n",
      g_rails);
  std::printf("  %6s  %-22s  %6s  %9s  %9s  %12s  %s\n", "pods", "verdict", "rounds", "wall (s)",
              "cpu (s)", "rank 0 RSS", "rank 0 CPU against the first size (linear: K/K0)");
  double base_cpu = 0;
  int bad = 0;
  for (int k : sizes) {
    Figures f = Run(k);
    if (base_cpu == 0) base_cpu = f.cpu_s;
    bad += f.named ? 0 : 1;
    std::printf("  %6d  %-22s  %6zu  %9.2f  %9.2f  %8.1f MiB  x%.1f (linear x%.1f)\n", k,
                f.named ? "names the planted rail" : "WRONG", f.rounds, f.wall_s, f.cpu_s,
                f.rss_mib, f.cpu_s / base_cpu, k / static_cast<double>(sizes.front()));
  }
  return bad == 0 ? 0 : 1;
}
