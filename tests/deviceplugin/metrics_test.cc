// SPDX-License-Identifier: Apache-2.0
// The metrics families (metrics.cc) as a scrape sees them: the exposition, port counters read
// on each scrape, the pod holding each HCA; the HTTP endpoint (HEAD, refusals, /healthz, a
// taken port) and the connections it holds (http_server.cc under HttpEndpoint).
#include <poll.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>

#include "plugin_node.h"

namespace kuberdma::deviceplugin::testing {
namespace {

// A TCP connection to the endpoint, closed when destroyed.
struct Conn {
  explicit Conn(uint16_t port) : fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Conn() { ::close(fd); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  void Send(const std::string& s) const { (void)!::write(fd, s.data(), s.size()); }
  int fd;
  bool connected = false;
};

// The worst of five /healthz requests, in ms, each preceded by a byte from every slow client.
double WorstHealthz(uint16_t port, const std::vector<std::unique_ptr<Conn>>& slow) {
  double worst = 0;
  for (int i = 0; i < 5; ++i) {
    for (const auto& c : slow) c->Send("b");
    auto t0 = std::chrono::steady_clock::now();
    auto [status, body] = HttpGet(port, "/healthz");
    CHECK_THAT(status, Catch::Contains("200"));
    worst = std::max(
        worst,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return worst;
}

// A file-descriptor limit for `n` more connections (both ends live in this process).
void RaiseFdLimit(rlim_t n) {
  rlimit r{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &r) == 0);
  if (r.rlim_cur < n) {
    r.rlim_cur = std::min(n, r.rlim_max);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &r) == 0);
  }
}

TEST_CASE(
    "/metrics is prometheus-cpp's exposition of every family, /healthz answers 200 while "
    "serving") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  n.Start();
  auto& k = *n.kubelet;
  REQUIRE(k.WaitFor([&] { return !k.Lists("rdma/hca").empty(); }));
  for (int i = 0;
       i < 100 && n.mgr->metrics().Get("kuberdma_registered", {{"resource", "rdma/hca"}}) != 1;
       ++i) {
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(n.mgr->metrics_port() != 0);
  auto [status, body] = HttpGet(n.mgr->metrics_port(), "/metrics");
  CHECK_THAT(status, Catch::Contains("200"));
  // Every family that has a series by now, with the type the contract gives it.
  for (const char* family :
       {"kuberdma_devices", "kuberdma_hca_healthy", "kuberdma_port_active", "kuberdma_registered",
        "kuberdma_registrations_total", "kuberdma_list_and_watch_streams"}) {
    CHECK_THAT(body, Catch::Contains(std::string("# TYPE ") + family + " " +
                                     Metrics::Families().at(family).first));
  }
  CHECK_THAT(body, Catch::Contains(R"(kuberdma_registered{resource="rdma/hca"} 1)"));
  CHECK_THAT(body, Catch::Contains(R"(kuberdma_port_active{hca="mlx5_3",port="1"} 1)"));
  auto [hstatus, hbody] = HttpGet(n.mgr->metrics_port(), "/healthz");
  CHECK_THAT(hstatus, Catch::Contains("200"));
  CHECK(hbody == "ok\n");
  CHECK_THAT(HttpGet(n.mgr->metrics_port(), "/nothing").first, Catch::Contains("404"));
}

TEST_CASE(
    "Port counters are read from sysfs on each scrape: bytes from 4-byte words, hw_counters") {
  Node n;
  n.kubelet = std::make_unique<KubeletStandIn>(n.dir + "/plugins");
  std::string port = n.dir + "/root/sys/class/infiniband/mlx5_2/ports/1/";
  REQUIRE(WriteFileAtomic(port + "counters/port_xmit_data", "1000\n"));
  REQUIRE(WriteFileAtomic(port + "counters/link_downed", "3\n"));
  fs::create_directories(port + "hw_counters");
  REQUIRE(WriteFileAtomic(port + "hw_counters/np_cnp_sent", "7\n"));
  REQUIRE(WriteFileAtomic(port + "hw_counters/out_of_sequence", "12a"));  // truncated: left out
  n.Start();
  REQUIRE(n.mgr->metrics_port() != 0);
  auto [status, body] = HttpGet(n.mgr->metrics_port(), "/metrics");
  CHECK_THAT(status, Catch::Contains("200"));
  const std::string labels = R"({hca="mlx5_2",netdev="ens3f0np0",port="1",rail="3"})";
  CHECK_THAT(body, Catch::Contains(
                       "# TYPE kuberdma_infiniband_port_data_transmitted_bytes_total counter"));
  CHECK_THAT(body, Catch::Contains("kuberdma_infiniband_port_data_transmitted_bytes_total" +
                                   labels + " 4000"));
  CHECK_THAT(body, Catch::Contains("kuberdma_infiniband_link_downed_total" + labels + " 3"));
  CHECK_THAT(body, Catch::Contains("kuberdma_infiniband_np_cnp_sent_total" + labels + " 7"));
  CHECK_THAT(body, !Catch::Contains("kuberdma_infiniband_out_of_sequence_total" + labels));
  // The fixture's own hw_counters (distinct per HCA: tests/fixtures/sysfs/make_fixtures.py).
  const std::string hca7 = R"({hca="mlx5_7",netdev="ens8f0np0",port="1",rail="8"})";
  CHECK_THAT(body, Catch::Contains("kuberdma_infiniband_np_cnp_sent_total" + hca7 + " 1007"));
  CHECK_THAT(body, Catch::Contains("kuberdma_infiniband_rp_cnp_handled_total" + hca7 + " 2007"));
  CHECK_THAT(body,
             Catch::Contains("kuberdma_infiniband_local_ack_timeout_err_total" + hca7 + " 21"));
  CHECK_THAT(body, Catch::Contains("kuberdma_infiniband_out_of_sequence_total" + hca7 + " 0"));
  // Every HCA's every port, the other ports at the fixture's zero.
  CHECK_THAT(
      body,
      Catch::Contains(
          R"(kuberdma_infiniband_port_data_received_bytes_total{hca="mlx5_7",netdev="ens8f0np0",port="1",rail="8"} 0)"));
  // Read on scrape, not cached: a new value is the next scrape's.
  REQUIRE(WriteFileAtomic(port + "counters/port_xmit_data", "2500\n"));
  auto again = HttpGet(n.mgr->metrics_port(), "/metrics").second;
  CHECK_THAT(again, Catch::Contains("kuberdma_infiniband_port_data_transmitted_bytes_total" +
                                    labels + " 10000"));
}

TEST_CASE("/metrics names the pod holding each HCA: the kubelet's allocations and DRA claims") {
  Node n;
  n.pod_resources = n.dir + "/pod-resources.sock";
  FakePodResources svc;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + n.pod_resources, grpc::InsecureServerCredentials());
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  REQUIRE(server);
  fs::create_directories(n.dir + "/allocations");
  REQUIRE(contract::RecordClaim(n.dir + "/allocations", {.claim = "team-b/infer-0-nics",
                                                         .uid = "uid-1",
                                                         .pods = {"team-b/infer-0"},
                                                         .hcas = {"mlx5_3"}}));
  n.Start();
  REQUIRE(n.mgr->metrics_port() != 0);
  std::string body;
  // The shared pool's slot is every HCA of the pool, once the first scan has filled it.
  for (int i = 0; i < 50 && body.find(R"(hca="mlx5_7",namespace="default")") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(100ms);
    body = HttpGet(n.mgr->metrics_port(), "/metrics").second;
  }
  CHECK_THAT(body, Catch::Contains("# TYPE kuberdma_pod_hca_info gauge"));
  CHECK_THAT(
      body,
      Catch::Contains(
          R"(kuberdma_pod_hca_info{hca="mlx5_0",namespace="default",pod="llm-trainer-0"} 1)"));
  CHECK_THAT(
      body,
      Catch::Contains(
          R"(kuberdma_pod_hca_info{hca="mlx5_7",namespace="default",pod="llm-trainer-0"} 1)"));
  CHECK_THAT(
      body,
      Catch::Contains(R"(kuberdma_pod_hca_info{hca="mlx5_3",namespace="team-b",pod="infer-0"} 1)"));
  CHECK_THAT(body, !Catch::Contains(R"(pod="nvidia)"));
  server->Shutdown();
}

TEST_CASE("The metrics server answers HEAD, refuses other methods and oversized headers") {
  Metrics m;
  auto ep = HttpEndpoint::Start(
      0, m, [] { return true; }, "127.0.0.1");
  REQUIRE(ep);
  Conn post((*ep)->port());
  post.Send("POST /metrics HTTP/1.1\r\n\r\n");
  Conn big((*ep)->port());
  big.Send("GET /metrics HTTP/1.1\r\nX: " + std::string(8300, 'a'));
  for (auto* c : {&post, &big}) {
    std::string got;
    char buf[512];
    ssize_t n = 0;
    while ((n = ::read(c->fd, buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
    CHECK_THAT(got, Catch::StartsWith(c == &post ? "HTTP/1.1 405" : "HTTP/1.1 431"));
  }
  CHECK_THAT(HttpGet((*ep)->port(), "/nothing").first, Catch::Contains("404"));
}

TEST_CASE("/healthz is 503 when the plugin does not serve, and a taken port is an error") {
  Metrics m;
  bool serving = false;
  auto ep = HttpEndpoint::Start(0, m, [&] { return serving; });
  REQUIRE(ep);
  CHECK_THAT(HttpGet((*ep)->port(), "/healthz").first, Catch::Contains("503"));
  serving = true;
  CHECK_THAT(HttpGet((*ep)->port(), "/healthz").first, Catch::Contains("200"));
  auto taken = HttpEndpoint::Start((*ep)->port(), m, [] { return true; });
  REQUIRE_FALSE(taken);
  CHECK_THAT(taken.error().message(), Catch::Contains(std::to_string((*ep)->port())));
  m.Set("kuberdma_registered", {{"resource", "rdma/x"}}, 1);
  m.Remove("kuberdma_registered", {{"resource", "rdma/x"}});
  CHECK_THAT(m.Render(), !Catch::Contains("rdma/x"));
}

TEST_CASE("/healthz answers within the probe's second while 300 idle and slow clients hold on",
          "[connections]") {
  RaiseFdLimit(4096);
  Metrics m;
  auto ep = HttpEndpoint::Start(
      0, m, [] { return true; }, "127.0.0.1");
  REQUIRE(ep);
  const uint16_t port = (*ep)->port();
  // 200 idle connections, half with a request line they never finish, and 100 slowlorises
  // adding a header byte at a time: 120 were enough to starve the thread-per-connection server.
  std::vector<std::unique_ptr<Conn>> idle;
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 200; ++i) {
    idle.push_back(std::make_unique<Conn>(port));
    REQUIRE(idle.back()->connected);
    if (i % 2 == 0) idle.back()->Send("GET / HTTP/1.1\r\n");
  }
  for (int i = 0; i < 100; ++i) {
    slow.push_back(std::make_unique<Conn>(port));
    REQUIRE(slow.back()->connected);
    slow.back()->Send("GET /metrics HTTP/1.1\r\nX-a: ");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  double worst = WorstHealthz(port, slow);
  INFO("worst /healthz latency with 300 hostile connections: " << worst << " ms");
  CHECK(worst < 1000);  // the DaemonSet's liveness probe timeout
  // However slowly it writes, a request is closed kHttpRequestTimeoutMs after it was accepted.
  std::this_thread::sleep_for(std::chrono::milliseconds(kHttpRequestTimeoutMs + 300));
  for (const auto* group : {&idle, &slow}) {
    char buf[256];
    pollfd p{group->front()->fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 2000) == 1);
    CHECK(::read(group->front()->fd, buf, sizeof buf) >= 0);  // EOF (or an error answer first)
  }
}

TEST_CASE("Past the connection cap the oldest connection is closed, never the probe",
          "[connections]") {
  RaiseFdLimit(4096);
  Metrics m;
  auto ep = HttpEndpoint::Start(
      0, m, [] { return true; }, "127.0.0.1");
  REQUIRE(ep);
  const uint16_t port = (*ep)->port();
  std::vector<std::unique_ptr<Conn>> held;
  for (size_t i = 0; i < kHttpMaxConnections + 50; ++i) {
    held.push_back(std::make_unique<Conn>(port));
    REQUIRE(held.back()->connected);
  }
  auto [status, body] = HttpGet(port, "/healthz");
  CHECK_THAT(status, Catch::Contains("200"));
  // The first ones were closed to make room.
  char buf[16];
  pollfd p{held.front()->fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 1000) == 1);
  CHECK(::read(held.front()->fd, buf, sizeof buf) == 0);
}

}  // namespace
}  // namespace kuberdma::deviceplugin::testing
