// SPDX-License-Identifier: Apache-2.0
// Manager (manager.cc) over real gRPC against the kubelet stand-in: registration, resources
// handed to the DRA driver, kubelet restarts and closed streams, health flaps, config reloads.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>

#include "plugin_node.h"

namespace kuberdma::deviceplugin::testing {
namespace {

TEST_CASE("A resource that never reached the kubelet is exported as not registered") {
  Node n;  // no kubelet: kubelet.sock never appears
  n.Start();
  std::string body;
  for (int i = 0; i < 100; ++i) {
    body = n.mgr->metrics().Render();
    if (body.find(R"(kuberdma_registered{resource="rdma/hca"} 0)") != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  // The series the KubeRdmaResourceNotRegistered alert fires on exists, at 0, for every resource.
  CHECK_THAT(body, Catch::Contains(R"(kuberdma_registered{resource="rdma/hca"} 0)"));
  CHECK_THAT(body, Catch::Contains(R"(kuberdma_registered{resource="rdma/shared"} 0)"));
}

TEST_CASE("A resource the DRA driver publishes is scanned and handed over, never registered") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start({"rdma/hca"});
  auto& k = *n.kubelet;
  REQUIRE(k.WaitFor([&] { return !k.Lists("rdma/shared").empty(); }));
  std::this_thread::sleep_for(300ms);  // a registration of rdma/hca would have come by now
  CHECK(k.WaitFor([&] { return k.Registrations("rdma/hca") == 0; }));
  CHECK(k.Lists("rdma/hca").empty());
  std::lock_guard l(n.seen_mu);
  CHECK(n.seen == std::vector<std::string>{"rdma/hca", "rdma/shared"});
}

TEST_CASE("Each resource registers with the kubelet and streams its device list") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  auto& k = *n.kubelet;
  REQUIRE(
      k.WaitFor([&] { return !k.Lists("rdma/shared").empty() && !k.Lists("rdma/hca").empty(); }));
  std::map<std::string, v1beta1::RegisterRequest> regs;
  for (const auto& r : k.registrations()) regs[r.resource_name()] = r;
  CHECK(regs["rdma/shared"].version() == "v1beta1");
  CHECK(regs["rdma/shared"].endpoint() == "kuberdma-rdma-shared.sock");
  CHECK_FALSE(regs["rdma/shared"].options().get_preferred_allocation_available());
  CHECK(regs["rdma/hca"].options().get_preferred_allocation_available());
  const auto& shared = k.Lists("rdma/shared").front();
  CHECK(shared.devices_size() == 1000);
  CHECK(shared.devices(0).health() == "Healthy");
  CHECK(shared.devices(0).topology().nodes_size() == 2);
  const auto& hca = k.Lists("rdma/hca").front();
  CHECK(hca.devices_size() == 64);
  CHECK(hca.devices(8 * 5).id() == "mlx5_5-0");
  CHECK(hca.devices(8 * 5).topology().nodes(0).id() == 1);
}

TEST_CASE(
    "A kubelet restart (sockets removed, kubelet.sock re-created) is followed by a new "
    "registration") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  REQUIRE(n.kubelet->WaitFor([&] { return n.kubelet->Registrations("rdma/shared") == 1; }));
  n.kubelet->Stop();
  // The kubelet removes every plugin socket when it starts again.
  for (const auto& e : fs::directory_iterator(n.dir + "/plugins")) fs::remove(e.path());
  auto t0 = Clock::now();
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  auto& k = *n.kubelet;
  REQUIRE(k.WaitFor([&] { return !k.Lists("rdma/shared").empty() && !k.Lists("rdma/hca").empty(); },
                    3000ms));
  CHECK(Clock::now() - t0 < 2s);
  CHECK(k.Lists("rdma/shared").back().devices_size() == 1000);  // never left at zero
  CHECK(fs::exists(n.mgr->SocketPath("rdma/shared")));
  CHECK(n.mgr->metrics().Get("kuberdma_kubelet_restarts_total", {}) >= 1);
}

TEST_CASE("A ListAndWatch stream closed by the kubelet leads to a new registration") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  auto& k = *n.kubelet;
  REQUIRE(k.WaitFor([&] { return k.Lists("rdma/shared").size() == 1; }));
  k.CloseStreams();
  REQUIRE(k.WaitFor(
      [&] { return k.Registrations("rdma/shared") == 2 && k.Lists("rdma/shared").size() == 2; },
      3000ms));
}

