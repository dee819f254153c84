// SPDX-License-Identifier: Apache-2.0
// RdmaOps over libnl3 and NETLINK_RDMA, in the manner of rdma-core's util/rdma_nl.c.
#include "kuberdma/rdma/netlink_rdma_ops.h"

#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>

#include "kuberdma/base/unique_fd.h"
#include "kuberdma/nl/common.h"

namespace kuberdma::rdma {

namespace {

Error NoRdma() {
  return {ErrorCode::kUnsupported,
          "this kernel has no RDMA subsystem (NETLINK_RDMA is not available: is ib_core "
          "loaded and an RDMA driver such as mlx5_ib present?)",
          EPROTONOSUPPORT};
}

}  // namespace

bool KernelHasRdma() {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA));
  return fd.valid();
}

NetlinkRdmaOps::NetlinkRdmaOps() = default;
NetlinkRdmaOps::~NetlinkRdmaOps() = default;

Result<nl_sock*> NetlinkRdmaOps::Socket(const NetNs& ns) {
  // Whether the family exists does not depend on the namespace: ask once, plainly.
  if (!KernelHasRdma()) return Fail(NoRdma());
  // Requests carry their own NLM_F_ACK where an ACK is wanted (SET); GETs get their reply.
  return socks_.Get(ns, NETLINK_RDMA, false);
}

Result<std::vector<std::vector<uint8_t>>> NetlinkRdmaOps::Request(const NetNs& ns,
                                                                  const std::vector<uint8_t>& msg,
                                                                  const std::string& what) {
  KUBERDMA_ASSIGN_OR_RETURN(nl_sock * sock, Socket(ns));
  // A SET asks for an ACK (EncodeSysSet, EncodeMove, EncodeRename); a GET gets its answer.
  const bool wants_ack =
      (reinterpret_cast<const nlmsghdr*>(msg.data())->nlmsg_flags & NLM_F_ACK) != 0;
  std::vector<std::vector<uint8_t>> replies;
  int err = wants_ack ? nl::SendAndAck(sock, msg) : nl::SendAndCollect(sock, msg, &replies);
  if (err < 0) return Fail(nl::NlError(err, what));
  return replies;
}

Result<std::vector<RdmaDevice>> NetlinkRdmaOps::List(const NetNs& ns) {
  KUBERDMA_ASSIGN_OR_RETURN(auto replies,
                            Request(ns, EncodeDeviceGet(0), "list RDMA devices in " + ns.path()));
  std::vector<RdmaDevice> out;
  for (const auto& r : replies) {
    KUBERDMA_ASSIGN_OR_RETURN(RdmaDevice d, DecodeDevice(r));
    out.push_back(std::move(d));
  }
  return out;
}

Result<RdmaDevice> NetlinkRdmaOps::GetByName(const NetNs& ns, const std::string& name) {
  KUBERDMA_ASSIGN_OR_RETURN(auto devs, List(ns));
  for (auto& d : devs) {
    if (d.name == name) return std::move(d);
  }
  return Fail(ErrorCode::kNotFound, "no RDMA device " + name + " in netns " + ns.path());
}

Result<RdmaPort> NetlinkRdmaOps::GetPort(const NetNs& ns, uint32_t dev_index, uint32_t port) {
  std::string what = "get RDMA port " + std::to_string(dev_index) + "/" + std::to_string(port);
  KUBERDMA_ASSIGN_OR_RETURN(auto replies, Request(ns, EncodePortGet(dev_index, port), what));
  if (replies.empty()) return Fail(ErrorCode::kNotFound, what + ": no reply");
  return DecodePort(replies.front());
}

Result<NetnsMode> NetlinkRdmaOps::GetNetnsMode(const NetNs& ns) {
  KUBERDMA_ASSIGN_OR_RETURN(auto replies, Request(ns, EncodeSysGet(), "get RDMA netns mode"));
  if (replies.empty()) return Fail(ErrorCode::kIo, "get RDMA netns mode: no reply");
  return DecodeSys(replies.front());
}

Result<void> NetlinkRdmaOps::SetNetnsMode(const NetNs& ns, NetnsMode mode) {
  auto r =
      Request(ns, EncodeSysSet(mode), "set RDMA netns mode " + std::string(NetnsModeName(mode)));
  if (!r && r.error().code() == ErrorCode::kBusy) {
    // ib_core refuses the switch while any network namespace besides the host's exists.
    return Fail(ErrorCode::kBusy,
                r.error().message() +
                    ": the kernel changes the mode only while no other network "
                    "namespace exists (pods, containers); set it at boot instead: options ib_core "
                    "netns_mode=" +
                    (mode == NetnsMode::kShared ? "1" : "0") + " in /etc/modprobe.d, then reboot");
  }
  if (!r) return Fail(r.error());
  return {};
}

Result<void> NetlinkRdmaOps::MoveTo(const NetNs& from, uint32_t dev_index, const NetNs& to) {
  auto r = Request(from, EncodeMove(dev_index, to.fd()),
                   "move RDMA device " + std::to_string(dev_index) + " from netns " + from.path() +
                       " to netns " + to.path());
  if (!r) return Fail(r.error());
  return {};
}

Result<void> NetlinkRdmaOps::Rename(const NetNs& ns, uint32_t dev_index, const std::string& name) {
  auto r = Request(ns, EncodeRename(dev_index, name),
                   "rename RDMA device " + std::to_string(dev_index) + " to " + name);
  if (!r) return Fail(r.error());
  return {};
}

}  // namespace kuberdma::rdma
