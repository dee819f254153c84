// SPDX-License-Identifier: Apache-2.0
// The device plugin's LLDP watch over a scripted listener: a neighbour heard is recorded and
// labelled; one that sends a shutdown LLDPDU (TTL 0), or stays silent past its TTL while its
// netdev is listened on, is withdrawn from the record and from the node's labels at once, the
// event logged with the switch's name quoted; a rail a pod holds keeps what it had.
#include "kuberdma/deviceplugin/cabling_watch.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <deque>
#include <filesystem>
#include <sstream>

#include "kuberdma/base/files.h"
#include "kuberdma/dra/node_labels.h"
#include "kuberdma/standins/api_server.h"

namespace kuberdma::deviceplugin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Answers each Listen with the next scripted hearing (then silence on every netdev).
class ScriptedListener final : public lldp::LldpListener {
 public:
  std::deque<lldp::Heard> rounds;
  std::atomic<bool> whole_rounds = true;  // the watch listened for each whole round
  Result<lldp::Heard> Listen(const std::vector<std::string>& /*netdevs*/,
                             std::chrono::milliseconds /*wait*/, lldp::ListenUntil until,
                             int /*stop_fd*/) override {
    whole_rounds = whole_rounds && until == lldp::ListenUntil::kWaitOver;
    if (rounds.empty()) return lldp::Heard{};
    lldp::Heard h = rounds.front();
    rounds.pop_front();
    return h;
  }
};

lldp::Neighbor Leaf(const std::string& name, int ttl) {
  return {.chassis_id = name, .port_id = "swp7", .system_name = name, .ttl_s = ttl};
}

// The spdlog default logger's lines while it lives.
struct CapturedLog {
  CapturedLog() {
    previous = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous); }
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> previous;
};

