// SPDX-License-Identifier: Apache-2.0
// rdma-device-plugin over real gRPC against a fake kubelet: registration, kubelet restarts and
// closed streams, health flaps, config reloads, concurrent Allocates, and SIGTERM on the binary.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "api.grpc.pb.h"
#include "kuberdma/base/files.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/deviceplugin/manager.h"
#include "kuberdma/deviceplugin/podresources.h"
#include "kuberdma/doctor/doctor.h"
#include "kuberdma/standins/kubelet.h"
#include "podresources.grpc.pb.h"

namespace kuberdma::deviceplugin {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kConfig = R"({"configList":[
  {"resourceName":"shared","rdmaHcaMax":1000,"selectors":{"vendors":["15b3"]}},
  {"resourceName":"hca","rdmaHcaMax":8,"policy":"per-hca","selectors":{"linkTypes":["ether"]}}]})";

using standins::KubeletStandIn;

// A node: a copy of the roce8 fixture, a device-plugin directory, the config file, and the
// plugin's event loop on a thread. Everything is stopped and removed by the destructor.
struct Node {
  Node() {
    char tmpl[] = "/tmp/krt-dp-XXXXXX";
    dir = mkdtemp(tmpl);
    fs::copy(std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8", dir + "/root",
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::create_directories(dir + "/plugins");
    fs::create_directories(dir + "/etc");
    REQUIRE(WriteFileAtomic(dir + "/etc/config.json", kConfig));
  }
  void Start(std::set<std::string> dra_resources = {}) {
    Options o;
    o.dra_resources = std::move(dra_resources);
    o.on_rescan = [this](const auto& resources, const rails::NodeRoles*) {
      std::lock_guard l(seen_mu);
      seen.clear();
      for (const auto& [name, shared] : resources) seen.push_back(name);
    };
    o.config_path = dir + "/etc/config.json";
    o.plugin_dir = dir + "/plugins";
    o.sysfs = sysfs::SysfsRoot(dir + "/root");
    o.metrics_port = 0;
    o.kernel_events = false;
    o.allocations_dir = dir + "/allocations";
    if (!pod_resources.empty()) o.pod_resources = pod_resources;
    auto cfg = ParseConfig(kConfig);
    auto m = Manager::Create(o, std::move(*cfg));
    REQUIRE(m);
    mgr = std::move(*m);
    loop = std::thread([this] { (void)mgr->Run(false); });
  }
  ~Node() {
    if (mgr) mgr->Stop();
    if (loop.joinable()) loop.join();
    kubelet.reset();
    mgr.reset();
    fs::remove_all(dir);
  }
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Stub(const std::string& res) {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + mgr->SocketPath(res), grpc::InsecureChannelCredentials()));
  }
  std::string dir;
  std::string pod_resources;  // the kubelet's pod-resources socket; "" the default
  std::unique_ptr<KubeletStandIn> kubelet;
  std::unique_ptr<Manager> mgr;
  std::thread loop;
  std::mutex seen_mu;
  std::vector<std::string> seen;  // the resources the last on_rescan was given
};

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

// GET `path` from 127.0.0.1:`port`: the status line and the body.
std::pair<std::string, std::string> HttpGet(uint16_t port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    (void)!::write(fd, req.data(), req.size());
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto eol = text.find("\r\n");
  auto body = text.find("\r\n\r\n");
  return {text.substr(0, eol), body == std::string::npos ? "" : text.substr(body + 4)};
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

TEST_CASE("SIGTERM stops the binary with exit 0 and removes its sockets") {
  Node n;
  pid_t pid = fork();
  if (pid == 0) {
    std::string cfg = n.dir + "/etc/config.json";
    std::string plugins = n.dir + "/plugins";
    std::string root = n.dir + "/root";
    execl(KUBERDMA_DP_BIN, KUBERDMA_DP_BIN, "--config", cfg.c_str(), "--device-plugin-dir",
          plugins.c_str(), "--sysfs-root", root.c_str(), "--metrics-port", "-1", "--log-level",
          "warn", nullptr);
    _exit(127);
  }
  std::string sock = n.dir + "/plugins/kuberdma-rdma-shared.sock";
  for (int i = 0; i < 100 && !fs::exists(sock); ++i) std::this_thread::sleep_for(20ms);
  REQUIRE(fs::exists(sock));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(fs::exists(sock));
  CHECK(fs::is_empty(n.dir + "/plugins"));
}

TEST_CASE("A bad config at start exits 2 naming the entry and field") {
  Node n;
  REQUIRE(WriteFileAtomic(n.dir + "/etc/bad.json",
                          R"({"configList":[{"resourceName":"a","rdmaHcaMax":"many"}]})"));
  std::string cmd = std::string(KUBERDMA_DP_BIN) + " --config " + n.dir +
                    "/etc/bad.json --device-plugin-dir " + n.dir + "/plugins --metrics-port -1 2>" +
                    n.dir + "/err";
  int rc = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(rc) == 2);
  CHECK_THAT(*ReadFile(n.dir + "/err"), Catch::Contains("configList[0].rdmaHcaMax"));
}

// The kubelet's pod-resources service, answering with two pods.
class FakePodResources final : public ::v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const ::v1::ListPodResourcesRequest*,
                    ::v1::ListPodResourcesResponse* resp) override {
    auto* pod = resp->add_pod_resources();
    pod->set_name("llm-trainer-0");
    pod->set_namespace_("default");
    auto* c = pod->add_containers();
    c->set_name("trainer");
    auto* d = c->add_devices();
    d->set_resource_name("rdma/shared");
    d->add_device_ids("pool-shared-007");
    auto* g = c->add_devices();
    g->set_resource_name("nvidia.com/gpu");
    g->add_device_ids("GPU-1");
    return grpc::Status::OK;
  }
};

TEST_CASE(
    "rdma-doctor reads allocations from the pod-resources API, and the checkpoint when it is "
    "absent") {
  Node n;
  std::string sock = n.dir + "/pod-resources.sock";
  FakePodResources svc;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + sock, grpc::InsecureServerCredentials());
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  REQUIRE(server);
  auto listed = ListPodResources(sock, 2000ms);
  REQUIRE(listed);
  REQUIRE(listed->size() == 2);
  CHECK(listed->at(0).pod == "default/llm-trainer-0");
  CHECK(listed->at(0).device_ids == std::vector<std::string>{"pool-shared-007"});

  doctor::Inputs in{.root = sysfs::SysfsRoot(n.dir + "/root")};
  in.state_dir = n.dir + "/state";
  in.plugin_dir = n.dir + "/plugins";
  in.pod_resources = sock;
  auto v = doctor::NodeView(in);
  CHECK(v.doc["allocationsSource"] == "pod-resources API");
  REQUIRE(v.doc["allocations"].size() == 1);  // rdma/* only
  CHECK(v.doc["allocations"][0]["pod"] == "default/llm-trainer-0");
  server->Shutdown();
  server.reset();
  in.pod_resources = n.dir + "/absent.sock";
  REQUIRE(WriteFileAtomic(
      n.dir + "/plugins/kubelet_internal_checkpoint",
      R"({"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"rdma/shared","DeviceIDs":["shared-001"]}]}})"));
  auto fallback = doctor::NodeView(in);
  CHECK(fallback.doc["allocationsSource"].get<std::string>().rfind("checkpoint", 0) == 0);
  CHECK(fallback.doc["allocations"].size() == 1);
  CHECK_FALSE(ListPodResources(n.dir + "/absent.sock", 300ms));
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

}  // namespace
}  // namespace kuberdma::deviceplugin