TEST_CASE("A port leaving ACTIVE reaches ListAndWatch within a second, and so does its return") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  auto& k = *n.kubelet;
  REQUIRE(k.WaitFor([&] { return !k.Lists("rdma/hca").empty(); }));
  std::string state = n.dir + "/root/sys/class/infiniband/mlx5_3/ports/1/state";
  auto unhealthy = [&](size_t want_lists) {
    return [&k, want_lists] {
      auto& l = k.Lists("rdma/hca");
      return l.size() >= want_lists && l.back().devices(8 * 3).health() == "Unhealthy";
    };
  };
  auto t0 = Clock::now();
  REQUIRE(WriteFileAtomic(state, "1: DOWN\n"));
  REQUIRE(k.WaitFor(unhealthy(2), 2000ms));
  auto took = Clock::now() - t0;
  CHECK(took < 1s);
  CHECK(k.Lists("rdma/hca").back().devices(8 * 2).health() == "Healthy");
  CHECK(k.Lists("rdma/shared").back().devices(0).health() == "Healthy");  // 7 of 8 still up
  REQUIRE(WriteFileAtomic(state, "4: ACTIVE\n"));
  REQUIRE(k.WaitFor([&] { return k.Lists("rdma/hca").back().devices(8 * 3).health() == "Healthy"; },
                    2000ms));
}

TEST_CASE(
    "A new config is applied when its file changes, a bad one is rejected and the old keeps "
    "serving") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  auto& k = *n.kubelet;
  REQUIRE(k.WaitFor([&] { return !k.Lists("rdma/shared").empty(); }));
  REQUIRE(WriteFileAtomic(
      n.dir + "/etc/config.json",
      R"({"configList":[{"resourceName":"shared","rdmaHcaMax":1000,"selectors":{"vendors":["15b3"]}},
                             {"resourceName":"numa1","rdmaHcaMax":2,"policy":"per-hca","selectors":{"hcaNames":["mlx5_4","mlx5_5"]}}]})"));
  REQUIRE(k.WaitFor([&] { return !k.Lists("rdma/numa1").empty(); }, 3000ms));
  CHECK(k.Lists("rdma/numa1").back().devices_size() == 4);
  CHECK_FALSE(fs::exists(n.mgr->SocketPath("rdma/hca")));
  REQUIRE(WriteFileAtomic(n.dir + "/etc/config.json", R"({"configList":[{"resourceName":"x"}]})"));
  for (int i = 0; i < 50 && n.mgr->metrics().Get("kuberdma_config_reloads_total",
                                                 {{"result", "rejected"}}) == 0;
       ++i) {
    std::this_thread::sleep_for(50ms);
  }
  CHECK(n.mgr->metrics().Get("kuberdma_config_reloads_total", {{"result", "rejected"}}) >= 1);
  auto stub = n.Stub("rdma/numa1");
  grpc::ClientContext ctx;
  v1beta1::AllocateRequest req;
  req.add_container_requests()->add_devices_ids("mlx5_5-1");
  v1beta1::AllocateResponse resp;
  auto st = stub->Allocate(&ctx, req, &resp);
  CHECK(st.ok());
  CHECK(resp.container_responses(0).envs().at("NCCL_IB_HCA") == "=mlx5_5:1");
}

}  // namespace
}  // namespace kuberdma::deviceplugin::testing
