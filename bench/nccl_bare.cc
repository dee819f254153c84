// SPDX-License-Identifier: Apache-2.0
// The validator's bandwidth peer: a bare NCCL loop of one collective (blocking init, no
// verification, no counters, no log parsing) on the same environment, sized as nccl-tests sizes
// it (`bytes` is all_gather's output, reduce_scatter's and alltoall's input, the buffer of the
// others). Several sizes (comma-separated) are swept on one communicator, smallest buffer first,
// as rdma-validate and nccl-tests sweep: each size warmed up, then timed. Prints per size
// {"rank": r, "collective": name, "bytes": n, "busbw": GB/s, "seconds": s}.
//
//   NCCL_COMM_ID=10.1.0.1:29500 nccl_bare <rank> <world> <bytes>[,<bytes>...] <iters> [collective]
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

// One call of `c` over floats: n elements is the size column / 4.
ncclResult_t Call(const std::string& c, float* send, float* recv, size_t n, int rank, int world,
                  ncclComm_t comm, cudaStream_t s) {
  auto w = static_cast<size_t>(world);
  if (c == "all_reduce") return ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, s);
  if (c == "all_gather") return ncclAllGather(send, recv, n / w, ncclFloat, comm, s);
  if (c == "reduce_scatter")
    return ncclReduceScatter(send, recv, n / w, ncclFloat, ncclSum, comm, s);
  if (c == "broadcast") return ncclBroadcast(send, recv, n, ncclFloat, 0, comm, s);
  if (c == "reduce") return ncclReduce(send, recv, n, ncclFloat, ncclSum, 0, comm, s);
  ncclGroupStart();
  if (c == "alltoall") {
    for (int p = 0; p < world; ++p) {
      ncclSend(send + static_cast<size_t>(p) * (n / w), n / w, ncclFloat, p, comm, s);
      ncclRecv(recv + static_cast<size_t>(p) * (n / w), n / w, ncclFloat, p, comm, s);
    }
  } else {  // sendrecv: a ring
    ncclSend(send, n, ncclFloat, (rank + 1) % world, comm, s);
    ncclRecv(recv, n, ncclFloat, (rank + world - 1) % world, comm, s);
  }
  return ncclGroupEnd();
}

double BusFactor(const std::string& c, int world) {
  double n = world;
  if (c == "all_reduce") return 2 * (n - 1) / n;
  if (c == "all_gather" || c == "reduce_scatter" || c == "alltoall") return (n - 1) / n;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: NCCL_COMM_ID=addr:port %s <rank> <world> <bytes>[,<bytes>...] <iters> "
                 "[collective]\n",
                 argv[0]);
    return 2;
  }
  int rank = std::atoi(argv[1]);
  int world = std::atoi(argv[2]);
  std::vector<size_t> sizes;
  for (const char* p = argv[3]; *p != '\0';) {
    char* end = nullptr;
    sizes.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') return 2;
  }
  if (sizes.empty() || std::find(sizes.begin(), sizes.end(), size_t{0}) != sizes.end()) return 2;
  int iters = std::atoi(argv[4]);
  std::string c = argc > 5 ? argv[5] : "all_reduce";
  size_t largest = *std::max_element(sizes.begin(), sizes.end());
  size_t cap = largest / sizeof(float) / static_cast<size_t>(world) * static_cast<size_t>(world);
  float* send = nullptr;
  float* recv = nullptr;
  cudaSetDevice(0);
  cudaMalloc(&send, cap * sizeof(float));
  cudaMalloc(&recv, cap * sizeof(float));
  cudaMemset(send, 0, cap * sizeof(float));
  cudaStream_t s;
  cudaStreamCreate(&s);
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, world, id, rank) != ncclSuccess) return 1;
  for (size_t bytes : sizes) {
    size_t n = bytes / sizeof(float) / static_cast<size_t>(world) * static_cast<size_t>(world);
    for (int i = 0; i < 3; ++i) {
      if (Call(c, send, recv, n, rank, world, comm, s) != ncclSuccess) return 1;
    }
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) (void)Call(c, send, recv, n, rank, world, comm, s);
    cudaStreamSynchronize(s);
    double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    double busbw = static_cast<double>(n * sizeof(float)) / sec / 1e9 * BusFactor(c, world);
    std::printf(
        "{\"rank\":%d,\"collective\":\"%s\",\"bytes\":%zu,\"busbw\":%.4f,\"seconds\":%.6f}\n", rank,
        c.c_str(), bytes, busbw, sec);
    std::fflush(stdout);
  }
  ncclCommDestroy(comm);
  return 0;
}
