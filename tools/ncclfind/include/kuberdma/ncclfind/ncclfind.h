// SPDX-License-Identifier: Apache-2.0
// Finding NCCL the one way both rdma-validate (which runs it) and rdma-doctor (which reports it)
// do: the library a job's process would load, opened with dlopen, and checked for every entry
// point the caller will use before any is called.
//
//   auto nccl = ncclfind::Open(std::getenv("KUBERDMA_NCCL_LIBRARY"), {"ncclGetVersion"});
//   if (!nccl.usable()) puts(nccl.error.c_str());
#pragma once

#include <string>
#include <vector>

namespace kuberdma::ncclfind {

struct Library {
  void* handle = nullptr;            // dlopen's, or null when nothing was found
  std::string path;                  // the file that was opened
  std::string version;               // "2.28.3", from ncclGetVersion; "" when it lacks it
  std::vector<std::string> missing;  // `required` symbols the library does not define
  std::string error;                 // why it is not usable, and what to do

  bool found() const { return handle != nullptr; }
  bool usable() const { return handle != nullptr && missing.empty(); }
};

// Opens `explicit_path` when it is set (KUBERDMA_NCCL_LIBRARY), else libnccl.so.2 as the
// dynamic loader finds it (LD_LIBRARY_PATH, the ldconfig cache, the default directories), else
// pip's NCCL wheel (nvidia/nccl/lib under a Python's site- or dist-packages, which no loader path
// names). A library found but lacking any of `required` is not usable: `missing` lists them.
// The handle stays open for the process's lifetime.
Library Open(const char* explicit_path, const std::vector<std::string>& required);

// "2.28.3" from NCCL's version code (2.9 and later: major*10000 + minor*100 + patch).
std::string VersionString(int code);

}  // namespace kuberdma::ncclfind
