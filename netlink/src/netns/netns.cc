// SPDX-License-Identifier: Apache-2.0
// Network namespace handles over setns(2), and named namespaces over bind mounts.
#include "kuberdma/netns/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <vector>

#include "kuberdma/base/check.h"
#include "kuberdma/base/files.h"

namespace kuberdma::netns {

Result<NetNs> NetNs::Open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return FailErrno(errno, "open netns " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return FailErrno(errno, "stat netns " + path);
  // A bind-mounted namespace file is a regular file on nsfs; a plain empty file left behind by
  // a dead `ip netns` is a regular file on the parent file system. Tell them apart by device:
  // every nsfs inode shares the device of /proc/self/ns/net.
  struct stat self {};
  if (::stat("/proc/self/ns/net", &self) == 0 && st.st_dev != self.st_dev) {
    return Fail(ErrorCode::kNotFound,
                "netns " + path + " is not a mounted namespace (the pod sandbox is gone)");
  }
  return NetNs(std::move(fd), path, st.st_dev, st.st_ino);
}

Result<NetNs> NetNs::Current() { return Open("/proc/thread-self/ns/net"); }

NetNs NetNs::ForTesting(std::string path, ino_t inode) {
  return NetNs(UniqueFd(), std::move(path), 0, inode);
}

Result<NetNs> NetNs::Dup() const {
  if (!fd_.valid()) return NetNs(UniqueFd(), path_, dev_, ino_);
  UniqueFd fd(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!fd.valid()) return FailErrno(errno, "dup netns " + path_);
  return NetNs(std::move(fd), path_, dev_, ino_);
}

Result<void> NetNs::RunIn(const std::function<void()>& fn) const {
  KUBERDMA_ASSIGN_OR_RETURN(NetNs self, Current());
  if (self.SameAs(*this)) {
    fn();
    return {};
  }
  if (::setns(fd_.get(), CLONE_NEWNET) != 0) return FailErrno(errno, "enter netns " + path_);
  fn();
  // A thread stranded in a pod's namespace would run every later operation in the wrong place:
  // that is a broken invariant, not an error to hand back.
  KUBERDMA_CHECK(::setns(self.fd(), CLONE_NEWNET) == 0);
  return {};
}

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

}  // namespace kuberdma::netns
