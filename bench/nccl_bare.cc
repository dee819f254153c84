// SPDX-License-Identifier: Apache-2.0
// The validator's bandwidth peer: a bare NCCL AllReduce loop (blocking init, no verification, no
// counters, no log parsing) on the same environment. Prints {"busbw": GB/s, "seconds": s}.
//
//   NCCL_COMM_ID=10.1.0.1:29500 nccl_bare <rank> <world> <bytes> <iters>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: NCCL_COMM_ID=addr:port %s <rank> <world> <bytes> <iters>\n",
                 argv[0]);
    return 2;
  }
  int rank = std::atoi(argv[1]);
  int world = std::atoi(argv[2]);
  size_t bytes = std::strtoull(argv[3], nullptr, 10);
  int iters = std::atoi(argv[4]);
  size_t count = bytes / sizeof(float);
  float* send = nullptr;
  float* recv = nullptr;
  cudaSetDevice(0);
  cudaMalloc(&send, bytes);
  cudaMalloc(&recv, bytes);
  cudaMemset(send, 0, bytes);
  cudaStream_t s;
  cudaStreamCreate(&s);
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, world, id, rank) != ncclSuccess) return 1;
  for (int i = 0; i < 3; ++i) ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s);
  cudaStreamSynchronize(s);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s);
  cudaStreamSynchronize(s);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  double busbw = static_cast<double>(bytes) / sec / 1e9 * 2.0 * (world - 1) / world;
  std::printf("{\"rank\":%d,\"busbw\":%.4f,\"seconds\":%.6f}\n", rank, busbw, sec);
  ncclCommDestroy(comm);
  return 0;
}
