// SPDX-License-Identifier: Apache-2.0
// Network namespace handles over setns(2).
#include "kuberdma/netns/netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "kuberdma/base/check.h"

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
  // A mount, pid or user namespace file is on nsfs too; setns(CLONE_NEWNET) would only fail
  // later, with EINVAL. NS_GET_NSTYPE (Linux 4.11) says which kind it is.
  int type = ::ioctl(fd.get(), NS_GET_NSTYPE);
  if (type >= 0 && type != CLONE_NEWNET) {
    return Fail(ErrorCode::kInvalidArgument, "netns " + path + " is not a network namespace");
  }
  return NetNs(std::move(fd), path, st.st_dev, st.st_ino);
}

Result<NetNs> NetNs::Current() { return Open("/proc/thread-self/ns/net"); }

NetNs NetNs::ForTesting(std::string path, ino_t inode) {
  return {UniqueFd(), std::move(path), 0, inode};
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

std::vector<std::string> NamespaceIpv4() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = "";
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    out.emplace_back(text);
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace kuberdma::netns
