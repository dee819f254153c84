// SPDX-License-Identifier: Apache-2.0
// The LLDP listener on real veths in namespaces: a frame another netdev hears is never taken for
// the one listened on, however hard that other netdev is flooded while the sockets open (an
// AF_PACKET socket opened with a protocol hears every netdev until it is bound: the fleet demo's
// simulated leaves once had node 1's rail 2 frame taken for its rail 1).
#include <linux/if_packet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/lldp/lldp.h"
#include "kuberdma/testing/test_net.h"

namespace kuberdma::lldp {
namespace {

struct Cabled {
  Cabled() {
    std::string p = "krt-" + std::to_string(::getpid()) + "-lldp";
    names = {p + "n", p + "s"};
    node = testing::CreateNamed(names[0]).value();
    sw = testing::CreateNamed(names[1]).value();
    for (int i : {1, 2}) {
      std::string n = "a" + std::to_string(i), s = "b" + std::to_string(i);
      REQUIRE(net.CreateVeth(*node, n, *sw, s));
      for (auto [ns, name] : {std::pair{&*node, n}, std::pair{&*sw, s}}) {
        auto l = links.GetByName(*ns, name);
        REQUIRE(l);
        REQUIRE(links.Change(*ns, l->ifindex, link::LinkChange{.up = true}));
      }
    }
  }
  ~Cabled() {
    node.reset();
    sw.reset();
    for (const auto& n : names) (void)testing::DeleteNamed(n);
  }
  int IfindexOnSwitch(const std::string& name) {
    return links.GetByName(*sw, name).value().ifindex;
  }

  std::vector<std::string> names;
  std::optional<netns::NetNs> node, sw;
  link::NetlinkLinkOps links;
  testing::TestNet net{links};
};

TEST_CASE("LLDP: a frame another netdev hears is never taken for this one's, even flooded") {
  Cabled c;
  auto one = EncodeFrame({.chassis_id = "sw-1", .port_id = "p1", .system_name = "sw-1"}, {2});
  auto two = EncodeFrame({.chassis_id = "sw-2", .port_id = "p2", .system_name = "sw-2"}, {2});
  int b1 = c.IfindexOnSwitch("b1"), b2 = c.IfindexOnSwitch("b2");
  UniqueFd tx;
  REQUIRE(c.sw->RunIn([&] { tx.Reset(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0)); }));
  REQUIRE(tx.valid());
  auto send = [&](int ifindex, const std::vector<uint8_t>& f) {
    sockaddr_ll to{.sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_halen = 6};
    std::copy(std::begin(kNearestBridge), std::end(kNearestBridge), to.sll_addr);
    (void)::sendto(tx.get(), f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  };
  std::atomic<bool> stop = false;
  std::thread flood([&] {
    for (int i = 0; !stop; ++i) {
      send(b2, two);                   // a2 flooded
      if (i % 64 == 0) send(b1, one);  // a1 hears its own switch now and then
    }
  });
  PacketLldpListener listener;
  int wrong = 0, heard = 0;
  for (int round = 0; round < 100; ++round) {
    Result<Heard> got = Heard{};
    REQUIRE(c.node->RunIn(
        [&] { got = listener.Listen({"a1"}, std::chrono::seconds(2), ListenUntil::kEachHeard); }));
    REQUIRE(got);
    if (got->neighbors.contains("a1")) {
      ++heard;
      wrong += got->neighbors.at("a1").Switch() != "sw-1";
    }
  }
  stop = true;
  flood.join();
  CHECK(heard == 100);
  CHECK(wrong == 0);
}

TEST_CASE("LLDP: listening for the whole wait keeps each netdev's last word, a shutdown too") {
  Cabled c;
  UniqueFd tx;
  REQUIRE(c.sw->RunIn([&] { tx.Reset(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0)); }));
  REQUIRE(tx.valid());
  Neighbor said{.chassis_id = "sw-1", .port_id = "p1", .system_name = "sw-1", .ttl_s = 120};
  Neighbor gone = said;
  gone.ttl_s = 0;
  int b1 = c.IfindexOnSwitch("b1");
  auto send = [&](const std::vector<uint8_t>& f) {
    sockaddr_ll to{.sll_family = AF_PACKET, .sll_ifindex = b1, .sll_halen = 6};
    (void)::sendto(tx.get(), f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  };
  std::thread sw([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    send(EncodeFrame(said, {2}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    send(EncodeFrame(gone, {2}));  // the switch's agent stops
  });
  PacketLldpListener listener;
  Result<Heard> got = Heard{};
  REQUIRE(c.node->RunIn([&] {
    got = listener.Listen({"a1", "a2", "gone0"}, std::chrono::seconds(1), ListenUntil::kWaitOver);
  }));
  sw.join();
  REQUIRE(got);
  REQUIRE(got->neighbors.contains("a1"));
  CHECK(got->neighbors.at("a1").ttl_s == 0);
  CHECK_FALSE(got->neighbors.contains("a2"));  // listened on, silent
  CHECK(got->absent == std::set<std::string>{"gone0"});
}

}  // namespace
}  // namespace kuberdma::lldp
