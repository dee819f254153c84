// SPDX-License-Identifier: Apache-2.0
// Named namespaces over bind mounts, and spawning a binary inside a namespace.
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "kuberdma/base/files.h"
#include "kuberdma/testing/test_net.h"

namespace kuberdma::testing {

Result<NetNs> CreateNamed(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return Fail(ErrorCode::kInvalidArgument, "invalid netns name '" + name + "'");
  }
  KUBERDMA_TRY(MakeDirs(kNamedNetnsDir));
  std::string path = std::string(kNamedNetnsDir) + "/" + name;
  UniqueFd marker(::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
  if (!marker.valid()) return FailErrno(errno, "create " + path);
  marker.Reset();
  // unshare(CLONE_NEWNET) moves the calling thread for good, so do it on a throwaway thread and
  // pin the new namespace with a bind mount before that thread exits.
  int err = 0;
  std::thread([&] {
    if (::unshare(CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    if (::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
      err = errno;
    }
  }).join();
  if (err != 0) {
    ::unlink(path.c_str());
    return FailErrno(err, "create netns " + name);
  }
  return NetNs::Open(path);
}

Result<void> DeleteNamed(const std::string& name) {
  std::string path = std::string(kNamedNetnsDir) + "/" + name;
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return FailErrno(errno, "unmount " + path);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return FailErrno(errno, "remove " + path);
  return {};
}

Result<pid_t> SpawnIn(const NetNs& ns, const std::vector<std::string>& argv,
                      const std::vector<std::string>& envp, int stdin_fd, int stdout_fd,
                      int stderr_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (const auto& e : envp) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  if (stdout_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2);
  pid_t pid = -1;
  int err = 0;
  // posix_spawn (a vfork-style clone) starts the child from this thread, so it is born inside the
  // namespace the thread is in; unlike fork it does not copy the parent's page tables, which would
  // add milliseconds to every benchmarked start.
  auto entered = ns.RunIn(
      [&] { err = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data()); });
  posix_spawn_file_actions_destroy(&actions);
  KUBERDMA_TRY(entered);
  if (err != 0) return FailErrno(err, "spawn " + argv.at(0));
  return pid;
}

}  // namespace kuberdma::testing
