// SPDX-License-Identifier: Apache-2.0
// Tests for kuberdma::sock, the stream-socket seam: real sockets on the loopback and in a private
// directory, each closed and removed when the test ends.
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <string>

#include "kuberdma/base/files.h"
#include "kuberdma/sock/stream.h"
#include "temp_dir.h"

namespace kuberdma::sock {
namespace {

// `text` written on `from` arrives on `to`.
void CheckCarries(int from, int to, const std::string& text) {
  REQUIRE(WriteAll(from, text.data(), text.size()));
  std::string got(text.size(), '\0');
  REQUIRE(::recv(to, got.data(), got.size(), MSG_WAITALL) == static_cast<ssize_t>(text.size()));
  CHECK(got == text);
}

// Restores the process's umask when the test ends, passed or failed.
struct Umask {
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
  mode_t old;
};

TEST_CASE("A Unix socket listens with its mode whatever the umask, in a folder it makes") {
  testing::TempDir dir("kuberdma-sock");
  std::string path = dir.path + "/plugins/kube-rdma/pods.sock";
  Umask open_umask(0);  // would leave the socket 0777 if the mode were not enforced
  {
    auto stale = ListenUnix(path, 0600);  // an earlier run's socket, left behind when it closed
    REQUIRE(stale);
  }
  REQUIRE(std::filesystem::is_socket(path));
  auto l = ListenUnix(path, 0600);
  REQUIRE(l);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
  auto c = ConnectUnix(path);
  REQUIRE(c);
  UniqueFd served = Accept(l->get());
  REQUIRE(served.valid());
  CheckCarries(c->get(), served.get(), "hello\n");
  CheckCarries(served.get(), c->get(), "{\"hcas\":[]}\n");
}

TEST_CASE("A Unix socket never replaces what is not a socket") {
  testing::TempDir dir("kuberdma-sock");
  const std::string path = dir.path + "/pods.sock";
  REQUIRE(WriteFileAtomic(path, "the admin's file", 0644));
  auto l = ListenUnix(path, 0600);
  REQUIRE_FALSE(l);
  CHECK(l.error().code() == ErrorCode::kAlreadyExists);
  CHECK_THAT(l.error().message(), Catch::Contains(path + " exists and is not a socket"));
  CHECK(ReadFile(path).value_or("") == "the admin's file");
}

TEST_CASE("Connecting to a Unix socket nobody serves says not found, a bad path is refused") {
  testing::TempDir dir("kuberdma-sock");
  auto missing = ConnectUnix(dir.path + "/none.sock");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == ErrorCode::kNotFound);
  CHECK_THAT(missing.error().message(), Catch::Contains("nothing listens on " + dir.path));
  {
    auto l = ListenUnix(dir.path + "/closed.sock", 0600);
    REQUIRE(l);
  }  // closed: the file stays, nobody accepts
  CHECK(ConnectUnix(dir.path + "/closed.sock").error().code() == ErrorCode::kNotFound);
  std::string long_path = dir.path + "/" + std::string(120, 'x');
  for (const auto& bad : {long_path, std::string()}) {
    auto l = ListenUnix(bad, 0600);
    REQUIRE_FALSE(l);
    CHECK(l.error().code() == ErrorCode::kInvalidArgument);
    CHECK(ConnectUnix(bad).error().code() == ErrorCode::kInvalidArgument);
  }
  CHECK_FALSE(std::filesystem::exists(long_path));
}

TEST_CASE("TCP on the loopback: a kernel-chosen port, a connection, the peer's address") {
  for (const std::string& address : {std::string("127.0.0.1"), std::string()}) {
    INFO("listening on '" << address << "' (empty: every address, IPv4 and IPv6)");
    auto l = ListenTcp(address, 0);
    REQUIRE(l);
    auto port = LocalPort(l->get());
    REQUIRE(port);
    CHECK(*port != 0);
    auto c = ConnectTcp("127.0.0.1", *port);
    REQUIRE(c);
    UniqueFd served = Accept(l->get());
    REQUIRE(served.valid());
    CHECK(PeerAddress(served.get()) == "127.0.0.1");  // IPv4-mapped shown as IPv4
    CheckCarries(c->get(), served.get(), "{\"type\":\"hello\"}\n");
  }
}

TEST_CASE("TCP's errors say what was wrong") {
  auto bad = ListenTcp("10.0.0.300", 0);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.error().message() == "not an IPv4 address: 10.0.0.300");
  CHECK(ListenTcp("fe80::zz", 0).error().message() == "not an IPv6 address: fe80::zz");

  uint16_t closed = 0;
  {
    auto l = ListenTcp("127.0.0.1", 0);
    REQUIRE(l);
    closed = LocalPort(l->get()).value_or(0);
  }  // nobody listens there now
  auto refused = ConnectTcp("127.0.0.1", closed);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().sys_errno() == ECONNREFUSED);
  CHECK_THAT(refused.error().message(),
             Catch::Contains("connect to 127.0.0.1:" + std::to_string(closed)));

  auto unresolved = ConnectTcp("no-such-host.invalid", 80);
  REQUIRE_FALSE(unresolved);
  CHECK(unresolved.error().code() == ErrorCode::kNotFound);
  CHECK_THAT(unresolved.error().message(), Catch::Contains("cannot resolve no-such-host.invalid"));

  auto in_use = ListenTcp("127.0.0.1", 0);
  REQUIRE(in_use);
  auto again = ListenTcp("127.0.0.1", LocalPort(in_use->get()).value_or(0));
  REQUIRE_FALSE(again);
  CHECK(again.error().sys_errno() == EADDRINUSE);
}

TEST_CASE("A non-blocking listener's Accept returns at once when nobody is waiting") {
  auto l = ListenTcp("127.0.0.1", 0, {.backlog = 4, .nonblocking = true});
  REQUIRE(l);
  errno = 0;
  UniqueFd none = Accept(l->get(), /*nonblocking=*/true);
  CHECK_FALSE(none.valid());
  CHECK(errno == EAGAIN);
}

}  // namespace
}  // namespace kuberdma::sock
