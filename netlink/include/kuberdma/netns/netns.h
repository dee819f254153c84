// SPDX-License-Identifier: Apache-2.0
// Network namespace handles: open one by path, compare two, run code inside one. (Creating named
// namespaces is test support: kuberdma/testing/test_net.h.)
//
//   KUBERDMA_ASSIGN_OR_RETURN(NetNs pod, NetNs::Open("/var/run/netns/cni-1234"));
//   KUBERDMA_TRY(pod.RunIn([&] { sock = OpenNetlinkSocket(); }));  // socket lives in `pod`
//
// This library is the only place in kube-rdma that calls setns(2).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"

namespace kuberdma::netns {

class NetNs {
 public:
  // Opens the namespace at `path` (a bind mount such as /var/run/netns/x, or /proc/<pid>/ns/net).
  // kNotFound when it does not exist (the pod is gone); kInvalidArgument when `path` is not a
  // network namespace.
  static Result<NetNs> Open(const std::string& path);

  // The calling thread's current network namespace.
  static Result<NetNs> Current();

  // A handle that names a namespace but holds no descriptor; only for fakes in unit tests.
  static NetNs ForTesting(std::string path, ino_t inode);

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  ino_t inode() const { return ino_; }
  bool SameAs(const NetNs& other) const { return dev_ == other.dev_ && ino_ == other.ino_; }

  // Runs `fn` with the calling thread inside this namespace and moves the thread back before
  // returning. Sockets created by `fn` stay bound to this namespace. Only the calling thread is
  // affected. Fails (without running `fn`) when the namespace cannot be entered.
  Result<void> RunIn(const std::function<void()>& fn) const;

  NetNs(NetNs&&) = default;
  NetNs& operator=(NetNs&&) = default;

  // Returns an independent handle to the same namespace (dup of the descriptor).
  Result<NetNs> Dup() const;

 private:
  NetNs(UniqueFd fd, std::string path, dev_t dev, ino_t ino)
      : fd_(std::move(fd)), path_(std::move(path)), dev_(dev), ino_(ino) {}
  UniqueFd fd_;
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// The IPv4 addresses of the calling thread's network namespace (getifaddrs), in text: what a pod
// is, for telling its GID entries from other pods' on a shared HCA. Empty when none can be read.
std::vector<std::string> NamespaceIpv4();

}  // namespace kuberdma::netns
