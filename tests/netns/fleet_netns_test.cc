// SPDX-License-Identifier: Apache-2.0
// The simulated fleet the acceptance demo runs on: rail i of every node reaches rail i of every
// other over its switch, cables can be degraded, and nothing is left behind.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/sim/sim_fleet.h"

namespace kuberdma::sim {
namespace {

sockaddr_in At(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// A listening socket created inside `ns` on ip:port (a socket stays in the namespace it was made
// in).
UniqueFd ListenIn(const netns::NetNs& ns, const std::string& ip, uint16_t port) {
  UniqueFd fd;
  REQUIRE(ns.RunIn([&] {
    fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = At(ip, port);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd.get(), 4) != 0)
      fd.Reset();
  }));
  return fd;
}

bool ConnectFrom(const netns::NetNs& ns, const std::string& ip, uint16_t port) {
  bool ok = false;
  REQUIRE(ns.RunIn([&] {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    timeval tv{2, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a = At(ip, port);
    ok = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }));
  return ok;
}

int FleetNamespaces() {
  std::string mine = "krt-" + std::to_string(::getpid()) + "-f";
  int n = 0;
  if (DIR* d = ::opendir("/run/netns")) {
    while (const dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind(mine, 0) == 0;
    ::closedir(d);
  }
  return n;
}

TEST_CASE("A simulated fleet cables rail i of every node to switch i, and removes it all") {
  {
    auto fleet = SimFleet::Create(3, 2);
    REQUIRE(fleet);
    auto& f = **fleet;
    CHECK(FleetNamespaces() == 4);  // three nodes and the fabric
    CHECK(f.Expect() == "net1,net2");
    for (int r = 1; r <= 2; ++r) {
      UniqueFd l = ListenIn(f.Node(1), SimFleet::Address(1, r), 29600);
      REQUIRE(l.valid());
      CHECK(ConnectFrom(f.Node(3), SimFleet::Address(1, r), 29600));
    }
    CHECK(f.LimitRate(3, 2, 1'000'000'000));
    // netem is a module many kernels (this one, the GPU machines') lack: then it says which.
    auto loss = f.Lose(2, 1, 5);
    if (!loss) {
      CHECK(loss.error().code() == ErrorCode::kUnsupported);
      CHECK_THAT(loss.error().message(), Catch::Contains("sch_netem") && Catch::Contains("net1"));
    }
    auto bad = f.LimitRate(4, 1, 1'000'000'000);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
    CHECK(ConnectFrom(f.Node(2), SimFleet::Address(1, 2), 29601) ==
          false);  // nothing listens there
  }
  CHECK(FleetNamespaces() == 0);
  CHECK(SimFleet::Create(0, 2).error().code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace kuberdma::sim
