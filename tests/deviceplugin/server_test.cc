// SPDX-License-Identifier: Apache-2.0
// The device plugin API's service (server.cc) over gRPC: each resource's socket, Allocate
// under load and its records for the CNI, GetPreferredAllocation and the options.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "kuberdma/contract/allocation.h"
#include "plugin_node.h"

namespace kuberdma::deviceplugin::testing {
namespace {

TEST_CASE("Each resource's socket is 0600 whatever the umask") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  mode_t old = ::umask(0);  // a permissive umask would make the socket world-writable
  n.Start();
  auto& k = *n.kubelet;
  bool up =
      k.WaitFor([&] { return !k.Lists("rdma/shared").empty() && !k.Lists("rdma/hca").empty(); });
  ::umask(old);
  REQUIRE(up);
  for (const char* sock : {"/kuberdma-rdma-shared.sock", "/kuberdma-rdma-hca.sock"}) {
    struct stat st {};
    REQUIRE(::stat((n.dir + "/plugins" + sock).c_str(), &st) == 0);
    INFO(sock);
    CHECK((st.st_mode & 0777) == 0600);
  }
}

TEST_CASE("Two hundred concurrent Allocates all succeed, unknown IDs are INVALID_ARGUMENT") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  REQUIRE(n.kubelet->WaitFor([&] { return !n.kubelet->Lists("rdma/hca").empty(); }));
  auto stub = n.Stub("rdma/hca");
  std::atomic<int> ok{0}, rejected{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 200; ++t) {
    threads.emplace_back([&, t] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      v1beta1::AllocateRequest req;
      bool bad = t % 20 == 0;
      req.add_container_requests()->add_devices_ids(
          bad ? "mlx5_9-0" : "mlx5_" + std::to_string(t % 8) + "-" + std::to_string(t % 8));
      v1beta1::AllocateResponse resp;
      auto st = stub->Allocate(&ctx, req, &resp);
      if (bad) {
        (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? rejected : wrong)++;
      } else if (st.ok() && resp.container_responses(0).devices_size() == 3) {
        ok++;
      } else {
        wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(ok == 190);
  CHECK(rejected == 10);
  CHECK(wrong == 0);
  CHECK(n.mgr->metrics().Get("kuberdma_allocations_total", {{"resource", "rdma/hca"}}) == 190);
}

TEST_CASE("Allocate records which per-HCA slots went to one container, for the CNI's rails") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  REQUIRE(n.kubelet->WaitFor([&] { return !n.kubelet->Lists("rdma/hca").empty(); }));
  auto stub = n.Stub("rdma/hca");
  grpc::ClientContext ctx;
  v1beta1::AllocateRequest req;
  for (const char* id : {"mlx5_6-0", "mlx5_1-0", "mlx5_4-0"}) {
    req.add_container_requests()->add_devices_ids(id);
  }
  req.add_container_requests()->add_devices_ids("mlx5_7-3");
  v1beta1::AllocateResponse resp;
  REQUIRE(stub->Allocate(&ctx, req, &resp).ok());
  auto one = contract::FindAllocation(n.dir + "/allocations", "mlx5_1-0");
  REQUIRE(one);
  REQUIRE(*one);
  CHECK((*one)->resource == "rdma/hca");
  CHECK((*one)->slots == std::vector<std::string>{"mlx5_1-0"});
  grpc::ClientContext ctx2;
  v1beta1::AllocateRequest together;
  auto* c = together.add_container_requests();
  for (const char* id : {"mlx5_6-0", "mlx5_1-0", "mlx5_4-0"}) c->add_devices_ids(id);
  REQUIRE(stub->Allocate(&ctx2, together, &resp).ok());
  for (const char* id : {"mlx5_6-0", "mlx5_1-0", "mlx5_4-0"}) {
    auto g = contract::FindAllocation(n.dir + "/allocations", id);
    REQUIRE(g);
    REQUIRE(*g);
    CHECK((*g)->slots == std::vector<std::string>{"mlx5_6-0", "mlx5_1-0", "mlx5_4-0"});
    CHECK((*g)->hcas.size() == 3);
  }
  // A pool's slots name no HCA: nothing is recorded for them.
  grpc::ClientContext ctx3;
  v1beta1::AllocateRequest pool;
  pool.add_container_requests()->add_devices_ids("pool-shared-001");
  REQUIRE(n.Stub("rdma/shared")->Allocate(&ctx3, pool, &resp).ok());
  CHECK_FALSE(fs::exists(n.dir + "/allocations/pool-shared-001"));
}

TEST_CASE("GetPreferredAllocation and GetDevicePluginOptions answer over gRPC") {
  Node n;
  n.Start();  // no kubelet: the plugin serves anyway and waits for kubelet.sock
  for (int i = 0; i < 50 && !fs::exists(n.mgr->SocketPath("rdma/hca")); ++i)
    std::this_thread::sleep_for(20ms);
  auto stub = n.Stub("rdma/hca");
  grpc::ClientContext ctx;
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (int h = 0; h < 8; ++h) {
    for (int s = 0; s < 8; ++s)
      c->add_available_deviceids("mlx5_" + std::to_string(h) + "-" + std::to_string(s));
  }
  c->add_must_include_deviceids("mlx5_6-3");
  c->set_allocation_size(4);
  v1beta1::PreferredAllocationResponse resp;
  REQUIRE(stub->GetPreferredAllocation(&ctx, req, &resp).ok());
  std::vector<std::string> got(resp.container_responses(0).deviceids().begin(),
                               resp.container_responses(0).deviceids().end());
  CHECK(got == std::vector<std::string>{"mlx5_6-3", "mlx5_4-0", "mlx5_5-0", "mlx5_7-0"});
  grpc::ClientContext ctx2;
  v1beta1::DevicePluginOptions opts;
  REQUIRE(stub->GetDevicePluginOptions(&ctx2, v1beta1::Empty(), &opts).ok());
  CHECK(opts.get_preferred_allocation_available());
  CHECK_FALSE(opts.pre_start_required());
}

}  // namespace
}  // namespace kuberdma::deviceplugin::testing
