// SPDX-License-Identifier: Apache-2.0
// rdma-validate-ucx.so: the UCX probe (`--transport ucx`), loaded by rdma-validate only for it:
// it needs the job image's UCX (libucp.so.0), so rdma-validate itself still needs nothing but
// glibc. One phase a call, between two pods that meet over the control channel (control.h): a UCP
// context on the devices asked for (UCX's NET_DEVICES), worker addresses exchanged, an endpoint;
// then "tag": `iters` tagged messages of `bytes` from the client to the server (rendezvous above
// UCX's threshold), or "rma": `iters` puts of `bytes` into a buffer the server mapped and sent the
// key of. The client times it up to the server's word that all arrived. Everything else UCX reads
// from the environment the validator set (the plan's variables, UCX_LOG_FILE for its ep_cfg lines).
//
//   int kuberdma_ucx_probe(const char* request_json, char* out, size_t out_len)
//   request: {"role": "server"|"client", "peer": "10.0.0.1:29520", "devices": "mlx5_0:1",
//             "phase": "tag"|"rma", "bytes": 8388608, "iters": 16, "timeoutS": 60}
//   out: {"ok": true, "seconds": 0.12, "bytes": 134217728, "version": "1.13.1"}
//        (or {"error": "..."}); returns 0, or 1 with out = the error.
#include <dlfcn.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../modules/control.h"

namespace kuberdma::validator {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Request {
  bool server = false;
  std::string peer, devices, phase;
  size_t bytes = size_t{8} << 20;
  int iters = 16;
  int timeout_s = 60;
};

std::string Hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  const auto* b = static_cast<const uint8_t*>(p);
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[b[i] >> 4];
    s += d[b[i] & 15];
  }
  return s;
}

