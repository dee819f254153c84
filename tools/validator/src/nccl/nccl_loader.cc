// SPDX-License-Identifier: Apache-2.0
// NCCL, found at run time: rdma-validate does not name libnccl.so.2 as a needed library, so the
// binary starts in any image (the node image copies it into the job's pods) and says itself
// whether, where and which NCCL it found. The NCCL entry points the runner calls are defined here
// and forward to the loaded library; they are called only after LoadNccl() succeeded.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kuberdma/ncclfind/ncclfind.h"
#include "kuberdma/validator/runner.h"

namespace kuberdma::validator {

namespace {

// Every NCCL entry point forwarded below: checked in the library before any is called, so a
// library that is not NCCL (or too old) is a clear error, not an abort mid-run.
const std::vector<std::string> kEntryPoints = {"ncclGetVersion",
                                               "ncclGetErrorString",
                                               "ncclGetUniqueId",
                                               "ncclCommInitRankConfig",
                                               "ncclCommGetAsyncError",
                                               "ncclCommAbort",
                                               "ncclCommDestroy",
                                               "ncclGroupStart",
                                               "ncclGroupEnd",
                                               "ncclAllReduce",
                                               "ncclAllGather",
                                               "ncclReduceScatter",
                                               "ncclReduce",
                                               "ncclBroadcast",
                                               "ncclSend",
                                               "ncclRecv"};

const ncclfind::Library& Nccl() {
  static const ncclfind::Library loaded =
      ncclfind::Open(std::getenv("KUBERDMA_NCCL_LIBRARY"), kEntryPoints);
  return loaded;
}

// The loaded library's `name`; a call before LoadNccl() succeeded is a bug in the runner.
template <typename Fn>
Fn Symbol(const char* name) {
  const ncclfind::Library& l = Nccl();
  void* s = l.usable() ? dlsym(l.handle, name) : nullptr;
  if (s == nullptr) {
    std::fprintf(stderr, "rdma-validate: %s is not in the loaded NCCL (%s)\n", name,
                 l.handle != nullptr ? l.path.c_str() : l.error.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(s);
}

}  // namespace

Result<void> LoadNccl() {
  const ncclfind::Library& l = Nccl();
  if (!l.usable()) return Fail(ErrorCode::kUnsupported, l.error);
  return {};
}

std::string NcclUnusable() {
  const ncclfind::Library& l = Nccl();
  return l.found() && !l.usable() ? l.error : "";
}

std::string NcclLibrary() { return Nccl().path; }

}  // namespace kuberdma::validator

// The entry points the runner uses, forwarding to the loaded library.
using kuberdma::validator::Symbol;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  static const auto fn = Symbol<decltype(&ncclGetVersion)>("ncclGetVersion");
  return fn(version);
}
const char* ncclGetErrorString(ncclResult_t result) {
  static const auto fn = Symbol<decltype(&ncclGetErrorString)>("ncclGetErrorString");
  return fn(result);
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  static const auto fn = Symbol<decltype(&ncclGetUniqueId)>("ncclGetUniqueId");
  return fn(uniqueId);
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  static const auto fn = Symbol<decltype(&ncclCommInitRankConfig)>("ncclCommInitRankConfig");
  return fn(comm, nranks, commId, rank, config);
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  static const auto fn = Symbol<decltype(&ncclCommGetAsyncError)>("ncclCommGetAsyncError");
  return fn(comm, asyncError);
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  static const auto fn = Symbol<decltype(&ncclCommAbort)>("ncclCommAbort");
  return fn(comm);
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  static const auto fn = Symbol<decltype(&ncclCommDestroy)>("ncclCommDestroy");
  return fn(comm);
}
ncclResult_t ncclGroupStart() {
  static const auto fn = Symbol<decltype(&ncclGroupStart)>("ncclGroupStart");
  return fn();
}
ncclResult_t ncclGroupEnd() {
  static const auto fn = Symbol<decltype(&ncclGroupEnd)>("ncclGroupEnd");
  return fn();
}
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  static const auto fn = Symbol<decltype(&ncclAllReduce)>("ncclAllReduce");
  return fn(sendbuff, recvbuff, count, datatype, op, comm, stream);
}
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  static const auto fn = Symbol<decltype(&ncclAllGather)>("ncclAllGather");
  return fn(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  static const auto fn = Symbol<decltype(&ncclReduceScatter)>("ncclReduceScatter");
  return fn(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  static const auto fn = Symbol<decltype(&ncclReduce)>("ncclReduce");
  return fn(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  static const auto fn = Symbol<decltype(&ncclBroadcast)>("ncclBroadcast");
  return fn(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  static const auto fn = Symbol<decltype(&ncclSend)>("ncclSend");
  return fn(sendbuff, count, datatype, peer, comm, stream);
}
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  static const auto fn = Symbol<decltype(&ncclRecv)>("ncclRecv");
  return fn(recvbuff, count, datatype, peer, comm, stream);
}

}  // extern "C"
