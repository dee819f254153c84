// SPDX-License-Identifier: Apache-2.0
#include "kuberdma/validator/module.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>

#include "kuberdma/base/unique_fd.h"

namespace kuberdma::validator {

namespace {

std::string ExeDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

}  // namespace

Result<void*> ModuleSymbol(const std::string& file, const char* symbol, const std::string& needs) {
  std::string where;
  std::string last;
  void* lib = nullptr;
  for (const std::string& p :
       {ExeDir() + "/" + file, ExeDir() + "/../lib/kube-rdma/" + file, file}) {
    lib = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    where += (where.empty() ? "" : ", ") + p;
    // The reason a file that is there would not load (a library it needs) over "not found".
    const char* e = ::dlerror();
    if (e != nullptr && (last.empty() || ::access(p.c_str(), F_OK) == 0)) last = e;
  }
  if (lib == nullptr) {
    return Fail(ErrorCode::kUnsupported, "cannot load " + file + " (tried " + where + "; " + last +
                                             "; it needs " + needs + ")");
  }
  void* fn = ::dlsym(lib, symbol);
  if (fn == nullptr) return Fail(ErrorCode::kUnsupported, file + " has no " + symbol);
  return fn;
}

Result<std::string> CallInChild(const std::string& file, const char* symbol,
                                const std::string& needs, const std::string& request,
                                int timeout_s) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return FailErrno(errno, "pipe");
  UniqueFd rd(fds[0]), wr(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return FailErrno(errno, "fork");
  if (pid == 0) {
    rd.Reset();
    // The first byte says what follows: 'A' the probe's answer, 'U' why the module did not load.
    std::string reply;
    if (auto sym = ModuleSymbol(file, symbol, needs); !sym) {
      reply = "U" + sym.error().message();
    } else {
      std::string out(1 << 16, '\0');
      reinterpret_cast<ProbeFn> (*sym)(request.c_str(), out.data(), out.size());
      reply = "A" + std::string(out.c_str());
    }
    for (size_t at = 0; at < reply.size();) {
      ssize_t n = ::write(wr.get(), reply.data() + at, reply.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  wr.Reset();
  std::string answer;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    pollfd p{rd.get(), POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0) {
      timed_out = true;
      break;
    }
    char buf[4096];
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Fail(ErrorCode::kTimeout,
                "no answer within " + std::to_string(timeout_s) + " s: the probe was killed");
  }
  if (answer.empty()) {
    return Fail(ErrorCode::kIo, WIFSIGNALED(status)
                                    ? "the probe died of signal " + std::to_string(WTERMSIG(status))
                                    : "the probe exited without an answer");
  }
  if (answer.front() == 'U') return Fail(ErrorCode::kUnsupported, answer.substr(1));
  return answer.substr(1);
}

}  // namespace kuberdma::validator
