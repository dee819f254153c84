// SPDX-License-Identifier: Apache-2.0
// Internal to the node library: what the rtnetlink and RDMA netlink operations share over libnl3.
// One socket per (namespace, protocol), created with the thread briefly inside the namespace and
// bounded by a receive timeout; libnl errors translated into Error; a message's bytes.
//
//   NlSocketCache socks;
//   KUBERDMA_ASSIGN_OR_RETURN(nl_sock* s, socks.Get(pod, NETLINK_ROUTE, /*auto_ack=*/true));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/netns/netns.h"

struct nl_sock;
struct nl_msg;

namespace kuberdma::nl {

// Translates a libnl error (negative NLE_*) into an Error with `what` as context.
Error NlError(int nlerr, std::string_view what);

// The bytes of a built message (header included).
std::vector<uint8_t> MsgBytes(nl_msg* msg);

// Owns a libnl message.
struct MsgFree {
  void operator()(nl_msg* m) const;
};
using MsgPtr = std::unique_ptr<nl_msg, MsgFree>;

// Sends the request whose bytes are `msg` (header included, NLM_F_ACK set) on `sock` and waits
// for the kernel's answer: 0 when it acknowledged, else the libnl error (negative NLE_*), for the
// caller to translate with its own context (NlError, or a meaning of its own).
int SendAndAck(nl_sock* sock, const std::vector<uint8_t>& msg);

// Sends the request `msg` (a GET, or a dump) on `sock` and appends every message of the answer to
// `replies`: 0, or the libnl error (negative NLE_*) as SendAndAck does.
int SendAndCollect(nl_sock* sock, const std::vector<uint8_t>& msg,
                   std::vector<std::vector<uint8_t>>* replies);

class NlSocketCache {
 public:
  NlSocketCache();
  ~NlSocketCache();
  NlSocketCache(const NlSocketCache&) = delete;
  NlSocketCache& operator=(const NlSocketCache&) = delete;

  // The socket of `protocol` in `ns`, connected on first use. With `auto_ack` off, requests carry
  // their own NLM_F_ACK where one is wanted. Every receive gives up after a few seconds, so a
  // kernel that never answers cannot hang a caller.
  Result<nl_sock*> Get(const netns::NetNs& ns, int protocol, bool auto_ack);

 private:
  struct Deleter {
    void operator()(nl_sock* s) const;
  };
  std::map<std::pair<ino_t, int>, std::unique_ptr<nl_sock, Deleter>> socks_;
};

}  // namespace kuberdma::nl
