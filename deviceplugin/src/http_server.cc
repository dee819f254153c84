// SPDX-License-Identifier: Apache-2.0
#include "http_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <unordered_map>

#include "kuberdma/base/files.h"
#include "kuberdma/sock/stream.h"

namespace kuberdma::deviceplugin {

namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  UniqueFd fd;
  Clock::time_point deadline;
  std::string in;
  std::string out;
  size_t written = 0;
  bool responding = false;
};

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string Format(const HttpResponse& r, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + Reason(r.status) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    "\r\nConnection: close\r\n\r\n";
  if (!head) out += r.body;
  return out;
}

}  // namespace

struct HttpServer::Loop {
  Options opts;
  Handler handler;
  UniqueFd listen_fd;
  UniqueFd epoll;
  int stop_fd = -1;
  // In accept order, which is deadline order: the front is the oldest and expires first.
  std::list<Conn> conns;
  std::unordered_map<int, std::list<Conn>::iterator> by_fd;

  void Close(std::list<Conn>::iterator it) {
    by_fd.erase(it->fd.get());
    conns.erase(it);  // closing the fd removes it from the epoll set
  }

  void Accept() {
    for (;;) {
      UniqueFd conn = sock::Accept(listen_fd.get(), /*nonblocking=*/true);
      int fd = conn.get();
      if (fd < 0 && (errno == EMFILE || errno == ENFILE) && !conns.empty()) {
        Close(conns.begin());  // out of descriptors: the oldest makes room, or epoll would spin
        continue;
      }
      if (fd < 0) return;  // EAGAIN, or a transient error: epoll says when to try again
      if (conns.size() >= opts.max_connections) Close(conns.begin());
      conns.push_back(
          Conn{std::move(conn), Clock::now() + std::chrono::milliseconds(opts.deadline_ms)});
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
        conns.pop_back();
        continue;
      }
      by_fd[fd] = std::prev(conns.end());
    }
  }

  void Respond(Conn& c, const HttpResponse& r, bool head) const {
    c.out = Format(r, head);
    c.responding = true;
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.fd = c.fd.get();
    (void)::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  }

  // Reads what arrived; answers once the headers are complete. False: close it.
  bool Read(Conn& c) const {
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      c.in.append(buf, static_cast<size_t>(n));
      size_t end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) end = c.in.find("\n\n");
      if (end != std::string::npos) break;
      if (c.in.size() > opts.max_request_bytes) {
        Respond(c, {431, "request headers too large\n"}, false);
        return true;
      }
    }
    std::string line = c.in.substr(0, c.in.find_first_of("\r\n"));
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos) {
      Respond(c, {400, "bad request line\n"}, false);
      return true;
    }
    std::string method = line.substr(0, sp1);
    std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (method != "GET" && method != "HEAD") {
      Respond(c, {405, "GET or HEAD only\n"}, false);
      return true;
    }
    path = path.substr(0, path.find('?'));
    Respond(c, handler(path), method == "HEAD");
    return true;
  }

  bool Write(Conn& c) {
    while (c.written < c.out.size()) {
      ssize_t n =
          ::send(c.fd.get(), c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      c.written += static_cast<size_t>(n);
    }
    return false;  // all written: close
  }

  int Timeout() const {
    if (conns.empty()) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(conns.front().deadline - Clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  }

  void Expire() {
    auto now = Clock::now();
    while (!conns.empty() && conns.front().deadline <= now) Close(conns.begin());
  }

  void Run() {
    epoll_event events[64];
    for (;;) {
      int n = ::epoll_wait(epoll.get(), events, 64, Timeout());
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == stop_fd) return;
        if (fd == listen_fd.get()) {
          Accept();
          continue;
        }
        auto it = by_fd.find(fd);
        if (it == by_fd.end()) continue;
        Conn& c = *it->second;
        bool keep = c.responding ? Write(c) : Read(c);
        if (keep && c.responding && (events[i].events & EPOLLOUT) == 0) keep = Write(c);
        if (!keep) Close(it->second);
      }
      Expire();
    }
  }
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const Options& options, Handler handler) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->loop_ = std::make_unique<Loop>();
  Loop& l = *s->loop_;
  l.opts = options;
  l.handler = std::move(handler);
  // An empty address would be every address to the socket seam; here it is a mistake.
  if (options.address.empty()) return Fail(ErrorCode::kInvalidArgument, "not an IPv4 address: ");
  KUBERDMA_ASSIGN_OR_RETURN(l.listen_fd, sock::ListenTcp(options.address, options.port,
                                                         {.backlog = 1024, .nonblocking = true}));
  KUBERDMA_ASSIGN_OR_RETURN(s->port_, sock::LocalPort(l.listen_fd.get()));
  l.epoll = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  s->stop_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!l.epoll.valid() || !s->stop_.valid()) return FailErrno(errno, "epoll/eventfd");
  l.stop_fd = s->stop_.get();
  for (int fd : {l.listen_fd.get(), l.stop_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(l.epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      return FailErrno(errno, "epoll_ctl");
  }
  s->thread_ = std::thread([&l] { l.Run(); });
  return s;
}

HttpServer::~HttpServer() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)WriteAll(stop_.get(), &one, sizeof one);  // the loop wakes on it; nothing to report
    thread_.join();
  }
}

}  // namespace kuberdma::deviceplugin
