// SPDX-License-Identifier: Apache-2.0
// The probe modules' control channel (control.h).
#include "control.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "kuberdma/sock/stream.h"

namespace kuberdma::validator {

using Clock = std::chrono::steady_clock;

bool Control::Send(const std::string& line) {
  std::string l = line + "\n";
  return ::send(fd_.get(), l.data(), l.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(l.size());
}

// Rank 0 (the server) listens on every IPv4 address at the peer's port; the client connects to
// it, retrying until `timeout_s` is over (the server may not listen yet).
Result<void> Control::Open(bool server, const std::string& peer, int timeout_s) {
  auto colon = peer.rfind(':');
  int port = colon == std::string::npos ? -1 : std::atoi(peer.c_str() + colon + 1);
  if (port <= 0 || port > 65535) {
    return Fail(ErrorCode::kInvalidArgument, "the peer " + peer + " is not host:port");
  }
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  auto why = [&] {
    return Fail(ErrorCode::kTimeout,
                "no connection to " + peer + " within " + std::to_string(timeout_s) + " s");
  };
  if (server) {
    auto l = sock::ListenTcp("0.0.0.0", static_cast<uint16_t>(port), {.backlog = 1});
    if (!l) return Fail(l.error().Wrap("cannot listen on " + peer));
    pollfd p{l->get(), POLLIN, 0};
    if (::poll(&p, 1, timeout_s * 1000) == 1) fd_ = sock::Accept(l->get());
    return fd_.valid() ? Result<void>() : why();
  }
  while (Clock::now() < deadline) {
    auto c = sock::ConnectTcp(peer.substr(0, colon), static_cast<uint16_t>(port));
    if (c) {
      fd_ = std::move(*c);
      return {};
    }
    if (c.error().code() == ErrorCode::kNotFound) return Fail(c.error());  // does not resolve
    ::usleep(200000);
  }
  return why();
}

bool Control::Receive(std::string* line, int timeout_s) { return Receive(line, timeout_s, {}); }

bool Control::Receive(std::string* line, int timeout_s, const std::function<void()>& between) {
  line->clear();
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (pending_.find('\n') == std::string::npos) {
    pollfd p{fd_.get(), POLLIN, 0};
    int ready = 0;
    if (!between) {
      ready = ::poll(&p, 1, timeout_s * 1000);
    } else {
      while ((ready = ::poll(&p, 1, 1)) == 0 && Clock::now() < deadline) {
        between();
      }
    }
    if (ready != 1) return false;
    char b[4096];
    ssize_t n = ::recv(fd_.get(), b, sizeof b, 0);
    if (n <= 0) return false;
    pending_.append(b, static_cast<size_t>(n));
  }
  auto nl = pending_.find('\n');
  *line = pending_.substr(0, nl);
  pending_.erase(0, nl + 1);
  return true;
}

}  // namespace kuberdma::validator
