// SPDX-License-Identifier: Apache-2.0
// rdma-validate's optional modules (rdma-validate-push.so, rdma-validate-verbs.so): shared objects
// beside the binary that bring their own libraries, so that rdma-validate itself needs nothing but
// glibc. Looked for beside the executable, in ../lib/kube-rdma, then by the loader's own search.
//
//   KUBERDMA_ASSIGN_OR_RETURN(void* fn, ModuleSymbol("rdma-validate-verbs.so",
//                             "kuberdma_verbs_probe", "libibverbs and its providers"));
#pragma once

#include <cstddef>
#include <string>

#include "kuberdma/base/error.h"

namespace kuberdma::validator {

// `symbol` of module `file`; kUnsupported naming where it looked and what the module `needs`.
Result<void*> ModuleSymbol(const std::string& file, const char* symbol, const std::string& needs);

// A module's probe: a JSON request in, its answer written to `out`.
using ProbeFn = int (*)(const char* request_json, char* out, size_t out_len);

// Calls `symbol` of module `file` in a child process of this one, as a job's process per GPU
// would run it: the module and its library are loaded there and nowhere else, so their state
// (UCX's threads, registration caches and memory hooks) starts clean at each call and ends with
// the child. Returns the probe's answer; kUnsupported as ModuleSymbol when the module cannot be
// loaded, kTimeout when the child has not answered within `timeout_s` (it is killed), kIo when it
// died without an answer.
Result<std::string> CallInChild(const std::string& file, const char* symbol,
                                const std::string& needs, const std::string& request,
                                int timeout_s);

}  // namespace kuberdma::validator
