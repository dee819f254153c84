// SPDX-License-Identifier: Apache-2.0
// The DRA driver's NodePrepareResources against the device plugin's Allocate, in the same
// rdma-device-plugin process and the same run (docs/dra.md, docs/benchmarks.md):
//   - NodePrepareResources of a claim of 8 NICs (the 8-HCA roce8 fixture), 8 concurrent clients
//     (pods), p50/p99: the claim read from a stand-in API server over HTTP on loopback, checked,
//     its CDI spec and the CNI's record written;
//   - the peer: the device plugin's Allocate of 8 per-HCA slots over its own socket, 8 concurrent
//     clients, p50/p99.
// The stand-in API server answers one connection at a time (a real one answers in parallel), so
// the prepare figures include queueing behind the other clients' reads. Target: prepare's p99 at
// most 3x Allocate's (it does the same work for the same HCAs, plus one API read and two files).
//
//   deviceplugin_dra_bench [--plugin PATH] [--calls N]
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "api.grpc.pb.h"
#include "draplugin.grpc.pb.h"
#include "kuberdma/base/files.h"
#include "kuberdma/standins/api_server.h"

namespace {

namespace fs = std::filesystem;
namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using namespace std::chrono_literals;

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double Ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Claim `i`: every HCA of the node, allocated to it.
json Claim(int i) {
  json results = json::array();
  for (int h = 0; h < 8; ++h) {
    results.push_back({{"request", "nic-" + std::to_string(h)},
                       {"driver", "rdma.kube-rdma.io"},
                       {"pool", "bench-node/hca"},
                       {"device", "mlx5-" + std::to_string(h)}});
  }
  return {{"metadata",
           {{"name", "c" + std::to_string(i)},
            {"namespace", "bench"},
            {"uid", "u" + std::to_string(i)}}},
          {"status",
           {{"allocation", {{"devices", {{"results", results}}}}},
            {"reservedFor", {{{"resource", "pods"}, {"name", "p" + std::to_string(i)}}}}}}};
}

// `call` from 8 threads, `n` times each; the latencies in ms.
template <typename Call>
std::vector<double> Concurrently(int n, Call call) {
  std::vector<std::vector<double>> per(8);
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < n; ++i) {
        auto t0 = Clock::now();
        call(c);
        per[static_cast<size_t>(c)].push_back(Ms(t0));
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (const auto& v : per) all.insert(all.end(), v.begin(), v.end());
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DRA NodePrepareResources against device plugin Allocate"};
  std::string plugin = KUBERDMA_DP_BIN;
  int calls = 200;
  app.add_option("--plugin", plugin, "the rdma-device-plugin binary");
  app.add_option("--calls", calls, "calls per client")->check(CLI::Range(10, 100000));
  CLI11_PARSE(app, argc, argv);

  // Under /run where it can be (a tmpfs, as the node's /run/kube-rdma and /var/run/cdi are):
  // both paths write files, and /tmp may be a disk.
  char run_tmpl[] = "/run/krt-drabench-XXXXXX";
  char tmp_tmpl[] = "/tmp/krt-drabench-XXXXXX";
  char* made = mkdtemp(run_tmpl);
  std::string dir = made != nullptr ? made : mkdtemp(tmp_tmpl);
  struct Cleanup {
    std::string d;
    ~Cleanup() { fs::remove_all(d); }
  } cleanup{dir};
  (void)kuberdma::WriteFileAtomic(
      dir + "/config.json",
      R"({"configList":[{"resourceName":"hca","rdmaHcaMax":1000,"policy":"per-hca"}]})");
  kuberdma::standins::ApiStandIn api;
  // The Node the driver makes its slices' owner.
  api.Put("/api/v1/nodes/bench-node",
          {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "bench-node"}}}});
  for (int i = 0; i < 8; ++i) {
    api.Put("/apis/resource.k8s.io/v1/namespaces/bench/resourceclaims/c" + std::to_string(i),
            Claim(i));
  }
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<std::string> args = {plugin,
                                     "--config=" + dir + "/config.json",
                                     "--device-plugin-dir=" + dir + "/dp",
                                     "--sysfs-root=" KUBERDMA_FIXTURES "/sysfs/roce8",
                                     "--metrics-port=-1",
                                     "--log-level=warn",
                                     "--node-config=/nonexistent",
                                     "--allocations-dir=" + dir + "/allocations",
                                     "--pod-resources=" + dir + "/none.sock",
                                     "--dra",
                                     "--node-name=bench-node",
                                     "--api-server=" + api.base(),
                                     "--kubelet-plugins-dir=" + dir + "/plugins",
                                     "--kubelet-registry-dir=" + dir + "/registry",
                                     "--cdi-dir=" + dir + "/cdi"};
    std::vector<char*> v;
    for (auto& a : args) v.push_back(a.data());
    v.push_back(nullptr);
    execv(v[0], v.data());
    _exit(127);
  }
  std::string dra_sock = dir + "/plugins/rdma.kube-rdma.io/dra.sock";
  std::string dp_sock = dir + "/dp/kuberdma-rdma-hca.sock";
  auto deadline = Clock::now() + 10s;
  while ((!fs::exists(dra_sock) || !fs::exists(dp_sock) ||
          api.Objects("/apis/resource.k8s.io/v1/resourceslices/").empty()) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  auto stop = [&] {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  };
  if (Clock::now() >= deadline) {
    std::fprintf(stderr, "rdma-device-plugin --dra did not serve both sockets and publish\n");
    stop();
    return 1;
  }

  auto dra = drapb::DRAPlugin::NewStub(
      grpc::CreateChannel("unix:" + dra_sock, grpc::InsecureChannelCredentials()));
  int failures = 0;
  auto prepare = [&](int c) {
    drapb::NodePrepareResourcesRequest req;
    auto* claim = req.add_claims();
    claim->set_namespace_("bench");
    claim->set_uid("u" + std::to_string(c));
    claim->set_name("c" + std::to_string(c));
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    auto st = dra->NodePrepareResources(&ctx, req, &resp);
    if (!st.ok() || !resp.claims().at("u" + std::to_string(c)).error().empty() ||
        resp.claims().at("u" + std::to_string(c)).devices_size() != 8) {
      ++failures;
    }
  };
  auto dp = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + dp_sock, grpc::InsecureChannelCredentials()));
  auto allocate = [&](int c) {
    v1beta1::AllocateRequest req;
    auto* cr = req.add_container_requests();
    char slot[8];
    std::snprintf(slot, sizeof slot, "%03d", c);
    for (int h = 0; h < 8; ++h) cr->add_devices_ids("mlx5_" + std::to_string(h) + "-" + slot);
    v1beta1::AllocateResponse resp;
    grpc::ClientContext ctx;
    if (!dp->Allocate(&ctx, req, &resp).ok()) ++failures;
  };
  // Warm both paths once, then alternate rounds so that neither gets the quieter machine.
  prepare(0);
  allocate(0);
  std::vector<double> p, a;
  for (int round = 0; round < 2; ++round) {
    auto pr = Concurrently(calls / 2, prepare);
    auto al = Concurrently(calls / 2, allocate);
    p.insert(p.end(), pr.begin(), pr.end());
    a.insert(a.end(), al.begin(), al.end());
  }
  stop();
  std::printf(
      "DRA benchmark: rdma-device-plugin --dra on the roce8 fixture (8 HCAs), 8 concurrent "
      "clients, %zu calls each path\n\n",
      p.size());
  std::printf("  NodePrepareResources, claim of 8 NICs  p50 %6.3f ms  p99 %6.3f ms\n", Pct(p, 0.5),
              Pct(p, 0.99));
  std::printf("  peer: Allocate of 8 per-HCA slots      p50 %6.3f ms  p99 %6.3f ms\n", Pct(a, 0.5),
              Pct(a, 0.99));
  // Preparing does what Allocate does for the same HCAs, plus an API server read and two files.
  std::printf(
      "  ratio (prepare / allocate)             p50 %6.2fx    p99 %6.2fx   target p99 <= 3x  %s\n",
      Pct(p, 0.5) / Pct(a, 0.5), Pct(p, 0.99) / Pct(a, 0.99),
      Pct(p, 0.99) <= 3 * Pct(a, 0.99) ? "MET" : "MISSED");
  std::printf("  (%s: the files both paths write)\n", dir.substr(0, dir.find('/', 1)).c_str());
  if (failures > 0) {
    std::fprintf(stderr, "%d call(s) failed\n", failures);
    return 1;
  }
  return 0;
}
