// SPDX-License-Identifier: Apache-2.0
// rdma-validate-verbs.so: the verbs probe (`--transport verbs`), loaded by rdma-validate only for
// it, so that rdma-validate itself still needs nothing but glibc (libibverbs and its providers are
// this module's). For each rail, one RC QP between this pod's HCA and the peer's HCA of the same
// rail, over the GID that belongs to this namespace's netdev: RDMA writes both ways (bandwidth),
// then a SEND/RECV ping-pong (latency), as perftest's ib_write_bw and ib_send_lat do by hand.
// The two sides meet over TCP: rank 0 listens, rank 1 connects, each sends its endpoints.
//
//   int kuberdma_verbs_probe(const char* request_json, char* out, size_t out_len)
//   request: {"role": "server"|"client", "peer": "10.0.0.1:29510", "hcas": ["rxe0", ...],
//             "bytes": 1048576, "iters": 16, "latencyIters": 200, "timeoutS": 60}
//   out: {"rails": [{"hca", "ok", "error", "gidIndex", "gid", "writeGBps", "readGBps",
//         "latencyUs", "bytes"}]}  (or {"error": "..."}); returns 0, or 1 with out = the error.
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../modules/control.h"
#include "kuberdma/base/error.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/sock/stream.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::validator {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Endpoint {
  uint32_t qpn = 0, psn = 0, rkey = 0;
  uint64_t addr = 0;
  uint16_t lid = 0;
  std::string gid;  // 16 bytes as 32 hex digits
};

std::string Hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

void Unhex(const std::string& s, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n && 2 * i + 1 < s.size(); ++i)
    out[i] = static_cast<uint8_t>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
}

// One rail's verbs objects, released in reverse order.
class Rail {
 public:
  ~Rail() {
    if (qp_ != nullptr) ibv_destroy_qp(qp_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (ctx_ != nullptr) ibv_close_device(ctx_);
  }
  Rail() = default;
  Rail(const Rail&) = delete;
  Rail& operator=(const Rail&) = delete;

  // Opens `hca` and makes an RC QP over the GID of this namespace's netdev.
  Result<void> Open(const std::string& hca, size_t bytes);
  Result<void> Connect(const Endpoint& remote);
  Endpoint Local() const;
  // `iters` RDMA writes of `bytes` to the peer; seconds.
  Result<double> Write(const Endpoint& remote, size_t bytes, int iters);
  // A SEND/RECV ping-pong of 64 bytes, `iters` round trips; microseconds one way.
  Result<double> PingPong(bool first, int iters);
  int gid_index() const { return gid_index_; }
  std::string gid() const { return Hex(gid_.raw, 16); }

 private:
  Result<void> Wait(int n);
  // The protection domain, memory, CQ and an RC QP in INIT, on the opened device.
  Result<void> MakeQp(const std::string& hca, size_t bytes);
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<char> buf_;
  ibv_port_attr port_{};
  ibv_gid gid_{};
  int gid_index_ = 0;
  uint32_t psn_ = 0;
};

ibv_context* OpenByName(const std::string& hca) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list != nullptr && i < n; ++i)
    if (hca == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
  if (list != nullptr) ibv_free_device_list(list);
  return ctx;
}

Result<void> Rail::Open(const std::string& hca, size_t bytes) {
  ctx_ = OpenByName(hca);
  if (ctx_ == nullptr)
    return Fail(ErrorCode::kIo, "cannot open " + hca + " with libibverbs (no such device here?)");
  if (ibv_query_port(ctx_, 1, &port_) != 0)
    return Fail(ErrorCode::kIo, "cannot query " + hca + " port 1");
  if (port_.link_layer == IBV_LINK_LAYER_ETHERNET) {
    // The GID that is this namespace's: the first RoCE v2 entry for one of its addresses (on an
    // HCA several pods share, every pod's entries are in the table).
    auto h = sysfs::ReadHca(sysfs::SysfsRoot("/"), hca, sysfs::HcaDetail::kTables);
    if (!h || h->ports.empty()) return Fail(ErrorCode::kIo, "cannot read " + hca + "'s GID table");
    const sysfs::Gid* g = sysfs::FirstV2ForAddresses(h->ports[0].gids, netns::NamespaceIpv4());
    if (g == nullptr)
      return Fail(ErrorCode::kIo, hca + " has no RoCE v2 GID for an address in this namespace");
    gid_index_ = static_cast<int>(g->index);
  }
  if (ibv_query_gid(ctx_, 1, gid_index_, &gid_) != 0)
    return Fail(ErrorCode::kIo, "cannot read " + hca + "'s GID");
  return MakeQp(hca, bytes);
}

