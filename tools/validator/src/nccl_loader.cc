// SPDX-License-Identifier: Apache-2.0
// NCCL, found at run time: rdma-validate does not name libnccl.so.2 as a needed library, so the
// binary starts in any image (the node image copies it into the job's pods) and says itself
// whether, where and which NCCL it found. The NCCL entry points the runner calls are defined here
// and forward to the loaded library; they are called only after LoadNccl() succeeded.
#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kuberdma/validator/runner.h"

namespace kuberdma::validator {

namespace {

struct Loaded {
  void* handle = nullptr;
  std::string path;   // the file the loader opened
  std::string error;  // why nothing was opened
};

// Where pip's NCCL wheel (nvidia-nccl-cu*) puts the library, which no loader path names: PyTorch
// images built from pip rather than NGC's debs.
const char* const kWheelGlobs[] = {
    "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
    "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
    "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
    "/opt/conda/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
};

std::vector<std::string> WheelCandidates() {
  std::vector<std::string> out;
  for (const char* pattern : kWheelGlobs) {
    glob_t g{};
    if (glob(pattern, 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return out;
}

std::string OpenedPath(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name[0] != '\0')
    return map->l_name;
  return fallback;
}

Loaded Open() {
  Loaded l;
  if (const char* explicit_path = std::getenv("KUBERDMA_NCCL_LIBRARY");
      explicit_path != nullptr && explicit_path[0] != '\0') {
    l.handle = dlopen(explicit_path, RTLD_NOW | RTLD_GLOBAL);
    if (l.handle == nullptr)
      l.error =
          std::string("KUBERDMA_NCCL_LIBRARY=") + explicit_path + " cannot be loaded: " + dlerror();
    else
      l.path = OpenedPath(l.handle, explicit_path);
    return l;
  }
  // LD_LIBRARY_PATH, the ldconfig cache and the default directories, as for any program.
  l.handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (l.handle != nullptr) {
    l.path = OpenedPath(l.handle, "libnccl.so.2");
    return l;
  }
  std::string first = dlerror();
  for (const auto& c : WheelCandidates()) {
    l.handle = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (l.handle != nullptr) {
      l.path = OpenedPath(l.handle, c);
      return l;
    }
  }
  const char* ldpath = std::getenv("LD_LIBRARY_PATH");
  l.error = "NCCL is not in this image: libnccl.so.2 was not found in LD_LIBRARY_PATH (" +
            std::string(ldpath != nullptr && ldpath[0] != '\0' ? ldpath : "unset") +
            "), the loader cache (ldconfig -p) or a pip wheel (nvidia/nccl/lib) [" + first +
            "]; run rdma-validate from the job's own image (NGC images keep NCCL in "
            "/usr/lib/x86_64-linux-gnu) or set KUBERDMA_NCCL_LIBRARY to the library's path";
  return l;
}

const Loaded& Nccl() {
  static const Loaded loaded = Open();
  return loaded;
}

// The loaded library's `name`; a call before LoadNccl() succeeded is a bug in the runner.
template <typename Fn>
Fn Symbol(const char* name) {
  const Loaded& l = Nccl();
  void* s = l.handle != nullptr ? dlsym(l.handle, name) : nullptr;
  if (s == nullptr) {
    std::fprintf(stderr, "rdma-validate: %s is not in the loaded NCCL (%s)\n", name,
                 l.handle != nullptr ? l.path.c_str() : l.error.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(s);
}

}  // namespace

bool LoadNccl(std::string* why) {
  const Loaded& l = Nccl();
  if (l.handle == nullptr) *why = l.error;
  return l.handle != nullptr;
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
