// SPDX-License-Identifier: Apache-2.0
// rdma-validate-mpi.so: the MPI probe (`--transport mpi`, every pod's rdma-validate a rank under
// mpirun), loaded by rdma-validate only for it: it needs the job image's Open MPI (libmpi.so.40,
// HPC-X's too), so rdma-validate itself still needs nothing but glibc. One phase a call: the first
// initialises MPI (with the environment the validator set: pml ucx, the plan's UCX variables),
// each runs `iters` MPI_Allreduce or MPI_Alltoall of `bytes` over MPI_COMM_WORLD between barriers,
// and "finalize" ends MPI.
//
//   int kuberdma_mpi_probe(const char* request_json, char* out, size_t out_len)
//   request: {"phase": "allreduce"|"alltoall"|"finalize", "bytes": 8388608, "iters": 16}
//   out: {"ok": true, "rank": 0, "size": 2, "seconds": 0.4, "bytes": 16777216,
//         "version": "Open MPI v4.1.4, ..."} (or {"error": "..."}); returns 0, or 1.
#include <dlfcn.h>
// C only: the C++ bindings would need libmpi_cxx, which job images often lack.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string MpiError(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

json Init() {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return {};
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
  if (rc != MPI_SUCCESS) return {{"error", "MPI_Init: " + MpiError(rc)}};
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return {};
}

// pml ucx's UCX buffers its log file: flushed after each phase (when UCX is loaded at all), so the
// caller reads the phase's ep_cfg lines.
void FlushUcxLog() {
  void* ucs = ::dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (ucs == nullptr) return;
  if (auto* flush = reinterpret_cast<void (*)()>(::dlsym(ucs, "ucs_log_flush"))) flush();
  ::dlclose(ucs);
}

json Phase(const std::string& phase, size_t bytes, int iters) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int count = static_cast<int>(bytes / sizeof(float) / static_cast<size_t>(size)) *
                    size;  // divisible by the ranks, for alltoall
  std::vector<float> send(static_cast<size_t>(count), 1.0f), recv(send.size());
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = Clock::now();
  int rc = MPI_SUCCESS;
  for (int i = 0; i < iters && rc == MPI_SUCCESS; ++i) {
    rc = phase == "alltoall"
             ? MPI_Alltoall(send.data(), count / size, MPI_FLOAT, recv.data(), count / size,
                            MPI_FLOAT, MPI_COMM_WORLD)
             : MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rc == MPI_SUCCESS) rc = MPI_Barrier(MPI_COMM_WORLD);
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  FlushUcxLog();
  if (rc != MPI_SUCCESS) return {{"error", phase + ": " + MpiError(rc)}};
  // What this rank put on the wire: a ring allreduce 2(P-1)/P of the data, alltoall (P-1)/P.
  double wire = phase == "alltoall" ? 1.0 * (size - 1) / size : 2.0 * (size - 1) / size;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int vlen = 0;
  MPI_Get_library_version(version, &vlen);
  std::string v(version, static_cast<size_t>(vlen));
  return {
      {"ok", true},
      {"rank", rank},
      {"size", size},
      {"seconds", seconds},
      {"bytes", static_cast<uint64_t>(wire * static_cast<double>(count) * sizeof(float) * iters)},
      {"version", v.substr(0, v.find(','))}};
}

}  // namespace

extern "C" int kuberdma_mpi_probe(const char* request_json, char* out, size_t out_len) {
  auto write = [&](const json& j, int rc) {
    std::string s = j.dump();
    std::strncpy(out, s.c_str(), out_len - 1);
    out[out_len - 1] = '\0';
    return rc;
  };
  try {
    auto j = json::parse(request_json, nullptr, false);
    if (!j.is_object()) return write({{"error", "mpi: the request is not a JSON object"}}, 1);
    const std::string phase = j.value("phase", "allreduce");
    if (phase == "finalize") {
      int inited = 0;
      MPI_Initialized(&inited);
      if (inited) MPI_Finalize();
      return write({{"ok", true}}, 0);
    }
    if (json e = Init(); e.contains("error")) return write(e, 1);
    json r = Phase(phase, j.value("bytes", size_t{8} << 20), j.value("iters", 16));
    return write(r, r.contains("error") ? 1 : 0);
  } catch (const std::exception& e) {
    return write({{"error", std::string("mpi: ") + e.what()}}, 1);
  }
}
