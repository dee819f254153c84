// SPDX-License-Identifier: Apache-2.0
// The NCCL runner: one forked process per local rank, results back over a pipe as one JSON line;
// one loop for every collective, size and place.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/validator/checks.h"
#include "kuberdma/validator/collective.h"
#include "kuberdma/validator/runner.h"

namespace kuberdma::validator {

namespace {

using Clock = std::chrono::steady_clock;

// Waits for a non-blocking communicator to leave ncclInProgress, or aborts it at `deadline`.
ncclResult_t Settle(ncclComm_t comm, Clock::time_point deadline, bool* timed_out) {
  ncclResult_t state = ncclInProgress;
  while (true) {
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (Clock::now() > deadline) {
      *timed_out = true;
      return ncclInProgress;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Waits for the stream's work, polling so that a hung collective cannot block past `deadline`.
// kIo saying what failed, kTimeout past the deadline.
Result<void> StreamDone(cudaStream_t s, ncclComm_t comm, Clock::time_point deadline) {
  while (true) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return {};
    if (q != cudaErrorNotReady) {
      return Fail(ErrorCode::kIo, std::string("CUDA: ") + cudaGetErrorString(q));
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      return Fail(ErrorCode::kIo, std::string("NCCL: ") + ncclGetErrorString(async));
    }
    if (Clock::now() > deadline) {
      return Fail(ErrorCode::kTimeout,
                  "the collective did not complete before the deadline (a peer stalled or a NIC "
                  "dropped traffic)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// A non-blocking communicator, up before the deadline or aborted; "" on success.
std::string InitComm(const CollectiveParams& p, int rank, ncclComm_t* comm, bool* timed_out) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return "ncclGetUniqueId failed (is NCCL_COMM_ID valid?)";
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto deadline = Clock::now() + std::chrono::seconds(p.timeout_s);
  ncclResult_t r = ncclCommInitRankConfig(comm, p.nranks, id, rank, &config);
  if (r == ncclInProgress || r == ncclSuccess) r = Settle(*comm, deadline, timed_out);
  if (*timed_out) {
    ncclCommAbort(*comm);
    return "communicator init did not complete within " + std::to_string(p.timeout_s) + " s";
  }
  if (r != ncclSuccess) {
    if (*comm != nullptr) ncclCommAbort(*comm);
    return std::string("communicator init failed: ") + ncclGetErrorString(r);
  }
  return "";
}

ncclDataType_t NcclType(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kUint32:
      return ncclUint32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUint64:
      return ncclUint64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBfloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
  }
  return ncclFloat32;
}

ncclRedOp_t NcclOp(RedOp o) {
  switch (o) {
    case RedOp::kSum:
      return ncclSum;
    case RedOp::kProd:
      return ncclProd;
    case RedOp::kMax:
      return ncclMax;
    case RedOp::kMin:
      return ncclMin;
    case RedOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

// One element of type `t` at `p`, from and to a double (the host side of fill and check).
void Store(DataType t, void* p, double v) {
  switch (t) {
    case DataType::kInt8:
      *static_cast<int8_t*>(p) = static_cast<int8_t>(v);
      break;
    case DataType::kUint8:
      *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
      break;
    case DataType::kInt32:
      *static_cast<int32_t*>(p) = static_cast<int32_t>(v);
      break;
    case DataType::kUint32:
      *static_cast<uint32_t*>(p) = static_cast<uint32_t>(v);
      break;
    case DataType::kInt64:
      *static_cast<int64_t*>(p) = static_cast<int64_t>(v);
      break;
    case DataType::kUint64:
      *static_cast<uint64_t*>(p) = static_cast<uint64_t>(v);
      break;
    case DataType::kFloat16:
      *static_cast<__half*>(p) = __float2half(static_cast<float>(v));
      break;
    case DataType::kBfloat16:
      *static_cast<__nv_bfloat16*>(p) = __float2bfloat16(static_cast<float>(v));
      break;
    case DataType::kFloat32:
      *static_cast<float*>(p) = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      *static_cast<double*>(p) = v;
      break;
  }
}

double Load(DataType t, const void* p) {
  switch (t) {
    case DataType::kInt8:
      return *static_cast<const int8_t*>(p);
    case DataType::kUint8:
      return *static_cast<const uint8_t*>(p);
    case DataType::kInt32:
      return *static_cast<const int32_t*>(p);
    case DataType::kUint32:
      return *static_cast<const uint32_t*>(p);
    case DataType::kInt64:
      return static_cast<double>(*static_cast<const int64_t*>(p));
    case DataType::kUint64:
      return static_cast<double>(*static_cast<const uint64_t*>(p));
    case DataType::kFloat16:
      return __half2float(*static_cast<const __half*>(p));
    case DataType::kBfloat16:
      return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
    case DataType::kFloat32:
      return *static_cast<const float*>(p);
    case DataType::kFloat64:
      return *static_cast<const double*>(p);
  }
  return 0;
}

constexpr size_t kChunk = 16u << 20;  // host staging for fill and check, bytes

// A rank's device buffers, sized for the sweep's largest shape (in-place forms use `recv`, which
// is large enough for either end), and its stream.
struct Buffers {
  char* send = nullptr;
  char* recv = nullptr;
  cudaStream_t stream = nullptr;
  ~Buffers() {
    if (send != nullptr) cudaFree(send);
    if (recv != nullptr) cudaFree(recv);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

std::vector<size_t> Sizes(const CollectiveParams& p) {
  return p.sizes.empty() ? std::vector<size_t>{p.bytes} : p.sizes;
}

std::string Prepare(const CollectiveParams& p, int gpu, Buffers* b) {
  if (cudaSetDevice(gpu) != cudaSuccess) return "cannot use GPU " + std::to_string(gpu);
  size_t ts = TypeSize(p.spec.type);
  size_t send = 0;
  size_t recv = 0;
  for (size_t bytes : Sizes(p)) {
    Shape sh = ShapeOf(p.spec, bytes, p.nranks);
    send = std::max(send, sh.send * ts);
    recv = std::max({recv, sh.recv * ts, sh.send * ts});
  }
  if (cudaMalloc(&b->send, std::max<size_t>(send, 1)) != cudaSuccess ||
      cudaMalloc(&b->recv, std::max<size_t>(recv, 1)) != cudaSuccess) {
    return "cannot allocate " + std::to_string(send + recv) + " bytes on GPU " +
           std::to_string(gpu);
  }
  cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking);
  return "";
}

// Writes rank `rank`'s send data (elements [0, n)) to device memory `dst`.
void Fill(const CollectiveSpec& s, int rank, char* dst, size_t n) {
  size_t ts = TypeSize(s.type);
  std::vector<char> host(std::min(n * ts, kChunk));
  for (size_t at = 0; at < n;) {
    size_t k = std::min(n - at, host.size() / ts);
    for (size_t i = 0; i < k; ++i) Store(s.type, host.data() + i * ts, SendValue(s, rank, at + i));
    cudaMemcpy(dst + at * ts, host.data(), k * ts, cudaMemcpyHostToDevice);
    at += k;
  }
}

// Elements of `src` (the result, `sh.recv` long) that are not what the collective must give.
uint64_t Wrong(const CollectiveSpec& s, const Shape& sh, int nranks, int rank, const char* src) {
  size_t ts = TypeSize(s.type);
  std::vector<char> host(std::min(std::max<size_t>(sh.recv, 1) * ts, kChunk));
  uint64_t wrong = 0;
  for (size_t at = 0; at < sh.recv;) {
    size_t k = std::min(sh.recv - at, host.size() / ts);
    cudaMemcpy(host.data(), src + at * ts, k * ts, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < k; ++i) {
      auto want = ExpectedValue(s, sh, nranks, rank, at + i);
      if (!want) continue;
      double got = Load(s.type, host.data() + i * ts);
      if (std::abs(got - *want) > Tolerance(s, nranks, *want)) ++wrong;
    }
    at += k;
  }
  return wrong;
}

// The buffers one call uses: out of place, the two; in place, NCCL's in-place layout in `recv`.
struct Place {
  char* send;  // written with the send data before each phase
  char* recv;
};
Place Layout(const CollectiveSpec& s, const Shape& sh, int rank, const Buffers& b, bool in_place) {
  if (!in_place) return {b.send, b.recv};
  size_t ts = TypeSize(s.type);
  auto r = static_cast<size_t>(rank);
  switch (s.kind) {
    case Collective::kAllGather:
      return {b.recv + r * sh.send * ts, b.recv};
    case Collective::kReduceScatter:
      return {b.recv, b.recv + r * sh.recv * ts};
    default:
      return {b.recv, b.recv};
  }
}

// Enqueues one collective on the stream.
ncclResult_t Launch(const CollectiveSpec& s, const Shape& sh, int nranks, int rank, Place at,
                    ncclComm_t comm, cudaStream_t st) {
  ncclDataType_t t = NcclType(s.type);
  ncclRedOp_t op = NcclOp(s.op);
  size_t ts = TypeSize(s.type);
  switch (s.kind) {
    case Collective::kAllReduce:
      return ncclAllReduce(at.send, at.recv, sh.send, t, op, comm, st);
    case Collective::kAllGather:
      return ncclAllGather(at.send, at.recv, sh.send, t, comm, st);
    case Collective::kReduceScatter:
      return ncclReduceScatter(at.send, at.recv, sh.recv, t, op, comm, st);
    case Collective::kBroadcast:
      return ncclBroadcast(at.send, at.recv, sh.send, t, s.root, comm, st);
    case Collective::kReduce:
      return ncclReduce(at.send, at.recv, sh.send, t, op, s.root, comm, st);
    case Collective::kAllToAll: {
      size_t piece = sh.send / static_cast<size_t>(nranks);
      ncclGroupStart();
      for (int peer = 0; peer < nranks; ++peer) {
        auto off = static_cast<size_t>(peer) * piece * ts;
        ncclSend(at.send + off, piece, t, peer, comm, st);
        ncclRecv(at.recv + off, piece, t, peer, comm, st);
      }
      return ncclGroupEnd();
    }
    case Collective::kSendRecv: {
      ncclGroupStart();
      ncclSend(at.send, sh.send, t, (rank + 1) % nranks, comm, st);
      ncclRecv(at.recv, sh.recv, t, (rank + nranks - 1) % nranks, comm, st);
      return ncclGroupEnd();
    }
  }
  return ncclInvalidArgument;
}

// `n` calls, then the stream drained; "" or what went wrong (the communicator is then aborted).
std::string Calls(const CollectiveParams& p, const Shape& sh, int rank, Place at, ncclComm_t comm,
                  cudaStream_t st, int n, bool* timed_out) {
  auto deadline = Clock::now() + std::chrono::seconds(p.timeout_s);
  for (int i = 0; i < n; ++i) {
    ncclResult_t r = Launch(p.spec, sh, p.nranks, rank, at, comm, st);
    if (r == ncclInProgress) r = Settle(comm, deadline, timed_out);
    if (r != ncclSuccess) {
      ncclCommAbort(comm);
      return std::string(Name(p.spec.kind)) + ": " +
             (*timed_out ? "timed out" : ncclGetErrorString(r));
    }
  }
  if (auto done = StreamDone(st, comm, deadline); !done) {
    ncclCommAbort(comm);
    *timed_out = Clock::now() > deadline;
    return done.error().message();
  }
  return "";
}

// One size in one place: the warm-up, `repeats` timed phases (the median's seconds per call),
// then fresh data, one call, and the check.
std::string RunPlace(const CollectiveParams& p, const Shape& sh, int rank, Buffers& b,
                     bool in_place, ncclComm_t comm, PlaceResult* out, bool* timed_out) {
  Place at = Layout(p.spec, sh, rank, b, in_place);
  auto fill = [&] { Fill(p.spec, rank, at.send, sh.send); };
  fill();
  if (auto e = Calls(p, sh, rank, at, comm, b.stream, p.warmup, timed_out); !e.empty()) return e;
  std::vector<double> phases;
  for (int k = 0; k < std::max(1, p.repeats); ++k) {
    auto t0 = Clock::now();
    if (auto e = Calls(p, sh, rank, at, comm, b.stream, p.iters, timed_out); !e.empty()) return e;
    phases.push_back(std::chrono::duration<double>(Clock::now() - t0).count() /
                     std::max(1, p.iters));
  }
  std::sort(phases.begin(), phases.end());
  out->seconds = phases[phases.size() / 2];
  out->checked = p.check && (!in_place || sh.in_place_checked);
  if (!out->checked) return "";
  fill();
  if (auto e = Calls(p, sh, rank, at, comm, b.stream, 1, timed_out); !e.empty()) return e;
  out->wrong = Wrong(p.spec, sh, p.nranks, rank, at.recv);
  return "";
}

nlohmann::json PlaceJson(const PlaceResult& r) {
  return {{"seconds", r.seconds}, {"wrong", r.wrong}, {"checked", r.checked}};
}

// Rank 0's row for a size as it completes, on stderr as nccl-tests prints it (stdout is the
// report's): a run of up to half an hour says what it is doing in `kubectl logs`.
void ProgressHeader(const CollectiveParams& p) {
  std::fprintf(stderr,
               "rdma-validate: %s, %s, %s, %d ranks (out of place | in place; times in us, "
               "bandwidths in GB/s)\n%12s %12s %10s %8s %8s %8s | %10s %8s %8s %8s\n",
               std::string(Name(p.spec.kind)).c_str(), std::string(Name(p.spec.type)).c_str(),
               std::string(Name(p.spec.op)).c_str(), p.nranks, "size", "count", "time", "algbw",
               "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
}

void ProgressRow(const CollectiveParams& p, const Shape& sh, const PlaceResult& oop,
                 const PlaceResult& ip) {
  Bandwidth o = CollectiveBandwidth(p.spec.kind, sh.bytes, oop.seconds, p.nranks);
  Bandwidth i = CollectiveBandwidth(p.spec.kind, sh.bytes, ip.seconds, p.nranks);
  std::fprintf(stderr, "%12zu %12zu %10.1f %8.2f %8.2f %8llu | %10.1f %8.2f %8.2f %8llu\n",
               sh.bytes, sh.count, oop.seconds * 1e6, o.algbw_gbps, o.busbw_gbps,
               static_cast<unsigned long long>(oop.wrong), ip.seconds * 1e6, i.algbw_gbps,
               i.busbw_gbps, static_cast<unsigned long long>(ip.wrong));
}

// Every size, out of place then in place; "" or the error (the communicator then aborted).
std::string RunSizes(const CollectiveParams& p, int rank, Buffers& b, ncclComm_t comm,
                     nlohmann::json* sizes, uint64_t* wrong, double* seconds, bool* timed_out) {
  if (rank == 0) ProgressHeader(p);
  for (size_t bytes : Sizes(p)) {
    Shape sh = ShapeOf(p.spec, bytes, p.nranks);
    PlaceResult oop;
    if (auto e = RunPlace(p, sh, rank, b, false, comm, &oop, timed_out); !e.empty()) return e;
    nlohmann::json j = {{"bytes", sh.bytes}, {"count", sh.count}, {"oop", PlaceJson(oop)}};
    *wrong += oop.wrong;
    *seconds = oop.seconds;
    {  // in place: every collective, as nccl-tests times it (checked where defined)
      PlaceResult ip;
      if (auto e = RunPlace(p, sh, rank, b, true, comm, &ip, timed_out); !e.empty()) return e;
      j["ip"] = PlaceJson(ip);
      *wrong += ip.wrong;
      if (rank == 0) ProgressRow(p, sh, oop, ip);
    }
    sizes->push_back(j);
  }
  return "";
}

nlohmann::json RunRank(const CollectiveParams& p, int rank, int gpu) {
  nlohmann::json out = {{"rank", rank}, {"initOk", false}, {"ok", false}, {"verified", false}};
  auto fail = [&](const std::string& e, bool timed_out = false) {
    out["error"] = e;
    if (timed_out) out["timedOut"] = true;
    return out;
  };
  Buffers b;
  if (auto e = Prepare(p, gpu, &b); !e.empty()) return fail(e);
  ncclComm_t comm = nullptr;
  bool timed_out = false;
  if (auto e = InitComm(p, rank, &comm, &timed_out); !e.empty()) return fail(e, timed_out);
  out["initOk"] = true;
  nlohmann::json sizes = nlohmann::json::array();
  uint64_t wrong = 0;
  double seconds = 0;
  if (auto e = RunSizes(p, rank, b, comm, &sizes, &wrong, &seconds, &timed_out); !e.empty()) {
    return fail(e, timed_out);
  }
  ncclCommDestroy(comm);
  out["sizes"] = sizes;
  out["verified"] = p.check && wrong == 0;
  out["ok"] = wrong == 0;
  out["secondsPerIter"] = seconds;
  if (wrong != 0) {
    out["error"] = std::to_string(wrong) + " element(s) of the " + std::string(Name(p.spec.kind)) +
                   " results are wrong";
  }
  return out;
}

struct Child {
  size_t job;
  int rank;
  pid_t pid;
  int fd;
  std::string text;
  bool done = false;
};

std::string LogFile(const CollectiveParams& p, int rank) {
  return p.log_dir + "/nccl." + (p.tag.empty() ? "" : p.tag + ".") + "rank" + std::to_string(rank) +
         ".log";
}

// Forks the process of `p`'s rank ranks[i]: its environment, its log, its own NCCL_HOSTID.
bool StartRank(const CollectiveParams& p, size_t job, size_t i, std::vector<Child>* kids) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  std::string log = LogFile(p, p.ranks[i]);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    for (const auto& [k, v] : p.env) setenv(k.c_str(), v.c_str(), 1);
    setenv("NCCL_DEBUG_FILE", log.c_str(), 1);
    // A host ID per rank: ranks on one node (or one GPU) then talk through the NICs, not shared
    // memory.
    std::string host_id =
        p.env.contains("NCCL_HOSTID") ? p.env.at("NCCL_HOSTID") : std::string("kuberdma");
    host_id += (p.tag.empty() ? "" : "-" + p.tag) + "-r" + std::to_string(p.ranks[i]);
    setenv("NCCL_HOSTID", host_id.c_str(), 1);
    std::string line = RunRank(p, p.ranks[i], p.gpus[i]).dump() + "\n";
    (void)WriteAll(fds[1], line.data(), line.size());  // the parent reads it, or gave up on us
    _exit(0);
  }
  close(fds[1]);
  kids->push_back({job, p.ranks[i], pid, fds[0], ""});
  return true;
}

// Reads every child's answer until all are done or `deadline` passes.
void Collect(std::vector<Child>& kids, Clock::time_point deadline) {
  size_t open = kids.size();
  while (open > 0 && Clock::now() < deadline) {
    std::vector<pollfd> pfds;
    for (auto& k : kids) pfds.push_back({k.done ? -1 : k.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 200);
    for (size_t i = 0; i < kids.size(); ++i) {
      if (kids[i].done || (pfds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
      char buf[4096];
      ssize_t n = read(kids[i].fd, buf, sizeof buf);
      if (n > 0) {
        kids[i].text.append(buf, static_cast<size_t>(n));
      } else {
        kids[i].done = true;
        --open;
      }
    }
  }
}

RankOutcome Finish(Child& k, bool* timed_out) {
  if (!k.done) {
    kill(k.pid, SIGKILL);
    *timed_out = true;
  }
  close(k.fd);
  waitpid(k.pid, nullptr, 0);
  RankOutcome ro;
  ro.rank = k.rank;
  auto j = ParseUntrustedJson(k.text, "rank result").value_or(nlohmann::json());
  if (!j.is_object()) {
    ro.error =
        k.done ? "the rank process ended without a result (crashed?)" : "killed by the watchdog";
    return ro;
  }
  ro.reported = true;
  ro.init_ok = j.value("initOk", false);
  ro.ok = j.value("ok", false);
  ro.verified = j.value("verified", false);
  ro.seconds_per_iter = j.value("secondsPerIter", 0.0);
  for (const auto& x : j.value("sizes", nlohmann::json::array())) {
    if (!x.is_object()) continue;
    SizeResult sr{.bytes = x.value("bytes", size_t{0}), .count = x.value("count", size_t{0})};
    auto place = [](const nlohmann::json& p) {
      return PlaceResult{.seconds = p.value("seconds", 0.0),
                         .wrong = p.value("wrong", uint64_t{0}),
                         .checked = p.value("checked", true)};
    };
    if (x.contains("oop") && x["oop"].is_object()) sr.out_of_place = place(x["oop"]);
    if (x.contains("ip") && x["ip"].is_object()) sr.in_place = place(x["ip"]);
    ro.sizes.push_back(sr);
  }
  ro.error = j.value("error", "");
  if (j.value("timedOut", false)) *timed_out = true;
  return ro;
}

}  // namespace

// CUDA must not be initialised in the parent: a process that forks after cuInit gets children whose
// CUDA calls fail ("cannot use GPU 0"). So the GPU count comes from a short-lived child.
int GpuCount() {
  // The probe initialises CUDA in a child (hundreds of milliseconds): once per process.
  static const int count = [] {
    int fds[2];
    if (pipe(fds) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      (void)WriteAll(fds[1], &n, sizeof n);
      _exit(0);
    }
    close(fds[1]);
    int n = 0;
    if (read(fds[0], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) n = 0;
    close(fds[0]);
    waitpid(pid, nullptr, 0);
    return n;
  }();
  return count;
}

Result<void> NcclAvailable() {
  KUBERDMA_TRY(LoadNccl());
  if (GpuCount() == 0) {
    return Fail(ErrorCode::kUnsupported,
                "no CUDA device is visible (cudaGetDeviceCount reports none): inventory only");
  }
  return {};
}

std::string NcclVersion() {
  if (!LoadNccl()) return "";
  int v = 0;
  ncclGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

std::vector<CollectiveOutcome> RunCollectives(const std::vector<CollectiveParams>& jobs) {
  std::vector<CollectiveOutcome> out(jobs.size());
  std::vector<Child> kids;
  int longest = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t i = 0; i < jobs[j].ranks.size(); ++i) {
      out[j].log_files.push_back(LogFile(jobs[j], jobs[j].ranks[i]));
      if (!StartRank(jobs[j], j, i, &kids)) break;
    }
    longest = std::max(longest, jobs[j].timeout_s * Phases(jobs[j]));
  }
  // The process-level watchdog behind the in-rank deadlines.
  Collect(kids, Clock::now() + std::chrono::seconds(longest + 15));
  for (auto& k : kids) {
    bool timed_out = false;
    out[k.job].ranks.push_back(Finish(k, &timed_out));
    out[k.job].timed_out = out[k.job].timed_out || timed_out;
  }
  return out;
}

CollectiveOutcome RunCollective(const CollectiveParams& p) { return RunCollectives({p}).front(); }

}  // namespace kuberdma::validator
