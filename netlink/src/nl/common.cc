// SPDX-License-Identifier: Apache-2.0
// Shared libnl3 plumbing of the node library.
#include "kuberdma/nl/common.h"

#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <string>

namespace kuberdma::nl {

namespace {
constexpr int kRecvTimeoutSec = 5;
}  // namespace

Error NlError(int nlerr, std::string_view what) {
  int e = nlerr < 0 ? -nlerr : nlerr;
  ErrorCode code = ErrorCode::kIo;
  switch (e) {
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV:
    case NLE_NOADDR:  // EADDRNOTAVAIL: no such address on the link
      code = ErrorCode::kNotFound;
      break;
    case NLE_EXIST:
      code = ErrorCode::kAlreadyExists;
      break;
    case NLE_INVAL:
    case NLE_RANGE:
    case NLE_MSGSIZE:
      code = ErrorCode::kInvalidArgument;
      break;
    case NLE_PERM:
      code = ErrorCode::kPermissionDenied;
      break;
    case NLE_BUSY:
    case NLE_AGAIN:
      code = ErrorCode::kBusy;
      break;
    case NLE_OPNOTSUPP:
    case NLE_PROTO_MISMATCH:
    case NLE_AF_NOSUPPORT:
      code = ErrorCode::kUnsupported;
      break;
    default:
      break;
  }
  std::string msg(what);
  msg += ": ";
  msg += nl_geterror(e);
  return {code, std::move(msg)};
}

std::vector<uint8_t> MsgBytes(nl_msg* msg) {
  const nlmsghdr* h = nlmsg_hdr(msg);
  const auto* p = reinterpret_cast<const uint8_t*>(h);
  return {p, p + h->nlmsg_len};
}

void NlSocketCache::Deleter::operator()(nl_sock* s) const { nl_socket_free(s); }
NlSocketCache::NlSocketCache() = default;
NlSocketCache::~NlSocketCache() = default;

Result<nl_sock*> NlSocketCache::Get(const netns::NetNs& ns, int protocol, bool auto_ack) {
  auto key = std::make_pair(ns.inode(), protocol);
  if (auto it = socks_.find(key); it != socks_.end()) return it->second.get();
  std::unique_ptr<nl_sock, Deleter> sock(nl_socket_alloc());
  if (!sock) return Fail(ErrorCode::kIo, "allocate netlink socket");
  if (!auto_ack) nl_socket_disable_auto_ack(sock.get());
  int err = 0;
  KUBERDMA_TRY(ns.RunIn([&] { err = nl_connect(sock.get(), protocol); }));
  if (err < 0)
    return Fail(NlError(
        err, "connect netlink protocol " + std::to_string(protocol) + " in netns " + ns.path()));
  timeval tv{kRecvTimeoutSec, 0};
  setsockopt(nl_socket_get_fd(sock.get()), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  nl_sock* raw = sock.get();
  socks_.emplace(key, std::move(sock));
  return raw;
}

void MsgFree::operator()(nl_msg* m) const { nlmsg_free(m); }

namespace {

int CollectReply(nl_msg* msg, void* arg) {
  auto* out = static_cast<std::vector<std::vector<uint8_t>>*>(arg);
  const nlmsghdr* h = nlmsg_hdr(msg);
  const auto* p = reinterpret_cast<const uint8_t*>(h);
  out->emplace_back(p, p + h->nlmsg_len);
  return NL_OK;
}

}  // namespace

int SendAndCollect(nl_sock* sock, const std::vector<uint8_t>& msg,
                   std::vector<std::vector<uint8_t>>* replies) {
  std::vector<uint8_t> copy = msg;
  MsgPtr m(nlmsg_convert(reinterpret_cast<nlmsghdr*>(copy.data())));
  if (!m) return -NLE_NOMEM;
  int err = nl_send_auto(sock, m.get());
  if (err < 0) return err;
  nl_socket_modify_cb(sock, NL_CB_VALID, NL_CB_CUSTOM, CollectReply, replies);
  err = nl_recvmsgs_default(sock);
  return err < 0 ? err : 0;
}

int SendAndAck(nl_sock* sock, const std::vector<uint8_t>& msg) {
  std::vector<uint8_t> copy = msg;  // nlmsg_convert copies, but takes a mutable header
  MsgPtr m(nlmsg_convert(reinterpret_cast<nlmsghdr*>(copy.data())));
  if (!m) return -NLE_NOMEM;
  int err = nl_send_auto(sock, m.get());
  if (err >= 0) err = nl_wait_for_ack(sock);
  return err < 0 ? err : 0;
}

}  // namespace kuberdma::nl
