// SPDX-License-Identifier: Apache-2.0
// The NCCL runner: one forked process per local rank, results back over a pipe as one JSON line.
#include <cuda_runtime.h>
#include <nccl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
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
bool StreamDone(cudaStream_t s, ncclComm_t comm, Clock::time_point deadline, std::string* err) {
  while (true) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) {
      *err = std::string("CUDA: ") + cudaGetErrorString(q);
      return false;
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      *err = std::string("NCCL: ") + ncclGetErrorString(async);
      return false;
    }
    if (Clock::now() > deadline) {
      *err =
          "the AllReduce did not complete before the deadline (a peer stalled or a NIC dropped "
          "traffic)";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// A rank's device buffers, filled with deterministic data: (rank+1)*((i%7)+1).
struct Buffers {
  size_t count = 0;
  float* send = nullptr;
  float* recv = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<float> host;
  ~Buffers() {
    if (send != nullptr) cudaFree(send);
    if (recv != nullptr) cudaFree(recv);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

std::string Prepare(const CollectiveParams& p, int rank, int gpu, Buffers* b) {
  if (cudaSetDevice(gpu) != cudaSuccess) return "cannot use GPU " + std::to_string(gpu);
  b->count = p.bytes / sizeof(float);
  b->host.resize(b->count);
  for (size_t i = 0; i < b->count; ++i) {
    b->host[i] = static_cast<float>((rank + 1) * static_cast<int>((i % 7) + 1));
  }
  if (cudaMalloc(&b->send, b->count * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&b->recv, b->count * sizeof(float)) != cudaSuccess) {
    return "cannot allocate " + std::to_string(2 * p.bytes) + " bytes on GPU " +
           std::to_string(gpu);
  }
  cudaMemcpy(b->send, b->host.data(), b->count * sizeof(float), cudaMemcpyHostToDevice);
  cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking);
  return "";
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

// The warm-up and the timed phases (`repeats` of them); the seconds per timed iteration of the
// median phase, or an error (comm aborted).
std::string Iterate(const CollectiveParams& p, ncclComm_t comm, Buffers& b, double* seconds,
                    bool* timed_out) {
  std::vector<double> phases;
  for (int phase = 0; phase <= std::max(1, p.repeats); ++phase) {
    int n = phase == 0 ? p.warmup : p.iters;
    auto t0 = Clock::now();
    auto deadline = Clock::now() + std::chrono::seconds(p.timeout_s);
    for (int i = 0; i < n; ++i) {
      ncclResult_t r = ncclAllReduce(b.send, b.recv, b.count, ncclFloat, ncclSum, comm, b.stream);
      if (r == ncclInProgress) r = Settle(comm, deadline, timed_out);
      if (r != ncclSuccess) {
        ncclCommAbort(comm);
        return std::string("ncclAllReduce: ") + (*timed_out ? "timed out" : ncclGetErrorString(r));
      }
    }
    std::string err;
    if (!StreamDone(b.stream, comm, deadline, &err)) {
      ncclCommAbort(comm);
      *timed_out = Clock::now() > deadline;
      return err;
    }
    if (phase > 0)
      phases.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / std::max(1, n));
  }
  std::sort(phases.begin(), phases.end());
  *seconds = phases[phases.size() / 2];
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
  if (auto e = Prepare(p, rank, gpu, &b); !e.empty()) return fail(e);
  ncclComm_t comm = nullptr;
  bool timed_out = false;
  if (auto e = InitComm(p, rank, &comm, &timed_out); !e.empty()) return fail(e, timed_out);
  out["initOk"] = true;
  double seconds = 0;
  if (auto e = Iterate(p, comm, b, &seconds, &timed_out); !e.empty()) return fail(e, timed_out);
  cudaMemcpy(b.host.data(), b.recv, b.count * sizeof(float), cudaMemcpyDeviceToHost);
  // 1 + 2 + ... + n: every rank r contributed (r+1) times the element's factor.
  const float tri = static_cast<float>(p.nranks) * static_cast<float>(p.nranks + 1) / 2.0F;
  size_t bad = 0;
  for (size_t i = 0; i < b.count; ++i)
    bad += b.host[i] != tri * static_cast<float>((i % 7) + 1) ? 1u : 0u;
  ncclCommDestroy(comm);
  out["verified"] = bad == 0;
  out["ok"] = bad == 0;
  out["secondsPerIter"] = seconds;
  if (bad != 0) {
    out["error"] =
        std::to_string(bad) + " of " + std::to_string(b.count) + " elements have a wrong sum";
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

bool NcclAvailable(std::string* why) {
  if (GpuCount() == 0) {
    *why = "no CUDA device is visible (cudaGetDeviceCount reports none): inventory only";
    return false;
  }
  return true;
}

std::string NcclVersion() {
  int v = 0;
  ncclGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

std::vector<CollectiveOutcome> RunAllReduces(const std::vector<CollectiveParams>& jobs) {
  std::vector<CollectiveOutcome> out(jobs.size());
  std::vector<Child> kids;
  int longest = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t i = 0; i < jobs[j].ranks.size(); ++i) {
      out[j].log_files.push_back(LogFile(jobs[j], jobs[j].ranks[i]));
      if (!StartRank(jobs[j], j, i, &kids)) break;
    }
    longest = std::max(longest, jobs[j].timeout_s);
  }
  // The process-level watchdog behind the in-rank deadlines: init + warmup + timed phases.
  Collect(kids, Clock::now() + std::chrono::seconds(3 * longest + 15));
  for (auto& k : kids) {
    bool timed_out = false;
    out[k.job].ranks.push_back(Finish(k, &timed_out));
    out[k.job].timed_out = out[k.job].timed_out || timed_out;
  }
  return out;
}

CollectiveOutcome RunAllReduce(const CollectiveParams& p) { return RunAllReduces({p}).front(); }

}  // namespace kuberdma::validator
