// SPDX-License-Identifier: Apache-2.0
// The acceptance exchange for real over loopback TCP, with agents that answer synthetically
// instead of running NCCL: every rank in its own thread, rank 0 coordinating.
#include "kuberdma/validator/coordinator.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "kuberdma/base/unique_fd.h"

namespace kuberdma::validator::acceptance {
namespace {

using nlohmann::json;

int FreePort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// A node of two rails whose rail `slow_rail` is slow when `slow_node` is in the job.
class FakeAgent final : public NodeAgent {
 public:
  FakeAgent(int rank, int slow_node, int slow_rail)
      : rank_(rank), slow_node_(slow_node), slow_rail_(slow_rail) {}
  NodeInfo Describe() override {
    return {.rank = rank_,
            .name = "node-" + std::to_string(rank_ + 1),
            .hcas = {{"net1", 0, ""}, {"net2", 0, ""}}};
  }
  TaskResult Execute(const Task& task) override {
    std::lock_guard lock(mu_);
    TaskResult r;
    for (const auto& j : task.jobs) {
      tasks_.push_back(j);
      bool slow = j.tag == "ring"
                      ? false
                      : (j.pair.a == slow_node_ || j.pair.b == slow_node_) && j.rail == slow_rail_;
      r.jobs.push_back({.tag = j.tag, .ok = true, .busbw_gbps = slow ? 0.2 : 2.0, .algbw_gbps = 1});
    }
    r.traffic = {{"net1", {1000, 0.5}}, {"net2", {1000, 0.5}}};
    return r;
  }
  std::vector<Job> tasks() {
    std::lock_guard lock(mu_);
    return tasks_;
  }