std::vector<uint8_t> Unhex(const std::string& s) {
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

// A UCP context, worker and endpoint, torn down in reverse.
class Ucp {
 public:
  ~Ucp();
  Result<void> Init(const std::string& devices);
  std::string Address() const { return Hex(address_, address_len_); }
  Result<void> Connect(const std::string& remote_hex);
  // Waits for a non-blocking operation's request (or its immediate status).
  Result<void> Wait(ucs_status_ptr_t req, const char* what, int timeout_s);
  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  ucp_ep_h ep() const { return ep_; }
  // What a wait on the peer calls: UCX answers a wireup or a rendezvous only when progressed.
  std::function<void()> Progress() {
    return [w = worker_] { ucp_worker_progress(w); };
  }

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_ = nullptr;
  size_t address_len_ = 0;
  ucp_ep_h ep_ = nullptr;
  std::vector<uint8_t> remote_;
};

Result<void> Status(ucs_status_t s, const std::string& what) {
  if (s == UCS_OK) return {};
  return Fail(ErrorCode::kIo, what + ": " + ucs_status_string(s));
}

Result<void> Ucp::Init(const std::string& devices) {
  ucp_config_t* config = nullptr;
  KUBERDMA_TRY(Status(ucp_config_read(nullptr, nullptr, &config), "read UCX's configuration"));
  ucs_status_t modified = ucp_config_modify(config, "NET_DEVICES", devices.c_str());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  ucs_status_t inited =
      modified == UCS_OK ? ucp_init(&params, config, &context_) : UCS_ERR_INVALID_PARAM;
  ucp_config_release(config);
  KUBERDMA_TRY(Status(modified, "UCX NET_DEVICES=" + devices));
  KUBERDMA_TRY(Status(inited, "ucp_init on " + devices));
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  KUBERDMA_TRY(Status(ucp_worker_create(context_, &wp, &worker_), "ucp_worker_create"));
  return Status(ucp_worker_get_address(worker_, &address_, &address_len_), "worker address");
}

Result<void> Ucp::Connect(const std::string& remote_hex) {
  remote_ = Unhex(remote_hex);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(remote_.data());
  return Status(ucp_ep_create(worker_, &ep, &ep_), "ucp_ep_create");
}

Result<void> Ucp::Wait(ucs_status_ptr_t req, const char* what, int timeout_s) {
  if (req == nullptr) return {};
  if (UCS_PTR_IS_ERR(req)) return Status(UCS_PTR_STATUS(req), what);
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  ucs_status_t s = UCS_INPROGRESS;
  while ((s = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    ucp_worker_progress(worker_);
    if (Clock::now() > deadline) {
      ucp_request_cancel(worker_, req);
      ucp_request_free(req);
      return Fail(ErrorCode::kTimeout,
                  std::string(what) + ": not done in " + std::to_string(timeout_s) + " s");
    }
  }
  ucp_request_free(req);
  return Status(s, what);
}

Ucp::~Ucp() {
  if (ep_ != nullptr) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    (void)Wait(ucp_ep_close_nbx(ep_, &p), "close", 5);
  }
  if (address_ != nullptr) ucp_worker_release_address(worker_, address_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

constexpr ucp_tag_t kTag = 0x6b75626572646d61;  // "kuberdma"

Result<void> TagPhase(const Request& rq, Ucp& u, std::vector<char>& buf) {
  ucp_request_param_t p{};
  for (int i = 0; i < rq.iters; ++i) {
    ucs_status_ptr_t req =
        rq.server ? ucp_tag_recv_nbx(u.worker(), buf.data(), buf.size(), kTag, ~ucp_tag_t{0}, &p)
                  : ucp_tag_send_nbx(u.ep(), buf.data(), buf.size(), kTag, &p);
    KUBERDMA_TRY(u.Wait(req, rq.server ? "tag receive" : "tag send", rq.timeout_s));
  }
  return {};
}

// Memory UCX allocated and registered on every device of the context (ucp_mem_map with
// UCP_MEM_MAP_ALLOCATE, as ucx_perftest and NIXL's agents map theirs): the puts' source and
// target. (Puts from malloc'd memory into memory mapped from a vector hung on the second of two
// rxe rails, each phase in its own process; mapped memory on both sides did not.)
class Mapped {
 public:
  explicit Mapped(ucp_context_h context) : context_(context) {}
  ~Mapped() {
    if (memh_ != nullptr) ucp_mem_unmap(context_, memh_);
  }
  Result<void> Allocate(size_t bytes, char fill) {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = nullptr;
    mp.length = bytes;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    KUBERDMA_TRY(Status(ucp_mem_map(context_, &mp, &memh_), "ucp_mem_map"));
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    KUBERDMA_TRY(Status(ucp_mem_query(memh_, &attr), "ucp_mem_query"));
    address_ = static_cast<char*>(attr.address);
    std::memset(address_, fill, bytes);
    return {};
  }
  char* address() const { return address_; }
  ucp_mem_h memh() const { return memh_; }

 private:
  ucp_context_h context_;
  ucp_mem_h memh_ = nullptr;
  char* address_ = nullptr;
};

// The server maps its buffer and sends the address and key; the client puts into it, then flushes.
Result<void> RmaPhase(const Request& rq, Ucp& u, Control& ctl) {
  Mapped mem(u.context());
  KUBERDMA_TRY(mem.Allocate(rq.bytes, rq.server ? 0 : 'k'));
  if (rq.server) {
    void* rkey = nullptr;
    size_t rkey_len = 0;
    KUBERDMA_TRY(Status(ucp_rkey_pack(u.context(), mem.memh(), &rkey, &rkey_len), "ucp_rkey_pack"));
    ctl.Send(
        json{{"addr", reinterpret_cast<uint64_t>(mem.address())}, {"rkey", Hex(rkey, rkey_len)}}
            .dump());
    ucp_rkey_buffer_release(rkey);
    // Progressed while the client puts: its endpoint's wireup is answered by this worker.
    std::string flushed;
    bool heard = ctl.Receive(&flushed, rq.timeout_s, u.Progress()) && flushed == "flushed";
    return heard ? Result<void>() : Fail(ErrorCode::kTimeout, "the client's puts never ended");
  }
  std::string line;
  if (!ctl.Receive(&line, rq.timeout_s, u.Progress())) {
    return Fail(ErrorCode::kTimeout, "the server sent no memory key");
  }
  json k = json::parse(line, nullptr, false);
  if (!k.is_object()) return Fail(ErrorCode::kIo, "the server's memory key is not JSON");
  std::vector<uint8_t> packed = Unhex(k.value("rkey", std::string()));
  ucp_rkey_h rkey = nullptr;
  KUBERDMA_TRY(Status(ucp_ep_rkey_unpack(u.ep(), packed.data(), &rkey), "ucp_ep_rkey_unpack"));
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
  p.memh = mem.memh();
  Result<void> done;
  for (int i = 0; i < rq.iters && done; ++i) {
    done =
        u.Wait(ucp_put_nbx(u.ep(), mem.address(), rq.bytes, k.value("addr", uint64_t{0}), rkey, &p),
               "put", rq.timeout_s);
  }
  ucp_request_param_t f{};
  if (done) done = u.Wait(ucp_ep_flush_nbx(u.ep(), &f), "flush", rq.timeout_s);
  ucp_rkey_destroy(rkey);
  if (done) ctl.Send("flushed");  // every put is in the server's memory: it may unmap
  return done;
}

// UCX buffers its log file: flushed after each phase, so the caller reads this phase's ep_cfg
// lines.
void FlushUcxLog() {
  void* ucs = ::dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (ucs == nullptr) return;
  if (auto* flush = reinterpret_cast<void (*)()>(::dlsym(ucs, "ucs_log_flush"))) flush();
  ::dlclose(ucs);
}

json Probe(const Request& rq) {
  Ucp u;
  if (auto i = u.Init(rq.devices); !i) return {{"error", i.error().message()}};
  Control ctl;
  if (auto o = ctl.Open(rq.server, rq.peer, rq.timeout_s); !o)
    return {{"error", o.error().message()}};
  std::string theirs;
  if (!ctl.Send(u.Address()) || !ctl.Receive(&theirs, rq.timeout_s)) {
    return {{"error", "the peer at " + rq.peer + " sent no UCX worker address"}};
  }
  if (auto c = u.Connect(theirs); !c) return {{"error", c.error().message()}};
  std::vector<char> buf(rq.phase == "rma" ? 0 : rq.bytes, rq.server ? 0 : 'k');
  auto t0 = Clock::now();
  Result<void> ran = rq.phase == "rma" ? RmaPhase(rq, u, ctl) : TagPhase(rq, u, buf);
  // Both sides done: the client's time covers what arrived at the server.
  std::string word;
  bool met =
      ran && ctl.Send(ran ? "done" : "failed") && ctl.Receive(&word, rq.timeout_s, u.Progress());
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  FlushUcxLog();
  if (!ran) return {{"error", rq.phase + ": " + ran.error().message()}};
  if (!met || word != "done") return {{"error", rq.phase + ": the peer did not finish"}};
  return {{"ok", true},
          {"seconds", seconds},
          {"bytes", static_cast<uint64_t>(rq.bytes) * static_cast<uint64_t>(rq.iters)},
          {"version", ucp_get_version_string()}};
}

}  // namespace
}  // namespace kuberdma::validator

extern "C" int kuberdma_ucx_probe(const char* request_json, char* out, size_t out_len) {
  using namespace kuberdma::validator;  // NOLINT(google-build-using-namespace): the C entry point
  auto write = [&](const nlohmann::json& j, int rc) {
    std::string s = j.dump();
    std::strncpy(out, s.c_str(), out_len - 1);
    out[out_len - 1] = '\0';
    return rc;
  };
  try {
    auto j = nlohmann::json::parse(request_json, nullptr, false);
    if (!j.is_object()) return write({{"error", "ucx: the request is not a JSON object"}}, 1);
    Request rq{.server = j.value("role", "") == "server",
               .peer = j.value("peer", ""),
               .devices = j.value("devices", ""),
               .phase = j.value("phase", "tag"),
               .bytes = j.value("bytes", size_t{8} << 20),
               .iters = j.value("iters", 16),
               .timeout_s = j.value("timeoutS", 60)};
    nlohmann::json r = Probe(rq);
    return write(r, r.contains("error") ? 1 : 0);
  } catch (const std::exception& e) {
    return write({{"error", std::string("ucx: ") + e.what()}}, 1);
  }
}
