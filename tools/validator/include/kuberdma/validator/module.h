// SPDX-License-Identifier: Apache-2.0
// rdma-validate's optional modules (rdma-validate-push.so, rdma-validate-verbs.so): shared objects
// beside the binary that bring their own libraries, so that rdma-validate itself needs nothing but
// glibc. Looked for beside the executable, in ../lib/kube-rdma, then by the loader's own search.
//
//   KUBERDMA_ASSIGN_OR_RETURN(void* fn, ModuleSymbol("rdma-validate-verbs.so",
//                             "kuberdma_verbs_probe", "libibverbs and its providers"));
#pragma once

#include <string>

#include "kuberdma/base/error.h"

namespace kuberdma::validator {

// `symbol` of module `file`; kUnsupported naming where it looked and what the module `needs`.
Result<void*> ModuleSymbol(const std::string& file, const char* symbol, const std::string& needs);

}  // namespace kuberdma::validator