 private:
  int rank_, slow_node_, slow_rail_;
  std::mutex mu_;
  std::vector<Job> tasks_;
};

Config Cfg(int world) {
  int port = FreePort();
  return {.world = world,
          .local_ranks = 1,
          .comm_host = "127.0.0.1",
          .nccl_port = 29500,
          .coord_port = port,
          .timeout_s = 5,
          .join_timeout_s = 3,
          .transport = "socket"};
}

TEST_CASE("Four pods: the ring, then pair rounds over TCP name the slow node and rail") {
  Config cfg = Cfg(4);
  std::vector<std::unique_ptr<FakeAgent>> agents;
  for (int r = 0; r < 4; ++r) agents.push_back(std::make_unique<FakeAgent>(r, 2, 1));
  std::vector<Result<NodeOutcome>> outcomes(4, Fail(ErrorCode::kInternal, "not run"));
  std::vector<std::thread> others;
  for (int r = 1; r < 4; ++r) {
    others.emplace_back([&, r] {
      outcomes[static_cast<size_t>(r)] = Participate(cfg, r, *agents[static_cast<size_t>(r)]);
    });
  }
  auto rep = Coordinate(cfg, *agents[0]);
  for (auto& t : others) t.join();
  REQUIRE(rep);
  CHECK(rep->verdict == "fail");
  CHECK(rep->in.ring.ok);
  CHECK(rep->in.ring.busbw_gbps == Approx(2.0));
  CHECK(rep->in.rounds.size() == 2);  // the second round settles it; the third is not needed
  REQUIRE(rep->localisation.culprits.size() == 1);
  CHECK(rep->localisation.culprits[0].node == 2);
  CHECK(rep->localisation.culprits[0].hca == "net2");
  CHECK_THAT(rep->Summary(), Catch::Contains("culprit node-3 net2 (rail 2)"));
  // Every pod hears its own verdict; only node-3 fails.
  REQUIRE(outcomes[2]);
  CHECK(outcomes[2]->verdict == "fail");
  CHECK_THAT(outcomes[2]->problems.front(), Catch::Contains("culprit: net2"));
  REQUIRE(outcomes[1]);
  CHECK(outcomes[1]->verdict == "pass");
  CHECK_THAT(outcomes[1]->fleet_summary, Catch::Contains("node-3"));
  // The jobs each pod ran: the ring over four ranks, then one job per rail of its pair.
  auto jobs = agents[1]->tasks();
  REQUIRE(jobs.size() == 1 + 2 * 2);
  CHECK(jobs[0].tag == "ring");
  CHECK(jobs[0].nranks == 4);
  CHECK(jobs[0].ranks == std::vector<int>{1});
  CHECK(jobs[0].comm_id == "127.0.0.1:29500");
  CHECK(jobs[1].nranks == 2);
  CHECK(jobs[1].devices.size() == 1);
  // A pair job bootstraps at its lower node's address, on a port of its own per round and rail.
  CHECK(jobs[1].comm_id.rfind("127.0.0.1:", 0) == 0);
  CHECK(jobs[1].comm_id != jobs[2].comm_id);
}

TEST_CASE("The verbs rail sweep: no ring, pair rounds on every rail whatever --pairs says") {
  Config cfg = Cfg(3);
  cfg.transport = "verbs";
  cfg.pairs = PairPolicy::kAuto;  // the sweep is its pair rounds: they run anyway
  cfg.collective = "rdma_write";
  std::vector<std::unique_ptr<FakeAgent>> agents;
  for (int r = 0; r < 3; ++r) agents.push_back(std::make_unique<FakeAgent>(r, 1, 0));
  std::vector<std::thread> others;
  for (int r = 1; r < 3; ++r) {
    others.emplace_back([&, r] { (void)Participate(cfg, r, *agents[static_cast<size_t>(r)]); });
  }
  auto rep = Coordinate(cfg, *agents[0]);
  for (auto& t : others) t.join();
  REQUIRE(rep);
  CHECK_FALSE(rep->in.ring.ran);
  CHECK(rep->in.rounds.size() == 3);  // an odd fleet: every node meets two partners
  for (const auto& j : agents[2]->tasks()) CHECK(j.tag != "ring");
  REQUIRE(rep->localisation.culprits.size() == 1);
  CHECK(rep->localisation.culprits[0].node == 1);
  CHECK(rep->localisation.culprits[0].hca == "net1");
  CHECK_THAT(rep->Summary(), Catch::Contains("rail sweep of 3 round(s)"));
  CHECK_THAT(rep->Table(), Catch::Contains("rail sweep (verbs)"));
  for (const auto& p : rep->problems) CHECK_THAT(p, !Catch::Contains("ring"));
}

TEST_CASE("A pod that never arrives is reported, and the others are still judged") {
  Config cfg = Cfg(3);
  FakeAgent a0(0, -1, -1), a1(1, -1, -1);
  Result<NodeOutcome> o1 = Fail(ErrorCode::kInternal, "not run");
  std::thread t([&] { o1 = Participate(cfg, 1, a1); });
  auto rep = Coordinate(cfg, a0);
  t.join();
  REQUIRE(rep);
  CHECK(rep->verdict == "fail");
  CHECK(rep->nodes.at(2).verdict == "fail");
  CHECK_THAT(rep->nodes.at(2).problems.front(), Catch::Contains("never reached the coordinator"));
  CHECK(rep->nodes.at(1).verdict == "pass");
  REQUIRE(o1);
  CHECK(o1->verdict == "pass");
}

TEST_CASE("A participant with no coordinator gives up with a clear error") {
  Config cfg = Cfg(2);
  cfg.join_timeout_s = 1;
  FakeAgent a(1, -1, -1);
  auto r = Participate(cfg, 1, a);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kTimeout);
  CHECK_THAT(r.error().message(), Catch::Contains("could not reach the acceptance coordinator"));
}

TEST_CASE("A participant whose port is held by something else names it instead of waiting") {
  // A server that accepts and never speaks, as another process on port + 1 would.
  UniqueFd srv(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(srv.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(srv.get(), 4) == 0);
  ::getsockname(srv.get(), reinterpret_cast<sockaddr*>(&a), &len);
  Config cfg = Cfg(2);
  cfg.coord_port = ntohs(a.sin_port);
  cfg.join_timeout_s = 60;  // what it would otherwise wait, and more
  cfg.welcome_timeout_s = 1;
  FakeAgent agent(1, -1, -1);
  auto t0 = std::chrono::steady_clock::now();
  auto r = Participate(cfg, 1, agent);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kTimeout);
  CHECK_THAT(r.error().message(), Catch::Contains("is not the acceptance coordinator"));
  CHECK_THAT(r.error().message(), Catch::Contains(std::to_string(cfg.coord_port)));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("A pod whose rank the coordinator cannot take is turned away, not left waiting") {
  Config cfg = Cfg(2);
  cfg.join_timeout_s = 3;
  FakeAgent a0(0, -1, -1), stray(7, -1, -1);
  std::thread coord([&] { (void)Coordinate(cfg, a0); });
  auto r = Participate(cfg, 7, stray);  // rank 7 of a fleet of two
  coord.join();
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kAlreadyExists);
  CHECK_THAT(r.error().message(), Catch::Contains("turned rank 7 away"));
}

TEST_CASE("Jobs and results survive the wire") {
  Job j{.tag = "r2-n0-n3-rail1",
        .comm_id = "10.0.0.1:29532",
        .nranks = 2,
        .ranks = {1},
        .devices = {"mlx5_0"},
        .round = 1,
        .pair = {0, 3},
        .rail = 0};
  Job back = JobFromJson(ToJson(j));
  CHECK(back.tag == j.tag);
  CHECK(back.pair == j.pair);
  CHECK(back.devices == j.devices);
  TaskResult r{.jobs = {{.tag = "ring", .ok = true, .busbw_gbps = 3.5}},
               .traffic = {{"mlx5_0", {42, 1.0}}},
               .problems = {"x"}};
  TaskResult r2 = TaskResultFromJson(ToJson(r));
  CHECK(r2.jobs[0].busbw_gbps == Approx(3.5));
  CHECK(r2.traffic.at("mlx5_0").bytes == 42);
  NodeInfo n{.rank = 2, .name = "gpu-node-7", .hcas = {{"mlx5_0", 400, "28.39.1002"}}};
  CHECK(NodeInfoFromJson(ToJson(n)).hcas[0].firmware == "28.39.1002");
  n.cabling = {{.rail = 1,
                .hca = "mlx5_0",
                .netdev = "ens1f0np0",
                .neighbor = lldp::Neighbor{.chassis_id = "leaf-1", .port_id = "swp7"}},
               {.rail = 2, .hca = "mlx5_1", .netdev = "ens2f0np0"}};
  NodeInfo back_n = NodeInfoFromJson(ToJson(n));
  REQUIRE(back_n.cabling.size() == 2);
  CHECK(back_n.cabling[0].neighbor->Switch() == "leaf-1");
  CHECK_FALSE(back_n.cabling[1].neighbor.has_value());
}

TEST_CASE("A peer's cabling is read escaped and bounded, a wrong type refused at the wire") {
  json hostile = ToJson(NodeInfo{.rank = 1, .name = "n"});
  hostile["cabling"] = json::array();
  for (int i = 0; i < 100; ++i) {
    hostile["cabling"].push_back({{"rail", i},
                                  {"hca", "mlx5_\x1b[31m"},
                                  {"netdev", std::string(300, 'x')},
                                  {"neighbor", {{"systemName", "leaf\n\x07"}}}});
  }
  NodeInfo n = NodeInfoFromJson(hostile);
  CHECK(n.cabling.size() == 64);
  CHECK(n.cabling[0].hca == "mlx5_\\x1b[31m");
  CHECK(n.cabling[0].netdev.size() == 64);
  CHECK(n.cabling[0].neighbor->system_name == "leaf\\x0a\\x07");
  hostile["cabling"][0]["rail"] = "one";
  CHECK_THROWS_AS(NodeInfoFromJson(hostile), json::type_error);
}

}  // namespace
}  // namespace kuberdma::validator::acceptance
