// SPDX-License-Identifier: Apache-2.0
// UmadHopProbe: the two SMPs through rdma-core's libibumad, on the HCA port's umad device.
#include <infiniband/umad.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "kuberdma/smp/smp.h"

namespace kuberdma::smp {
namespace {

// An open umad port with our directed-route agent, closed on every path out.
class UmadPort {
 public:
  ~UmadPort() {
    if (agent_ >= 0) (void)umad_unregister(fd_, agent_);
    if (fd_ >= 0) (void)umad_close_port(fd_);
  }
  Result<void> Open(const std::string& hca, int port) {
    std::string where = hca + " port " + std::to_string(port);
    if (umad_init() < 0) {
      return Fail(ErrorCode::kUnsupported, "no umad support here (load ib_umad) for " + where);
    }
    std::vector<char> name(hca.begin(), hca.end());
    name.push_back('\0');
    fd_ = umad_open_port(name.data(), port);
    if (fd_ < 0) return FailErrno(-fd_, "open the umad device of " + where);
    agent_ = umad_register(fd_, kDirectedRouteClass, 1, 0, nullptr);
    if (agent_ < 0) return FailErrno(-agent_, "register a directed-route agent on " + where);
    return {};
  }
  // Sends HopQuery(attr) out of `port` and returns the answer's MAD.
  Result<std::vector<uint8_t>> Ask(Attr attr, int port, std::chrono::milliseconds timeout) {
    int ms = static_cast<int>(timeout.count());
    std::vector<uint8_t> buf(umad_size() + kMadSize);
    auto q = HopQuery(attr, static_cast<uint8_t>(port), ++tid_);
    std::memcpy(umad_get_mad(buf.data()), q.data(), kMadSize);
    umad_set_addr(buf.data(), 0xffff, 0, 0, 0);
    if (int r = umad_send(fd_, agent_, buf.data(), kMadSize, ms, 2); r < 0) {
      return FailErrno(-r, "send an SMP");
    }
    int len = kMadSize;
    if (int r = umad_recv(fd_, buf.data(), &len, ms); r < 0) {
      return Fail(ErrorCode::kTimeout, "no SMP answer within " + std::to_string(ms) + " ms");
    }
    if (int st = umad_status(buf.data()); st != 0) {
      return Fail(ErrorCode::kTimeout, "the SMP was not answered (" + std::string(strerror(st)) +
                                           "): the port is down or its peer does not answer");
    }
    auto* mad = static_cast<uint8_t*>(umad_get_mad(buf.data()));
    return std::vector<uint8_t>(mad, mad + kMadSize);
  }

 private:
  int fd_ = -1;
  int agent_ = -1;
  uint64_t tid_ = 0x6b72000000000000ULL;  // "kr": ours among the port's transactions
};

}  // namespace

Result<lldp::Neighbor> UmadHopProbe::Neighbor(const std::string& hca, int port,
                                              std::chrono::milliseconds timeout) {
  UmadPort p;
  KUBERDMA_TRY(p.Open(hca, port));
  KUBERDMA_ASSIGN_OR_RETURN(auto info_mad, p.Ask(Attr::kNodeInfo, port, timeout));
  KUBERDMA_ASSIGN_OR_RETURN(NodeInfo info, ParseNodeInfo(info_mad));
  KUBERDMA_ASSIGN_OR_RETURN(auto desc_mad, p.Ask(Attr::kNodeDescription, port, timeout));
  KUBERDMA_ASSIGN_OR_RETURN(std::string desc, ParseNodeDescription(desc_mad));
  return ToNeighbor(info, desc);
}

}  // namespace kuberdma::smp
