// SPDX-License-Identifier: Apache-2.0
// What both demos share: headings, failures, running the project's tools inside a namespace.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "demo.h"
#include "kuberdma/base/files.h"
#include "kuberdma/testing/test_net.h"

namespace kuberdma::demo {

void Failures::operator()(const std::string& what) {
  ++count_;
  std::printf("  FAIL  %s\n", what.c_str());
}

void Heading(int n, const std::string& text) { std::printf("\n[%d] %s\n", n, text.c_str()); }

pid_t Start(const netns::NetNs& ns, const std::vector<std::string>& argv,
            const std::vector<std::string>& env, const std::string& out) {
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  auto pid = testing::SpawnIn(ns, argv, env, -1, fd, fd);
  ::close(fd);
  return pid ? *pid : -1;
}

int Wait(pid_t pid) {
  int st = 0;
  if (pid <= 0 || ::waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int RunShown(const netns::NetNs& ns, const std::vector<std::string>& argv,
             const std::vector<std::string>& env, const std::string& out) {
  int rc = Wait(Start(ns, argv, env, out));
  auto text = ReadFile(out);
  std::string body = text ? *text : "";
  size_t pos = 0;
  while (pos < body.size()) {
    size_t e = body.find('\n', pos);
    std::printf("    %s\n",
                body.substr(pos, e == std::string::npos ? std::string::npos : e - pos).c_str());
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  return rc;
}

std::vector<std::string> ToolEnv(std::vector<std::string> extra) {
  extra.insert(extra.begin(), {"PATH=/usr/bin:/bin", "HOME=/tmp", "NCCL_NVLS_ENABLE=0"});
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) {
    extra.push_back(std::string("LD_LIBRARY_PATH=") + ld);
  }
  return extra;
}

int CountGpus() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    std::string name = e.path().filename();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos) {
      ++n;
    }
  }
  return n;
}

}  // namespace kuberdma::demo
