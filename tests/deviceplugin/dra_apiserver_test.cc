// SPDX-License-Identifier: Apache-2.0
// The DRA driver's API server client against a stand-in API server (plain HTTP on loopback, the
// requests logged): a claim read with the ServiceAccount's token, 404 / 403 / bad names refused
// by name, a 503 retried, a slow or oversized answer given up on, the in-cluster settings.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "kuberdma/dra/apiserver.h"

namespace kuberdma::dra {
namespace {

namespace fs = std::filesystem;

// Answers each connection by the request's path: `script[path]` is a list of (status, body,
// delay ms) used in turn (the last one repeats).
class ScriptedApiServer {
 public:
  struct Reply {
    int status = 200;
    std::string body;
    int delay_ms = 0;
  };
  ScriptedApiServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] { Loop(); });
  }
  ~ScriptedApiServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::map<std::string, std::vector<Reply>> script;
  std::vector<std::string> requests() {
    std::lock_guard l(mu_);
    return log_;
  }

 private:
  void Loop() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char b[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(c, b, sizeof b, 0);
        if (n <= 0) break;
        req.append(b, static_cast<size_t>(n));
      }
      std::string path = req.substr(4, req.find(' ', 4) - 4);
      Reply r{.status = 404, .body = "{}"};
      {
        std::lock_guard l(mu_);
        log_.push_back(req);
        auto& replies = script[path];
        if (!replies.empty()) {
          r = replies.front();
          if (replies.size() > 1) replies.erase(replies.begin());
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(r.delay_ms));
      std::string out = "HTTP/1.1 " + std::to_string(r.status) + " X\r\nContent-Type: " +
                        "application/json\r\nContent-Length: " + std::to_string(r.body.size()) +
                        "\r\nConnection: close\r\n\r\n" + r.body;
      (void)::send(c, out.data(), out.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_ = false;
  std::mutex mu_;
  std::vector<std::string> log_;
  std::thread thread_;
};

constexpr const char* kPath = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/pairs";

TEST_CASE("Claims come from the API server with the ServiceAccount's token, failures named") {
  char tmpl[] = "/tmp/kuberdma-api-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/token") << "s3cr3t-token\n";
  ScriptedApiServer api;
  ApiServer conn{.base = api.base(), .token_file = dir + "/token", .timeout_s = 2, .attempts = 3};
  ApiServerClaims claims(conn);
  ClaimRef ref{.ns = "team-a", .uid = "u1", .name = "pairs"};

  SECTION("a claim, with the bearer token, after a 503 retried") {
    api.script[kPath] = {{.status = 503, .body = "{}"},
                         {.status = 200, .body = R"({"metadata":{"uid":"u1"}})"}};
    auto c = claims.Get(ref);
    REQUIRE(c);
    CHECK((*c)["metadata"]["uid"] == "u1");
    auto reqs = api.requests();
    REQUIRE(reqs.size() == 2);
    CHECK_THAT(reqs[1], Catch::StartsWith(std::string("GET ") + kPath + " HTTP/1.1"));
    CHECK_THAT(reqs[1], Catch::Contains("Authorization: Bearer s3cr3t-token\r\n"));
  }
  SECTION("404, 403 and a bad name are refused at once, by name") {
    auto gone = claims.Get(ref);
    REQUIRE_FALSE(gone);
    CHECK(gone.error().code() == ErrorCode::kNotFound);
    api.script[kPath] = {{.status = 403, .body = "{}"}};
    auto denied = claims.Get(ref);
    REQUIRE_FALSE(denied);
    CHECK(denied.error().code() == ErrorCode::kPermissionDenied);
    CHECK_THAT(denied.error().message(), Catch::Contains("get on resourceclaims.resource.k8s.io"));
    CHECK(api.requests().size() == 2);  // no retries on 4xx
    auto bad = claims.Get({.ns = "team-a/../kube-system", .uid = "u", .name = "x"});
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message(), Catch::Contains("is not a Kubernetes name"));
    CHECK(api.requests().size() == 2);  // never sent
  }
  SECTION("a server that stays down, answers too slowly or too much is given up on") {
    api.script[kPath] = {{.status = 500, .body = "{}"}};
    auto down = claims.Get(ref);
    REQUIRE_FALSE(down);
    CHECK_THAT(down.error().message(), Catch::Contains("HTTP 500 after 3 attempt(s)"));
    ApiServerClaims impatient(ApiServer{.base = api.base(), .timeout_s = 1, .attempts = 1});
    api.script[kPath] = {{.status = 200, .body = std::string(kMaxAnswerBytes + 10, ' ')}};
    auto big = impatient.Get(ref);
    REQUIRE_FALSE(big);
    CHECK_THAT(big.error().message(), Catch::Contains("exceeds"));
    api.script[kPath] = {{.status = 200, .body = "{}", .delay_ms = 2500}};
    auto slow = impatient.Get(ref);
    REQUIRE_FALSE(slow);
    CHECK_THAT(slow.error().message(), Catch::Contains("Timeout"));
  }
  fs::remove_all(dir);
}

TEST_CASE("In a cluster: the service address (IPv6 too) and the ServiceAccount's files") {
  auto env = [](std::map<std::string, std::string> m) {
    return [m](const char* k) -> const char* {
      auto it = m.find(k);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  auto v4 = ApiServer::InCluster(
      env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  REQUIRE(v4);
  CHECK(v4->base == "https://10.96.0.1:443");
  CHECK(v4->token_file == std::string(kServiceAccountDir) + "/token");
  CHECK(v4->ca_file == std::string(kServiceAccountDir) + "/ca.crt");
  auto v6 = ApiServer::InCluster(
      env({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  CHECK(v6->base == "https://[fd00::1]:443");
  auto none = ApiServer::InCluster(env({}));
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message(), Catch::Contains("KUBERNETES_SERVICE_HOST"));
}

}  // namespace
}  // namespace kuberdma::dra
