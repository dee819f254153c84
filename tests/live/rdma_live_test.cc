// SPDX-License-Identifier: Apache-2.0
// RDMA netlink against a live kernel: the machines kube-rdma runs on have ib_core, the development
// machines do not. Skips (exit 77) where the kernel has no RDMA subsystem; elsewhere it reads the
// netns mode, dumps devices (none is fine: ib_core without HCAs), switches the mode and puts it
// back, and checks that rdma-doctor reports the kernel's mode, not the boot parameter. Needs root.
//
//   rdma_live_tests --doctor PATH [Catch2 options]          (tests/gpu/run.sh runs it on the GPU
//   machine)
#define CATCH_CONFIG_RUNNER
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/rdma/netlink_rdma_ops.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/testing/test_net.h"

namespace kuberdma::rdma {
namespace {

std::string g_doctor;  // rdma-doctor, for the doctor check

netns::NetNs Host() {
  auto h = netns::NetNs::Current();
  REQUIRE(h);
  return std::move(*h);
}

std::string Other(NetnsMode m) {
  return std::string(
      NetnsModeName(m == NetnsMode::kShared ? NetnsMode::kExclusive : NetnsMode::kShared));
}

TEST_CASE(
    "live: the kernel's RDMA netns mode is read, and agrees with ib_core's parameter at boot") {
  NetlinkRdmaOps ops;
  auto mode = ops.GetNetnsMode(Host());
  REQUIRE(mode);
  std::printf("RDMA netns mode: %s\n", std::string(NetnsModeName(*mode)).c_str());
  auto boot = sysfs::BootNetnsMode(sysfs::SysfsRoot("/"));
  if (boot)
    std::printf("ib_core netns_mode at boot: %s\n", std::string(NetnsModeName(*boot)).c_str());
  // The runtime mode may differ from boot (rdma system set), but it must be one of the two.
  CHECK((*mode == NetnsMode::kShared || *mode == NetnsMode::kExclusive));
  // A fresh namespace sees the same, system-wide mode.
  std::string name = "krt-" + std::to_string(::getpid()) + "-live";
  auto ns = testing::CreateNamed(name);
  REQUIRE(ns);
  auto there = ops.GetNetnsMode(*ns);
  (void)testing::DeleteNamed(name);
  REQUIRE(there);
  CHECK(*there == *mode);
}

TEST_CASE("live: a device dump answers, and an absent device is not found, by name") {
  NetlinkRdmaOps ops;
  auto devices = ops.List(Host());
  REQUIRE(devices);
  std::printf("RDMA devices in the host namespace: %zu\n", devices->size());
  for (const auto& d : *devices) {
    CHECK(!d.name.empty());
    CHECK(d.num_ports >= 1);
  }
  auto none = ops.GetByName(Host(), "kuberdma_absent_0");
  REQUIRE_FALSE(none);
  CHECK(none.error().code() == ErrorCode::kNotFound);
  CHECK_THAT(none.error().message(), Catch::Contains("kuberdma_absent_0"));
}

TEST_CASE("live: switching the netns mode takes effect and is put back, or is refused saying why") {
  NetlinkRdmaOps ops;
  auto host = Host();
  auto before = ops.GetNetnsMode(host);
  REQUIRE(before);
  NetnsMode other = *before == NetnsMode::kShared ? NetnsMode::kExclusive : NetnsMode::kShared;
  auto set = ops.SetNetnsMode(host, other);
  if (set) {
    auto now = ops.GetNetnsMode(host);
    REQUIRE(ops.SetNetnsMode(host, *before));  // put back first, whatever the checks say
    REQUIRE(now);
    CHECK(*now == other);
    std::printf("switched to %s and back\n", Other(*before).c_str());
  } else {
    // ib_core refuses while other network namespaces exist (any container host has some).
    std::printf("switch refused: %s\n", set.error().message().c_str());
    CHECK(set.error().code() == ErrorCode::kBusy);
    CHECK_THAT(set.error().message(), Catch::Contains("modprobe.d"));
  }
  auto after = ops.GetNetnsMode(host);
  REQUIRE(after);
  CHECK(*after == *before);
}

TEST_CASE("live: rdma-doctor node reports the kernel's mode") {
  NetlinkRdmaOps ops;
  auto mode = ops.GetNetnsMode(Host());
  REQUIRE(mode);
  std::string out = "/tmp/krt-live-doctor-" + std::to_string(::getpid()) + ".json";
  std::string cmd =
      "'" + g_doctor + "' --json --state-dir /nonexistent node > " + out + " 2>/dev/null";
  int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(out.c_str());
  INFO("rdma-doctor exit " << rc << ": " << text.str().substr(0, 600));
  auto doc = nlohmann::json::parse(text.str(), nullptr, false);
  REQUIRE(doc.is_object());
  REQUIRE(doc.contains("result"));
  CHECK(doc["result"].value("netnsMode", "") == std::string(NetnsModeName(*mode)));
}

}  // namespace
}  // namespace kuberdma::rdma

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "SKIP: the live RDMA tests need root\n");
    return 77;
  }
  kuberdma::UniqueFd probe(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA));
  if (!probe.valid()) {
    std::fprintf(stderr,
                 "SKIP: this kernel has no RDMA subsystem (no NETLINK_RDMA; ib_core not loaded)\n");
    return 77;
  }
  Catch::Session session;
  auto cli = session.cli() | Catch::clara::Opt(kuberdma::rdma::g_doctor,
                                               "path")["--doctor"]("rdma-doctor to check");
  session.cli(cli);
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  if (kuberdma::rdma::g_doctor.empty()) {
    std::fprintf(stderr, "rdma_live_tests: --doctor PATH (the rdma-doctor binary) is required\n");
    return 2;
  }
  kuberdma::sim::RemoveStaleNamespaces();
  return session.run();
}
