// SPDX-License-Identifier: Apache-2.0
// rdma-doctor cabling over a simulated fleet: 1024 nodes' `rdma-doctor node --json --lldp-wait`
// documents (8 rails each, every rail on its leaf but for three miscabled nodes), judged by the
// fleet's majority, with the topology labels. Goals (issue 37): under a second and 100 MiB. The
// named peer, measured in the same run: nlohmann::json parsing the same documents and nothing
// else, the floor any reader of them pays.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kuberdma/doctor/doctor.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string NodeDoc(int node, int rails, bool miscabled) {
  json cabling = json::array();
  for (int r = 1; r <= rails; ++r) {
    int leaf = miscabled && r == 3 ? 5 : r;  // rail 3 on rail 5's leaf
    cabling.push_back(
        {{"rail", r},
         {"hca", "mlx5_" + std::to_string(r - 1)},
         {"netdev", "ens" + std::to_string(r) + "f0np0"},
         {"switch", "su" + std::to_string(node / 32) + "-leaf-" + std::to_string(leaf)},
         {"port", "swp" + std::to_string(node % 32 + 1)},
         {"neighbor",
          {{"chassisId", "0c:42:a1:00:" + std::to_string(node / 32) + ":" + std::to_string(leaf)},
           {"portId", "swp" + std::to_string(node % 32 + 1)},
           {"systemName", "leaf-" + std::to_string(leaf)},
           {"ttl", 120}}}});
  }
  return json{{"view", "node"},
              {"result", {{"node", "gpu-" + std::to_string(node)}, {"cabling", cabling}}},
              {"findings", json::array()}}
      .dump();
}

long MaxRssKiB() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cabling_bench: rdma-doctor cabling over a simulated fleet"};
  int nodes = 1024;
  int rails = 8;
  app.add_option("--nodes", nodes, "nodes in the fleet")->check(CLI::Range(2, 100000));
  app.add_option("--rails", rails, "rails a node")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  std::vector<std::pair<std::string, std::string>> docs;
  size_t bytes = 0;
  for (int n = 0; n < nodes; ++n) {
    docs.emplace_back("gpu-" + std::to_string(n) + ".json",
                      NodeDoc(n, rails, n == 17 || n == 400 || n == 901));
    bytes += docs.back().second.size();
  }
  long rss_before = MaxRssKiB();
  auto t0 = Clock::now();
  size_t parsed = 0;
  for (const auto& [name, text] : docs) parsed += json::parse(text).size();
  auto t1 = Clock::now();
  kuberdma::doctor::View v = kuberdma::doctor::FleetCablingView(docs);
  std::string commands = kuberdma::doctor::LabelCommands(v);
  auto t2 = Clock::now();
  long rss_after = MaxRssKiB();
  int fails = 0;
  for (const auto& f : v.findings) fails += f.status == kuberdma::doctor::Status::kFail;
  double peer_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  double ours_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  double grew_mib = static_cast<double>(rss_after - rss_before) / 1024.0;
  std::printf("cabling_bench: %d nodes x %d rails (%.1f MiB of documents)\n", nodes, rails,
              static_cast<double>(bytes) / (1 << 20));
  std::printf("  peer (nlohmann::json::parse of the documents): %.1f ms (%zu keys)\n", peer_ms,
              parsed);
  std::printf("  rdma-doctor cabling (judge + labels):          %.1f ms = %.2fx the peer\n",
              ours_ms, ours_ms / peer_ms);
  std::printf("  findings failed: %d (want 3); label commands: %zu bytes\n", fails,
              commands.size());
  std::printf("  peak RSS grew %.1f MiB over the documents (goal < 100 MiB); time goal < 1000 ms\n",
              grew_mib);
  bool ok = fails == 3 && ours_ms < 1000 && grew_mib < 100;
  std::printf("  %s\n", ok ? "GOALS MET" : "GOALS MISSED");
  return ok ? 0 : 1;
}