struct Watched {
  Watched() {
    char tmpl[] = "/tmp/kuberdma-watch-XXXXXX";
    dir = ::mkdtemp(tmpl);
    api.Put(node, {{"metadata", {{"name", "gpu-node-7"}}}});
  }
  ~Watched() { fs::remove_all(dir); }
  // A watch whose rails are mlx5_0 (rail 1, ens1) and mlx5_1 (rail 2, ens2), the netdevs listened
  // on unless a pod holds them; every change applied to the Node's labels as main.cc does.
  std::unique_ptr<CablingWatch> Start() {
    auto w = CablingWatch::Start(
        dir, listener,
        [] {
          return std::vector<rails::RailNeighbor>{{.rail = 1, .hca = "mlx5_0", .netdev = "ens1"},
                                                  {.rail = 2, .hca = "mlx5_1", .netdev = "ens2"}};
        },
        std::chrono::hours(1),
        [this](const std::vector<contract::CablingRecord>& recs) {
          // The watch's thread, or the test's: no Catch assertion here.
          labelled = dra::ApplyTopologyLabels(conn, "gpu-node-7",
                                              rails::TopologyLabels(contract::RailNeighbors(recs)))
                         .has_value();
          ++changes;
        });
    REQUIRE(w);
    return std::move(*w);
  }
  // The watch's thread runs the first round at once, then waits out the hour: wait for its write.
  void FirstRound() {
    for (int i = 0; i < 500 && changes == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(changes == 1);
    REQUIRE(labelled);
  }
  json Labels() { return api.Object(node)->at("metadata").value("labels", json::object()); }
  std::vector<std::string> RecordedHcas() {
    std::vector<std::string> out;
    if (auto recs = contract::ListCabling(dir)) {
      for (const auto& r : *recs) out.push_back(r.hca);
    }
    return out;
  }

  std::string dir;
  ScriptedListener listener;
  standins::ApiStandIn api;
  dra::ApiServer conn{.base = api.base(), .attempts = 2};
  const std::string node = "/api/v1/nodes/gpu-node-7";
  std::atomic<int> changes = 0;
  std::atomic<bool> labelled = false;
};

TEST_CASE("A shutdown LLDPDU withdraws the rail's switch from the record and the labels at once") {
  Watched w;
  CapturedLog log;
  w.listener.rounds.push_back(
      {.neighbors = {{"ens1", Leaf("leaf-1", 120)}, {"ens2", Leaf("leaf-2", 120)}}});
  w.listener.rounds.push_back(
      {.neighbors = {{"ens1", Leaf("leaf-1", 0)}, {"ens2", Leaf("leaf-2", 120)}}});
  auto watch = w.Start();
  w.FirstRound();
  CHECK(w.RecordedHcas() == std::vector<std::string>{"mlx5_0", "mlx5_1"});
  CHECK(w.Labels().value("topology.kube-rdma.io/rail-1-leaf", "") == "leaf-1");
  REQUIRE(watch->Round());
  CHECK(w.changes == 2);
  CHECK(w.labelled);
  CHECK(w.RecordedHcas() == std::vector<std::string>{"mlx5_1"});
  CHECK_FALSE(w.Labels().contains("topology.kube-rdma.io/rail-1-leaf"));
  CHECK(w.Labels().value("topology.kube-rdma.io/rail-2-leaf", "") == "leaf-2");
  CHECK(w.Labels().value("topology.kube-rdma.io/block", "") == "leaf-2");
  CHECK_THAT(log.out.str(), Catch::Contains("event=rail_neighbor_withdrawn hca=mlx5_0 rail=1 "
                                            "was=\"leaf-1 swp7\" reason=shutdown"));
  // Each round listened for all of its time: a shutdown LLDPDU is said once, between rounds too.
  CHECK(w.listener.whole_rounds);
}

TEST_CASE("A neighbour silent past its TTL is withdrawn, and a rail a pod holds keeps its switch") {
  Watched w;
  CapturedLog log;
  // What the watch recorded before a restart, heard an hour ago with a TTL of 120 s.
  const int64_t then = static_cast<int64_t>(std::time(nullptr)) - 3600;
  std::vector<contract::CablingRecord> old;
  for (int rail : {1, 2}) {
    old.push_back({.hca = "mlx5_" + std::to_string(rail - 1),
                   .netdev = "ens" + std::to_string(rail),
                   .rail = rail,
                   .switch_name = "leaf-" + std::to_string(rail),
                   .port = "swp7",
                   .chassis_id = "leaf-" + std::to_string(rail),
                   .heard_at = then,
                   .expires_at = then + 120});
  }
  REQUIRE(contract::RecordCabling(w.dir, old));
  // A round in which ens1 was listened on and heard nothing, and a pod holds ens2.
  w.listener.rounds.push_back({.absent = {"ens2"}});
  auto watch = w.Start();
  w.FirstRound();
  CHECK(w.RecordedHcas() == std::vector<std::string>{"mlx5_1"});
  CHECK_FALSE(w.Labels().contains("topology.kube-rdma.io/rail-1-leaf"));
  CHECK(w.Labels().value("topology.kube-rdma.io/rail-2-leaf", "") == "leaf-2");
  CHECK_THAT(log.out.str(),
             Catch::Contains("hca=mlx5_0 rail=1 was=\"leaf-1 swp7\" reason=expired"));
  CHECK_THAT(log.out.str(), !Catch::Contains("hca=mlx5_1 rail=1"));
  SECTION("heard again, it is back everywhere") {
    w.listener.rounds.push_back({.neighbors = {{"ens1", Leaf("leaf-1", 120)}}, .absent = {"ens2"}});
    REQUIRE(watch->Round());
    CHECK(w.RecordedHcas() == std::vector<std::string>{"mlx5_0", "mlx5_1"});
    CHECK(w.Labels().value("topology.kube-rdma.io/rail-1-leaf", "") == "leaf-1");
  }
  SECTION("a record written before expiresAt existed lapses 120 s after it was heard") {
    json j = json::parse(*ReadRegularFile(w.dir + "/cabling.json"));
    j["rails"][0].erase("expiresAt");
    j["rails"][0]["heardAt"] = 1000;
    REQUIRE(WriteFileAtomic(w.dir + "/cabling.json", j.dump()));
    auto recs = contract::ListCabling(w.dir);
    REQUIRE(recs);
    CHECK(recs->front().expires_at == 1000 + contract::kDefaultLldpTtl);
  }
}

TEST_CASE("A switch name with a quote cannot end its value or forge a key in the log line") {
  Watched w;
  CapturedLog log;
  w.listener.rounds.push_back({.neighbors = {{"ens1", Leaf("leaf-1", 120)}}});
  w.listener.rounds.push_back({.neighbors = {{"ens1", Leaf("leaf\" reason=forged x=\"\\", 120)}}});
  auto watch = w.Start();
  w.FirstRound();
  REQUIRE(watch->Round());
  CHECK_THAT(log.out.str(),
             Catch::Contains("event=rail_recabled hca=mlx5_0 rail=1 was=\"leaf-1 "
                             "swp7\" now=\"leaf\\\" reason=forged x=\\\"\\\\ swp7\"\n"));
}

}  // namespace
}  // namespace kuberdma::deviceplugin