Result<void> Rail::MakeQp(const std::string& hca, size_t bytes) {
  buf_.assign(bytes, 0);
  pd_ = ibv_alloc_pd(ctx_);
  mr_ = pd_ == nullptr ? nullptr
                       : ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  cq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
  if (mr_ == nullptr || cq_ == nullptr)
    return Fail(ErrorCode::kIo, "cannot register memory or a CQ on " + hca);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap = {.max_send_wr = 128, .max_recv_wr = 128, .max_send_sge = 1, .max_recv_sge = 1};
  qp_ = ibv_create_qp(pd_, &init);
  if (qp_ == nullptr) return Fail(ErrorCode::kIo, "cannot create an RC QP on " + hca);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp_, &a,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    return Fail(ErrorCode::kIo, "cannot move " + hca + "'s QP to INIT");
  psn_ = static_cast<uint32_t>(::getpid() & 0xffffff);
  return {};
}

Endpoint Rail::Local() const {
  return {.qpn = qp_->qp_num,
          .psn = psn_,
          .rkey = mr_->rkey,
          .addr = reinterpret_cast<uint64_t>(buf_.data()),
          .lid = port_.lid,
          .gid = gid()};
}

Result<void> Rail::Connect(const Endpoint& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = port_.active_mtu;
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.port_num = 1;
  if (port_.link_layer == IBV_LINK_LAYER_ETHERNET || remote.lid == 0) {
    a.ah_attr.is_global = 1;
    Unhex(remote.gid, a.ah_attr.grh.dgid.raw, 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (ibv_modify_qp(qp_, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return Fail(ErrorCode::kIo,
                "cannot move the QP to RTR (the peer's GID " + remote.gid + " unreachable?)");
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.sq_psn = psn_;
  s.max_rd_atomic = 1;
  if (ibv_modify_qp(qp_, &s,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    return Fail(ErrorCode::kIo, "cannot move the QP to RTS");
  return {};
}

Result<void> Rail::Wait(int n) {
  auto deadline = Clock::now() + std::chrono::seconds(30);
  ibv_wc wc[16];
  while (n > 0) {
    int got = ibv_poll_cq(cq_, std::min(n, 16), wc);  // never more than asked: none is lost
    if (got < 0) return Fail(ErrorCode::kIo, "polling the CQ failed");
    for (int i = 0; i < got; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        return Fail(ErrorCode::kIo,
                    std::string("work request failed: ") + ibv_wc_status_str(wc[i].status));
      }
    }
    n -= got;
    if (Clock::now() > deadline) {
      return Fail(ErrorCode::kTimeout,
                  "no completion within 30 s (the link is down or the peer is gone)");
    }
  }
  return {};
}

Result<double> Rail::Write(const Endpoint& remote, size_t bytes, int iters) {
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    ibv_sge sge{.addr = reinterpret_cast<uint64_t>(buf_.data()),
                .length = static_cast<uint32_t>(bytes),
                .lkey = mr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote.addr;
    wr.wr.rdma.rkey = remote.rkey;
    if (ibv_post_send(qp_, &wr, &bad) != 0)
      return Fail(ErrorCode::kIo, "cannot post an RDMA write");
    KUBERDMA_TRY(Wait(1));
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Result<double> Rail::PingPong(bool first, int iters) {
  ibv_sge sge{.addr = reinterpret_cast<uint64_t>(buf_.data()), .length = 64, .lkey = mr_->lkey};
  auto recv = [&] {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(qp_, &wr, &bad) == 0;
  };
  auto send = [&]() -> Result<void> {
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(qp_, &wr, &bad) != 0) return Fail(ErrorCode::kIo, "cannot post a send");
    return Wait(1);
  };
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (!recv()) return Fail(ErrorCode::kIo, "cannot post a receive");
    if (first) KUBERDMA_TRY(send());
    KUBERDMA_TRY(Wait(1));  // the peer's message
    if (!first) KUBERDMA_TRY(send());
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / (2.0 * iters);
}

// The TCP rendezvous: a line of JSON each way, and one-line barriers.
json EndpointJson(const Endpoint& e) {
  return {{"qpn", e.qpn},   {"psn", e.psn}, {"rkey", e.rkey},
          {"addr", e.addr}, {"lid", e.lid}, {"gid", e.gid}};
}

Endpoint EndpointOf(const json& j) {
  return {.qpn = j.value("qpn", 0u),
          .psn = j.value("psn", 0u),
          .rkey = j.value("rkey", 0u),
          .addr = j.value("addr", uint64_t{0}),
          .lid = j.value("lid", uint16_t{0}),
          .gid = j.value("gid", "")};
}

struct Request {
  bool server = false;
  std::string peer;
  std::vector<std::string> hcas;
  size_t bytes = 1 << 20;
  int iters = 16, latency_iters = 200, timeout_s = 60;
};

// The client writes, then the server: this side's seconds once both finished.
Result<double> Writes(const Request& rq, Rail& rail, const Endpoint& remote, Control& ctl) {
  double mine = 0;
  std::string line;
  for (bool my_turn : {!rq.server, rq.server}) {
    if (my_turn) {
      auto t = rail.Write(remote, rq.bytes, rq.iters);
      if (!ctl.Send(t ? "wrote" : "failed " + t.error().message()) || !t) {
        return t ? Fail(ErrorCode::kIo, "the writes did not complete") : Fail(t.error());
      }
      mine = *t;
    } else if (!ctl.Receive(&line, rq.timeout_s) || line != "wrote") {
      return Fail(ErrorCode::kIo, line.empty() ? "the peer's writes did not finish within " +
                                                     std::to_string(rq.timeout_s) +
                                                     " s (a slow or lossy link?)"
                                               : "the peer: " + line);
    }
  }
  if (mine <= 0) return Fail(ErrorCode::kIo, "the writes did not complete");
  return mine;
}

// One rail, both sides in lock step over `ctl`: connect, the client writes, the server writes,
// then the ping-pong.
json ProbeRail(const Request& rq, Rail& rail, const Endpoint& remote, Control& ctl) {
  json r = {{"gidIndex", rail.gid_index()}, {"gid", rail.gid()}, {"ok", false}};
  auto connected = rail.Connect(remote);
  std::string line;
  bool synced = ctl.Send("ready") && ctl.Receive(&line, rq.timeout_s);
  if (!connected || !synced) {
    r["error"] = !connected ? connected.error().message() : "the peer did not get ready";
    return r;
  }
  auto written = Writes(rq, rail, remote, ctl);
  if (!written) {
    r["error"] = written.error().message();
    return r;
  }
  auto lat = rail.PingPong(!rq.server, rq.latency_iters);
  r["writeGBps"] = static_cast<double>(rq.bytes) * rq.iters / *written / 1e9;
  r["bytes"] = rq.bytes * static_cast<size_t>(rq.iters);
  r["latencyUs"] = lat ? *lat : -1.0;
  r["ok"] = lat && *lat > 0;
  if (!lat) r["error"] = "ping-pong: " + lat.error().message();
  return r;
}

json Probe(const Request& rq) {
  std::vector<std::unique_ptr<Rail>> rails;
  json local = json::array();
  json out = {{"rails", json::array()}};
  for (const auto& h : rq.hcas) {
    rails.push_back(std::make_unique<Rail>());
    auto opened = rails.back()->Open(h, rq.bytes);
    local.push_back(opened ? EndpointJson(rails.back()->Local())
                           : json{{"error", opened.error().message()}});
  }
  Control ctl;
  if (auto opened = ctl.Open(rq.server, rq.peer, rq.timeout_s); !opened) {
    return {{"error", opened.error().message()}};
  }
  std::string line;
  if (!ctl.Send(local.dump()) || !ctl.Receive(&line, rq.timeout_s)) {
    return {{"error", "the peer at " + rq.peer + " sent no endpoints"}};
  }
  json remote = json::parse(line, nullptr, false);
  for (size_t i = 0; i < rails.size(); ++i) {
    const json& mine = local[i];
    json theirs = remote.is_array() && i < remote.size() ? remote[i] : json{{"error", "none"}};
    json r;
    if (mine.contains("error") || theirs.contains("error")) {
      r = {{"ok", false},
           {"error", mine.contains("error") ? mine["error"].get<std::string>()
                                            : "the peer's HCA of this rail: " +
                                                  theirs.value("error", std::string("?"))}};
    } else {
      r = ProbeRail(rq, *rails[i], EndpointOf(theirs), ctl);
    }
    r["hca"] = rq.hcas[i];
    out["rails"].push_back(r);
  }
  return out;
}

}  // namespace
}  // namespace kuberdma::validator

extern "C" int kuberdma_verbs_probe(const char* request_json, char* out, size_t out_len) {
  using namespace kuberdma::validator;  // NOLINT(google-build-using-namespace): the C entry point
  auto write = [&](const nlohmann::json& j, int rc) {
    std::string s = j.dump();
    std::strncpy(out, s.c_str(), out_len - 1);
    out[out_len - 1] = '\0';
    return rc;
  };
  try {
    auto j = nlohmann::json::parse(request_json, nullptr, false);
    if (!j.is_object()) return write({{"error", "verbs: the request is not a JSON object"}}, 1);
    Request rq{.server = j.value("role", "") == "server",
               .peer = j.value("peer", ""),
               .hcas = j.value("hcas", std::vector<std::string>{}),
               .bytes = j.value("bytes", size_t{1} << 20),
               .iters = j.value("iters", 16),
               .latency_iters = j.value("latencyIters", 200),
               .timeout_s = j.value("timeoutS", 60)};
    nlohmann::json r = Probe(rq);
    return write(r, r.contains("error") ? 1 : 0);
  } catch (const std::exception& e) {
    return write({{"error", std::string("verbs: ") + e.what()}}, 1);
  }
}
