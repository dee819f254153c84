// SPDX-License-Identifier: Apache-2.0
// A fleet report's gauges and their push with prometheus-cpp's client, to a Pushgateway stand-in
// on loopback that records what it was sent.
#include "kuberdma/validator/push.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/validator/acceptance.h"

namespace kuberdma::validator {
namespace {

using nlohmann::json;

acceptance::FleetReport Report() {
  acceptance::Inputs in;
  for (int n = 0; n < 2; ++n) {
    in.nodes[n] = {
        .rank = n, .name = "gpu-" + std::to_string(n), .hcas = {{"mlx5_0", 400, "28.39"}}};
    in.ring.traffic[n] = {{"mlx5_0", {100, 1.0}}};
  }
  in.ring.ran = in.ring.ok = true;
  in.ring.busbw_gbps = 42;
  in.rounds = {{{0, 1}}};
  in.measurements = {{.round = 0, .pair = {0, 1}, .rail = 0, .busbw_gbps = 45, .ok = true}};
  return acceptance::Evaluate(in);
}

const Sample* Find(const std::vector<Sample>& v, const std::string& name,
                   const std::string& node = "") {
  for (const auto& s : v) {
    if (s.name == name && (node.empty() || (s.labels.count("node") && s.labels.at("node") == node)))
      return &s;
  }
  return nullptr;
}

TEST_CASE("A fleet report becomes one gauge per fleet, node and HCA fact") {
  auto samples = AcceptanceSamples(Report().ToJson(), 1700000000);
  CHECK(Find(samples, "kuberdma_acceptance_pass")->value == 1);
  CHECK(Find(samples, "kuberdma_acceptance_ring_busbw_gbps")->value == Approx(42));
  CHECK(Find(samples, "kuberdma_acceptance_timestamp_seconds")->value == 1700000000);
  CHECK(Find(samples, "kuberdma_acceptance_node_pass", "gpu-1")->value == 1);
  CHECK(Find(samples, "kuberdma_acceptance_node_busbw_gbps", "gpu-0")->value == Approx(45));
  const Sample* hca = Find(samples, "kuberdma_acceptance_hca_busbw_gbps", "gpu-0");
  REQUIRE(hca != nullptr);
  CHECK(hca->labels.at("hca") == "mlx5_0");
  CHECK(Find(samples, "kuberdma_acceptance_hca_share", "gpu-1")->value == Approx(1.0));
  for (const auto& s : samples) {
    CHECK(std::find(AcceptanceMetricNames().begin(), AcceptanceMetricNames().end(), s.name) !=
          AcceptanceMetricNames().end());
  }
  std::string text = RenderSamples(samples);
  CHECK_THAT(text, Catch::Contains("# TYPE kuberdma_acceptance_node_pass gauge") &&
                       Catch::Contains(R"(kuberdma_acceptance_node_pass{node="gpu-0"} 1)"));
}

// Accepts one HTTP request on loopback, keeps it, answers `status`.
struct FakeGateway {
  explicit FakeGateway(int status) {
    fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd.get(), 4);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    server = std::thread([this, status] {
      UniqueFd c(::accept(fd.get(), nullptr, nullptr));
      timeval tv{2, 0};
      ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[65536];
      ssize_t n;
      while ((n = ::recv(c.get(), buf, sizeof buf, 0)) > 0) {
        request.append(buf, static_cast<size_t>(n));
        auto head = request.find("\r\n\r\n");
        auto cl = request.find("Content-Length: ");
        if (head != std::string::npos && cl != std::string::npos &&
            request.size() >= head + 4 + std::stoul(request.substr(cl + 16))) {
          break;
        }
      }
      std::string resp = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: 0\r\n\r\n";
      (void)!::send(c.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
    });
  }
  ~FakeGateway() { server.join(); }
  UniqueFd fd;
  int port = 0;
  std::thread server;
  std::string request;
};

TEST_CASE("The push POSTs the job's gauges to the Pushgateway, and a refusal is an error") {
  auto samples = AcceptanceSamples(Report().ToJson(), 1);
  {
    FakeGateway gw(200);
    REQUIRE(PushSamples(samples, "http://127.0.0.1:" + std::to_string(gw.port)));
    gw.server.join();
    gw.server = std::thread([] {});
    // prometheus-cpp's Push() is a POST: the Pushgateway replaces every series of each pushed name
    // in the job's group, so a node that left the fleet does not linger under a pushed name.
    CHECK_THAT(gw.request, Catch::StartsWith("POST /metrics/job/kuberdma-acceptance "));
    CHECK_THAT(gw.request, Catch::Contains("kuberdma_acceptance_hca_busbw_gbps"));
  }
  {
    FakeGateway gw(500);
    auto r = PushSamples(samples, "http://127.0.0.1:" + std::to_string(gw.port));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message(), Catch::Contains("HTTP 500"));
  }
  CHECK(PushSamples(samples, "pushgateway").error().code() == ErrorCode::kInvalidArgument);
}

TEST_CASE("Without its module beside it, a push is skipped, naming where it looked") {
  auto r = Push(AcceptanceSamples(Report().ToJson(), 1), "http://127.0.0.1:9");
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kUnsupported);
  CHECK_THAT(r.error().message(), Catch::Contains("rdma-validate-push.so"));
}

}  // namespace
}  // namespace kuberdma::validator
